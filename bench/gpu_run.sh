#!/bin/bash
# One lease of a GPU machine (the `device` tool): run tessera's binaries built here against the
# machine's OpenCL driver, with the libraries they need carried in .gpu/ (git-ignored), and leave
# logs and JSON under $OUT. Prepare .gpu/ with `bench/gpu_run.sh --pack` on the build machine.
#   bench/gpu_run.sh --pack            copy build/ binaries and their libraries into .gpu/
#   bench/gpu_run.sh gemm              tests, tune GEMM, bench GEMM against CLBlast
#   bench/gpu_run.sh others            tune conv2d, attention, gelu; bench conv2d and attention
#   bench/gpu_run.sh multi             device groups on the GPU: test_multi, bench/multi_device
#   bench/gpu_run.sh splitk            GEMM split-K: its tests on the GPU, then bench GEMM as shipped
#                                      (with CLBlast) and over the class defaults with SPLIT=1 0 2 4 8
#   bench/gpu_run.sh check             every kernel test program on the GPU (several at a time), then
#                                      tune the ops other than GEMM and bench them; logs in $OUT/logs.tgz
#   bench/gpu_run.sh gemm2             the GEMM, attention and launch tests; GEMM benched with the entries
#                                      it finds and with SPLIT forced over the class defaults, tuned,
#                                      benched again; logs in $OUT/logs.tgz
set -u
# the kernel test programs `check` runs (tests/meson.build's kernel suites and the launch-path tests)
CHECK_TESTS=${CHECK_TESTS:-"gemm conv attention conv_epilogue conv_weights layernorm gelu embedding pool dtype api_random graph launch ops"}
if [ "${1:-}" = --pack ]; then
    rm -rf .gpu && mkdir -p .gpu/lib .gpu/bin || exit 1
    cp build/tools/tessera build/bench/multi_device .gpu/bin/ || exit 1
    for t in $CHECK_TESTS multi; do cp build/tests/test_$t .gpu/bin/ || exit 1; done
    for exe in .gpu/bin/*; do ldd "$exe"; done | awk '/=> \//{print $3}' | sort -u |
        grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl)\.so' | xargs -I{} cp -L {} .gpu/lib/ || exit 1
    # (OpenBLAS alone is 35 MB: packed as one xz archive the whole folder travels in ~9 MB)
    tar -C .gpu -cJf .gpu/pack.txz lib bin && rm -rf .gpu/lib .gpu/bin || exit 1
    du -sh .gpu
    exit 0
fi
: "${OUT:?run on the device machine, where OUT is set}"
G=/tmp/gpu-pack # the packed binaries and libraries, unpacked outside the working tree
rm -rf $G && mkdir -p $G && tar -C $G -xJf .gpu/pack.txz || exit 1
export LD_LIBRARY_PATH=$G/lib
if [ -z "${DRY:-}" ]; then
    mkdir -p /tmp/vendors
    icd=$(find / -xdev -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
    echo "$icd" >/tmp/vendors/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/vendors TSR_DEVICE=gpu
else # DRY=1: a rehearsal of the script here, on the CPU device (nvidia-smi missing is fine)
    export TSR_DEVICE=cpu
fi
export TSR_CACHE_DIR=/tmp/tsr-cache
export TSR_TUNING_DB=$OUT/tuning.json
T=$G/bin/tessera
log() { echo "== $(date +%T) $*"; }
case "${1:-}" in
gemm)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee $OUT/gpu.txt
    $T devices | tee -a $OUT/gpu.txt
    log "test_gemm (gpu kernel forced and default)"
    timeout 150 $G/bin/test_gemm >$OUT/test-gemm.txt 2>&1; echo "test_gemm rc=$?"; grep -E "^not ok|^# (ok|fail)|1\.\." $OUT/test-gemm.txt
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
    timeout 120 $G/bin/test_gemm >$OUT/test-gemm.txt 2>&1; echo "test_gemm rc=$?"; grep -E "^not ok|^# (ok|fail)|1\.\." $OUT/test-gemm.txt
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
    TSR_MULTI_DEVICES=gpu,gpu timeout 120 $G/bin/test_multi >$OUT/test-multi.txt 2>&1; echo "test_multi rc=$?"
    grep -E "^not ok|^ok|^# (ok|fail|call|attention)" $OUT/test-multi.txt
    log "GEMM 4096: the GPU alone (pipelined tiles) and plain, then two streams of it"
    timeout 150 $G/bin/multi_device --device gpu --size 4096 --reps 7 --json $OUT/multi-gpu.json 2>&1 | tail -3
    timeout 150 $G/bin/multi_device --device gpu --device gpu --size 4096 --reps 7 --json $OUT/multi-gpu-twice.json 2>&1 | tail -3
    log "GEMM 8192, the GPU alone"
    timeout 120 $G/bin/multi_device --device gpu --size 8192 --reps 3 --json $OUT/multi-gpu-8192.json 2>&1 | tail -2
    log "attention L = 4096, the GPU twice"
    timeout 120 $G/bin/multi_device --op attention --device gpu --device gpu --size 4096 --reps 3 --json $OUT/multi-gpu-attention.json 2>&1 | tail -2
    log done ;;
splitk)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee $OUT/gpu.txt
    log "test_gemm split_k* (forced and auto splits against the double reference)"
    TSR_TEST_FILTER='split_k*' timeout 180 $G/bin/test_gemm >$OUT/test-splitk.txt 2>&1; echo "test_gemm split_k* rc=$?"
    grep -E "^not ok|^ok|^# (ok|fail)" $OUT/test-splitk.txt
    S=${SPLIT_SIZES:-512x768x3072,512x768x768,512,1024,2048,512x3072x768,8x4096x4096}
    log "bench gemm as shipped (SPLIT=0 auto over the entries in force), with CLBlast"
    $T bench gemm --sizes $S --budget 0.4 --json $OUT/bench-splitk-shipped.json 2>&1 | tail -10
    # TSR_CONFIG_GEMM starts from each class's built-in default (not a tuned entry) and sets SPLIT
    for s in ${SPLITS:-1 0 2 4 8}; do
        log "bench gemm, class defaults with SPLIT=$s"
        TSR_CONFIG_GEMM="SPLIT=$s" $T bench gemm --sizes $S --budget 0.3 --no-peers \
            --json $OUT/bench-split$s.json 2>&1 | tail -8
    done
    rm -f $OUT/*.lock
    log done ;;
check)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee $OUT/gpu.txt
    $T devices >>$OUT/gpu.txt 2>&1
    mkdir -p /tmp/logs
    log "kernel tests on the GPU, ${CHECK_JOBS:-6} programs at a time"
    # each program with its own binary cache; TSR_TEST_SEED fixed per run so a failure can be replayed
    export TSR_TEST_SEED=${TSR_TEST_SEED:-$(date +%s)}
    echo "TSR_TEST_SEED=$TSR_TEST_SEED" | tee /tmp/logs/seed.txt
    printf '%s\n' $CHECK_TESTS | xargs -P ${CHECK_JOBS:-6} -I{} sh -c \
        'TSR_CACHE_DIR=/tmp/tsr-cache-{} TSR_TUNING_DB=/tmp/test-tuning-{}.json timeout ${TEST_TIMEOUT:-200} '$G'/bin/test_{} >/tmp/logs/test-{}.txt 2>&1; echo "test_{} rc=$?" >>/tmp/logs/rc.txt'
    sort /tmp/logs/rc.txt | tee $OUT/tests.txt
    for t in $CHECK_TESTS; do
        printf '%-14s ok %4s  not ok %3s  skip %3s\n' $t "$(grep -c '^ok' /tmp/logs/test-$t.txt)" \
            "$(grep -c '^not ok' /tmp/logs/test-$t.txt)" "$(grep -c -i '# skip' /tmp/logs/test-$t.txt)"
    done | tee -a $OUT/tests.txt
    grep -h -B2 -A12 '^not ok' /tmp/logs/test-*.txt | head -150 >>$OUT/tests.txt
    [ -f .gpu/tuning-in.json ] && cp .gpu/tuning-in.json $OUT/tuning.json
    for spec in ${CHECK_TUNE:-conv2d:80 attention:40 layernorm:15 gelu:15 pool2d:15}; do
        log "tune ${spec%%:*}"
        $T tune --op ${spec%%:*} --budget ${spec##*:} --log /tmp/logs/tune-${spec%%:*}.jsonl >/tmp/logs/tune-${spec%%:*}.txt 2>&1
        tail -16 /tmp/logs/tune-${spec%%:*}.txt
    done
    for b in ${CHECK_BENCH:-gemm attention conv2d}; do
        log "bench $b"
        case $b in
        gemm) args="--sizes ${GEMM_SIZES:-1024,2048,4096,512,512x768x768,512x3072x768,512x768x3072,4096x8x4096,8x4096x4096,64@128x128x128} --budget 0.4" ;;
        attention) args="--sizes 1024,2048,4096 --budget 0.4" ;;
        *) args="--budget 0.3" ;;
        esac
        $T bench $b $args --json /tmp/logs/bench-$b.json >/tmp/logs/bench-$b.txt 2>&1
        tail -24 /tmp/logs/bench-$b.txt
    done
    cp /tmp/logs/bench-gemm.json $OUT/ 2>/dev/null
    rm -f $OUT/*.lock
    tar -czf $OUT/logs.tgz -C /tmp logs
    log done ;;
gemm2)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee $OUT/gpu.txt
    mkdir -p /tmp/logs
    export TSR_TEST_SEED=${TSR_TEST_SEED:-$(date +%s)}
    echo "TSR_TEST_SEED=$TSR_TEST_SEED" | tee /tmp/logs/seed.txt
    log "tests: ${GEMM2_TESTS:-gemm attention launch} (attention's timeout ${ATT_TIMEOUT:-240} s)"
    for t in ${GEMM2_TESTS:-gemm attention launch}; do
        lim=${TEST_TIMEOUT:-200}; [ $t = attention ] && lim=${ATT_TIMEOUT:-240}
        (TSR_CACHE_DIR=/tmp/tsr-cache-$t TSR_TUNING_DB=/tmp/test-tuning-$t.json timeout $lim $G/bin/test_$t \
            >/tmp/logs/test-$t.txt 2>&1; echo "test_$t rc=$?" >>/tmp/logs/rc.txt) &
    done
    wait
    sort /tmp/logs/rc.txt | tee $OUT/tests.txt
    for t in ${GEMM2_TESTS:-gemm attention launch}; do
        printf '%-14s ok %4s  not ok %3s  last: %s\n' $t "$(grep -c '^ok' /tmp/logs/test-$t.txt)" \
            "$(grep -c '^not ok' /tmp/logs/test-$t.txt)" "$(grep -E '^# [0-9.]+ s' /tmp/logs/test-$t.txt | tail -1)"
    done | tee -a $OUT/tests.txt
    grep -h -B2 -A12 '^not ok' /tmp/logs/test-*.txt | head -100 >>$OUT/tests.txt
    sizes=${GEMM_SIZES:-1024,2048,4096,512,512x768x768,512x3072x768,512x768x3072,4096x8x4096,8x4096x4096,64@128x128x128}
    log "bench gemm with the entries it finds (split-K automatic), with CLBlast"
    timeout 120 $T bench gemm --sizes $sizes --budget 0.4 --json /tmp/logs/bench-gemm-found.json >/tmp/logs/bench-gemm-found.txt 2>&1
    tail -12 /tmp/logs/bench-gemm-found.txt
    # TSR_CONFIG_GEMM starts from each class's built-in default (not a tuned entry) and sets SPLIT
    for s in ${SPLITS:-1 0 2 4 8}; do
        log "bench gemm, class defaults with SPLIT=$s"
        TSR_CONFIG_GEMM="SPLIT=$s" timeout 60 $T bench gemm --sizes ${SPLIT_SIZES:-512x768x3072,512x768x768,512,1024,2048,512x3072x768} \
            --budget 0.3 --no-peers --json /tmp/logs/bench-split$s.json >/tmp/logs/bench-split$s.txt 2>&1
        tail -7 /tmp/logs/bench-split$s.txt
    done
    [ -f .gpu/tuning-in.json ] && cp .gpu/tuning-in.json $OUT/tuning.json
    log "tune gemm"
    timeout $((${GEMM_BUDGET:-120} + 60)) $T tune --op gemm --budget ${GEMM_BUDGET:-120} ${GEMM_CLASSES:+--classes $GEMM_CLASSES} --log /tmp/logs/tune-gemm.jsonl \
        >/tmp/logs/tune-gemm.txt 2>&1; tail -12 /tmp/logs/tune-gemm.txt
    log "bench gemm, tuned"
    timeout 120 $T bench gemm --sizes $sizes --budget 0.4 --json $OUT/bench-gemm.json >/tmp/logs/bench-gemm.txt 2>&1
    tail -14 /tmp/logs/bench-gemm.txt
    rm -f $OUT/*.lock
    tar -czf $OUT/logs.tgz -C /tmp logs
    log done ;;
*) echo "usage: $0 --pack | gemm | others | multi | splitk | check | gemm2" >&2; exit 2 ;;
esac
