#!/usr/bin/env bash
# Install the build tree tessera's tests run in (meson install --destdir: a staged install, as a
# package build does; nothing is compiled again), then build and run examples/sgemm.c against
# it through pkg-config, as a user would. Prints TAP.
# Usage: install_check.sh BUILD_DIR WORK_DIR SOURCE_DIR
set -uo pipefail
build=$1
work=$2
src=$3
rm -rf "$work"
mkdir -p "$work"
echo "1..1"
if meson install -C "$build" --no-rebuild --destdir "$work/root" >"$work.log" 2>&1; then
    pc=$(find "$work/root" -name tessera.pc | head -n 1)
    # the .pc file names the configured prefix; the sysroot maps its -I and -L (tessera's first)
    # into the staging root
    export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$work/root"
    var() { # pkgconf maps --variable's paths too; freedesktop pkg-config does not
        local v
        v=$(pkg-config --variable="$1" tessera)
        case $v in "$work/root"/*) echo "$v" ;; *) echo "$work/root$v" ;; esac
    }
    libdir=$(var libdir)
    includedir=$(var includedir)
    bin=$(var prefix)/bin
    if [ -f "$libdir/libtessera.so" ] && [ -f "$includedir/tessera.h" ] && [ -x "$bin/tessera" ] &&
       cc "$src/examples/sgemm.c" $(pkg-config --cflags --libs tessera) -lm -o "$work/sgemm" >>"$work.log" 2>&1 &&
       LD_LIBRARY_PATH="$libdir" "$work/sgemm" >>"$work.log" 2>&1 &&
       LD_LIBRARY_PATH="$libdir" "$bin/tessera" devices --json >>"$work.log" 2>&1; then
        echo "ok 1 - install, pkg-config, build and run examples/sgemm.c"
        exit 0
    fi
fi
cat "$work.log" | sed 's/^/# /'
echo "not ok 1 - install, pkg-config, build and run examples/sgemm.c"
exit 1
