#!/usr/bin/env bash
# Install tessera into a scratch prefix, then build and run examples/sgemm.c against it
# through pkg-config, as a user would. Prints TAP.
set -uo pipefail
src=$1
work=$2
rm -rf "$work"
echo "1..1"
if meson setup "$work/build" "$src" --prefix="$work/prefix" -Dtests=false -Dpeers=disabled >"$work.log" 2>&1 &&
   meson install -C "$work/build" >>"$work.log" 2>&1; then
    pcdir=$(dirname "$(find "$work/prefix" -name tessera.pc | head -n 1)")
    export PKG_CONFIG_PATH="$pcdir"
    libdir=$(pkg-config --variable=libdir tessera)
    if cc "$src/examples/sgemm.c" $(pkg-config --cflags --libs tessera) -lm -o "$work/sgemm" >>"$work.log" 2>&1 &&
       [ -x "$work/prefix/bin/tessera" ] && [ -f "$work/prefix/include/tessera.h" ] &&
       LD_LIBRARY_PATH="$libdir" "$work/sgemm" >>"$work.log" 2>&1 &&
       LD_LIBRARY_PATH="$libdir" "$work/prefix/bin/tessera" devices --json >>"$work.log" 2>&1; then
        echo "ok 1 - install, pkg-config, build and run examples/sgemm.c"
        exit 0
    fi
fi
cat "$work.log" | sed 's/^/# /'
echo "not ok 1 - install, pkg-config, build and run examples/sgemm.c"
exit 1
