#!/bin/sh
# valgrind.sh [KINFER] - runs `kinfer run` under valgrind (memcheck, full leak check) on whole
# networks and on one failing load of each kind (bad param, bad bin, bad npy, bad image, bad
# JPEG). Any memory error or definite/indirect leak fails the script. KINFER defaults to
# build/hard/kinfer (CI passes its own build); run from the repository root.
set -u
K=${1:-build/hard/kinfer}
SHARED=${KI_SHARED:-../shared/models}
LOG=${TMPDIR:-/tmp}/ki_valgrind.$$
OUT=${TMPDIR:-/tmp}/ki_valgrind_out.$$
VG="valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --log-file=$LOG"
# GOMP_SPINCOUNT set: kinfer would otherwise execute itself again to set it (cli/main.c), and
# that second process would run outside valgrind.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 GOMP_SPINCOUNT=10000
failed=0
n=0

# check NAME EXPECTED_EXIT ARGS...: valgrind must report nothing and kinfer must exit as expected.
check() {
    name=$1
    want=$2
    shift 2
    n=$((n + 1))
    rm -rf "$OUT"
    $VG "$K" "$@" --threads 1 --save-dir "$OUT" > /dev/null 2>&1
    rc=$?
    if [ "$rc" -ne "$want" ] || [ -s "$LOG" ]; then
        echo "valgrind: FAIL $name (exit $rc, expected $want)"
        cat "$LOG"
        failed=$((failed + 1))
    else
        echo "valgrind: ok   $name (exit $rc)"
    fi
    rm -f "$LOG"
}

D=tests/data
M=tests/malformed
C=$D/ops/conv_basic
check mnist_cnn 0 run $D/nets/mnist_cnn/model.pnnx.param $D/nets/mnist_cnn/model.pnnx.bin \
    $D/nets/mnist_cnn/in0.npy
for net in squeezenet1_1; do
    if [ -f "$SHARED/$net/model.pnnx.param" ]; then
        check "$net" 0 run "$SHARED/$net/model.pnnx.param" "$SHARED/$net/model.pnnx.bin" \
            "$SHARED/$net/in0.npy"
    else
        echo "valgrind: skip $net ($SHARED/$net not present)"
    fi
done
check bad-param 1 run $M/p_dup_producer.pnnx.param $C/model.pnnx.bin $C/in0.npy
check bad-param-layer 1 run $M/p_conv_kernel_5x5.pnnx.param $M/b_conv_5x5.pnnx.bin $C/in0.npy
check bad-bin 1 run $C/model.pnnx.param $M/b_short_entry.pnnx.bin $C/in0.npy
check bad-zip 1 run $C/model.pnnx.param $M/b_offset_outside.pnnx.bin $C/in0.npy
check bad-npy 1 run $C/model.pnnx.param $C/model.pnnx.bin $M/n_short_data.npy
check bad-shape 1 run $C/model.pnnx.param $C/model.pnnx.bin $M/n_channels_4.npy
check bad-image 1 run $D/nets/mnist_cnn/model.pnnx.param $D/nets/mnist_cnn/model.pnnx.bin \
    $M/i_truncated.png
# batches of images: the next batch decodes on the loader thread while one runs; a bad image in a
# later batch stops the run there; torchvision preprocessing of a photo, from PNG and from JPEG
# (cli/jpeg.c); a damaged JPEG
check image-batches 0 run $D/nets/mnist_cnn/model.pnnx.param $D/nets/mnist_cnn/model.pnnx.bin \
    samples/digits --batch 3
check bad-image-batch 1 run $D/nets/mnist_cnn/model.pnnx.param $D/nets/mnist_cnn/model.pnnx.bin \
    samples/digits/digit_1.png samples/digits/digit_2.png $M/i_truncated.png --batch 2
check preprocess 0 run $D/nets/convpaths/model.pnnx.param $D/nets/convpaths/model.pnnx.bin \
    $D/preprocess/zidane.png --preprocess torchvision
check preprocess-jpeg 0 run $D/nets/convpaths/model.pnnx.param $D/nets/convpaths/model.pnnx.bin \
    $D/preprocess/zidane.jpg --preprocess torchvision
check damaged-jpeg 0 run $D/nets/mnist_cnn/model.pnnx.param $D/nets/mnist_cnn/model.pnnx.bin \
    $D/jpeg/damaged_rst_missing_c420_80x64.jpg
check bad-jpeg 1 run $D/nets/mnist_cnn/model.pnnx.param $D/nets/mnist_cnn/model.pnnx.bin \
    $M/i_jpeg_bad_huffman.jpg
rm -rf "$OUT"
echo "valgrind: $((n - failed)) of $n runs clean"
[ "$failed" -eq 0 ]
