#!/bin/sh
# cross-deps.sh - what `make cross-test` needs on Debian: the aarch64 cross compiler, the arm64
# builds of the libraries kinfer links, and qemu-user registered with binfmt_misc so the test
# programs (and the kinfer binary they start) run as if native. Installs as root; otherwise
# prints the commands.
set -e
PKGS="gcc-aarch64-linux-gnu qemu-user qemu-user-binfmt binfmt-support libc6:arm64 \
libopenblas-openmp-dev:arm64 libcmocka-dev:arm64 libstb-dev:arm64"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "make cross-test: missing packages; run as root:" >&2
        echo "  dpkg --add-architecture arm64 && apt-get update && apt-get install -y$missing" >&2
        exit 1
    fi
    echo "make cross-test: installing$missing" >&2
    dpkg --add-architecture arm64
    (apt-get update -qq || true)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing > /dev/null
fi
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    update-binfmts --enable qemu-aarch64 > /dev/null 2>&1 || true
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    echo "make cross-test: qemu-aarch64 is not registered with binfmt_misc" >&2
    exit 1
fi
