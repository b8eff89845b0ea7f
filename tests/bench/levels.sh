#!/bin/sh
# levels.sh KINFER SHARED [ROUNDS] - every shared network at each vector level beside ONNX Runtime:
# per network ROUNDS (default 3) rounds of `kinfer bench --isa avx2`, `--isa avx512` (when the CPU
# has it) and ort-bench.js, one right after the other, 2 threads, float32 weights
# (model_f32.pnnx.param where the zoo has it). Prints "network round avx2_ms avx512_ms ort_ms",
# then the FMA peak of each level (SHARED/tools/fma-peak). Benchmarks, not tests: run it on a
# quiet machine; ONNX Runtime is used when node finds onnxruntime-node (NODE_PATH).
set -eu
K=$1 SHARED=$2 R=${3:-3}
med() { sed -n 's/.*median \([0-9.]*\).*/\1/p' | head -n 1; }
for n in resnet18 mobilenet_v2 mobilenet_v3_small squeezenet1_1 unet yolov5s; do
    d=$SHARED/models/$n
    p=$d/model_f32.pnnx.param
    [ -f "$p" ] || p=$d/model.pnnx.param
    [ -f "$p" ] || continue
    runs=20
    [ "$n" = yolov5s ] && runs=8
    for i in $(seq "$R"); do
        a=$("$K" bench "$p" --isa avx2 --runs $runs | med)
        b=$("$K" bench "$p" --isa avx512 --runs $runs 2>/dev/null | med || true)
        o=$(node "$SHARED/tools/ort-bench.js" "$d/model.onnx" --threads 2 --runs $runs --warmup 3 \
            2>/dev/null | med || true)
        echo "$n $i ${a:-—} ${b:-—} ${o:-—}"
    done
done
[ -x "$SHARED/tools/fma-peak" ] && "$SHARED/tools/fma-peak"
