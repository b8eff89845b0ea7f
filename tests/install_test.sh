#!/bin/sh
# install_test.sh BUILD - `make install` into a scratch prefix, then build the README's C example
# (samples/c_api/classify.c) with pkg-config against it, shared and static, and run both on the
# bundled MNIST model: each must print a class. Prints "install: ok" or what failed; exit 1 then.
set -eu
BUILD=${1:-build/release}
P=$(mktemp -d /tmp/kinfer-install-XXXXXX)
trap 'rm -rf "$P"' EXIT
make --no-print-directory -s BUILD="$BUILD" PREFIX="$P" install > "$P.log" 2>&1 || {
    cat "$P.log"; rm -f "$P.log"; echo "install: make install failed"; exit 1; }
rm -f "$P.log"
for f in bin/kinfer lib/libkinfer.so lib/libkinfer.a include/kinfer/kinfer.h \
    lib/pkgconfig/kinfer.pc share/man/man1/kinfer.1; do
    [ -e "$P/$f" ] || { echo "install: $f missing"; exit 1; }
done
if grep -q 'layer.h\|ki_op_desc' "$P/include/kinfer/kinfer.h"; then
    echo "install: the public header exposes the layer interface"; exit 1
fi
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
cc samples/c_api/classify.c $(pkg-config --cflags --libs kinfer) -o "$P/classify"
cc samples/c_api/classify.c $(pkg-config --cflags kinfer) "$P/lib/libkinfer.a" \
    $(pkg-config --libs-only-other --static kinfer) -lopenblas -lm -o "$P/classify_static"
M=samples/mnist_cnn/model.pnnx
LD_LIBRARY_PATH="$P/lib" "$P/classify" $M.param $M.bin | grep -q '^class [0-9]' ||
    { echo "install: the shared example did not classify"; exit 1; }
"$P/classify_static" $M.param $M.bin | grep -q '^class [0-9]' ||
    { echo "install: the static example did not classify"; exit 1; }
"$P/bin/kinfer" --version | grep -q '^kinfer ' || { echo "install: kinfer --version"; exit 1; }
man -l "$P/share/man/man1/kinfer.1" > /dev/null 2>&1 || command -v man > /dev/null ||
    true # man may be absent; the file was checked above
echo "install: ok"
