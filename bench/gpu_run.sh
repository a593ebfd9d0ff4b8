#!/bin/bash
# One lease of a GPU machine (the `device` tool): run tessera's binaries built here against the
# machine's OpenCL driver, with the libraries they need carried in .gpu/ (git-ignored), and leave
# logs and JSON under $OUT. Prepare .gpu/ with `bench/gpu_run.sh --pack` on the build machine.
#   bench/gpu_run.sh --pack            copy build/ binaries and their libraries into .gpu/
#   bench/gpu_run.sh gemm              tests, tune GEMM, bench GEMM against CLBlast
#   bench/gpu_run.sh others            tune conv2d, attention, gelu; bench conv2d and attention
#   bench/gpu_run.sh multi             device groups on the GPU: test_multi, bench/multi_device
set -u
if [ "${1:-}" = --pack ]; then
    rm -rf .gpu && mkdir -p .gpu/lib .gpu/bin || exit 1
    cp build/tools/tessera build/tests/test_gemm build/tests/test_conv build/tests/test_attention build/tests/test_multi \
       build/bench/multi_device .gpu/bin/ || exit 1
    for exe in .gpu/bin/*; do ldd "$exe"; done | awk '/=> \//{print $3}' | sort -u |
        grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl)\.so' | xargs -I{} cp -L {} .gpu/lib/ || exit 1
    du -sh .gpu
    exit 0
fi
: "${OUT:?run on the device machine, where OUT is set}"
export LD_LIBRARY_PATH=$PWD/.gpu/lib
mkdir -p /tmp/vendors
icd=$(find / -xdev -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
echo "$icd" >/tmp/vendors/nvidia.icd
export OCL_ICD_VENDORS=/tmp/vendors TSR_DEVICE=gpu TSR_CACHE_DIR=/tmp/tsr-cache
export TSR_TUNING_DB=$OUT/tuning.json
T=.gpu/bin/tessera
log() { echo "== $(date +%T) $*"; }
case "${1:-}" in
gemm)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee $OUT/gpu.txt
    $T devices | tee -a $OUT/gpu.txt
    log "test_gemm (gpu kernel forced and default)"
    timeout 150 .gpu/bin/test_gemm >$OUT/test-gemm.txt 2>&1; echo "test_gemm rc=$?"; grep -E "^not ok|^# (ok|fail)|1\.\." $OUT/test-gemm.txt
    log "bench gemm, untuned (built-in GPU defaults)"
    $T bench gemm --budget 0.4 --json $OUT/bench-gemm-default.json 2>&1 | tail -14
    log "tune gemm"
    $T tune --op gemm --budget ${GEMM_BUDGET:-240} --log $OUT/tune-gemm-log.jsonl 2>&1 | tail -30
    log "bench gemm, tuned"
    $T bench gemm --budget 0.6 --json $OUT/bench-gemm-tuned.json 2>&1 | tail -14
    log done ;;
others)
    [ -f .gpu/tuning-in.json ] && cp .gpu/tuning-in.json $OUT/tuning.json
    log "test_gemm"
    timeout 120 .gpu/bin/test_gemm >$OUT/test-gemm.txt 2>&1; echo "test_gemm rc=$?"; grep -E "^not ok|^# (ok|fail)|1\.\." $OUT/test-gemm.txt
    for op in conv2d attention gelu; do
        log "tune $op"
        $T tune --op $op --budget ${OTHER_BUDGET:-90} 2>&1 | tail -12
    done
    log "bench attention"
    $T bench attention --sizes 1024,2048,4096 --budget 0.5 --json $OUT/bench-attention.json 2>&1 | tail -12
    log "bench gemm (final entries)"
    $T bench gemm --budget 0.6 --json $OUT/bench-gemm-final.json 2>&1 | tail -14
    log "bench conv2d"
    $T bench conv2d --budget 0.4 --json $OUT/bench-conv2d.json 2>&1 | tail -40
    log done ;;
multi)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee $OUT/gpu.txt
    log "test_multi on the GPU twice (two handles, two contexts)"
    TSR_MULTI_DEVICES=gpu,gpu timeout 120 .gpu/bin/test_multi >$OUT/test-multi.txt 2>&1; echo "test_multi rc=$?"
    grep -E "^not ok|^ok|^# (ok|fail|call|attention)" $OUT/test-multi.txt
    log "GEMM 4096: the GPU alone (pipelined tiles) and plain, then two streams of it"
    timeout 150 .gpu/bin/multi_device --device gpu --size 4096 --reps 7 --json $OUT/multi-gpu.json 2>&1 | tail -3
    timeout 150 .gpu/bin/multi_device --device gpu --device gpu --size 4096 --reps 7 --json $OUT/multi-gpu-twice.json 2>&1 | tail -3
    log "GEMM 8192, the GPU alone"
    timeout 120 .gpu/bin/multi_device --device gpu --size 8192 --reps 3 --json $OUT/multi-gpu-8192.json 2>&1 | tail -2
    log "attention L = 4096, the GPU twice"
    timeout 120 .gpu/bin/multi_device --op attention --device gpu --device gpu --size 4096 --reps 3 --json $OUT/multi-gpu-attention.json 2>&1 | tail -2
    log done ;;
*) echo "usage: $0 --pack | gemm | others | multi" >&2; exit 2 ;;
esac
