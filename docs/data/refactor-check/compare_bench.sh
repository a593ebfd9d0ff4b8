#!/bin/bash
# Old (a0573ea) and new tessera bench, alternated, same shapes; JSON into /tmp/cmp/
set -u
OLD=${OLD:-/work/wt/base/build/tools/tessera}  # a build of a0573ea
NEW=$1
mkdir -p /tmp/cmp
for round in 1 2 3; do
  for which in old new; do
    bin=$OLD; [ $which = new ] && bin=$NEW
    $bin bench gemm --sizes 256,1024,512x3072x768 --budget 1 --json /tmp/cmp/gemm-$which-$round.json >/dev/null 2>&1 || echo "gemm $which failed"
    $bin bench gelu --sizes 1M,16M --part elementwise --budget 1 --json /tmp/cmp/gelu-$which-$round.json >/dev/null 2>&1 || echo "gelu $which failed"
    $bin bench attention --sizes 256,1024 --budget 1 --json /tmp/cmp/attention-$which-$round.json >/dev/null 2>&1 || echo "attn $which failed"
    $bin bench conv2d --sizes 1 --layers l1.3x3,l3.3x3 --part layers --budget 1 --json /tmp/cmp/conv2d-$which-$round.json >/dev/null 2>&1 || echo "conv $which failed"
  done
done
