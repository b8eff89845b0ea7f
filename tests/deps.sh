#!/bin/sh
# Installs the Debian packages kinfer needs when run as root; otherwise prints the command.
PKGS="gcc make libopenblas-openmp-dev libcmocka-dev libstb-dev python3 pkg-config"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    echo "make deps: installing$missing" >&2
    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
else
    echo "make deps: missing packages; run as root:" >&2
    echo "  apt-get install -y$missing" >&2
    exit 1
fi
