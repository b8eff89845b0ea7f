#!/bin/sh
# quiet.sh SHARED [SLACK] - exits 0 when the machine looks quiet, for levels.sh's LEVELS_GATE.
# Times ONNX Runtime (not kinfer, so the gate favours neither) on mobilenet_v3_small, 2 threads, 20
# runs, and compares the median with the lowest median this gate has seen on this machine (kept in
# ${TMPDIR:-/tmp}/kinfer-quiet-best): quiet when within SLACK (default 1.08) of it. The first call
# only records. A shared VM's other tenants come and go within seconds, so levels.sh asks before
# every round. Needs node and onnxruntime-node (NODE_PATH), as levels.sh does.
set -eu
SHARED=$1 SLACK=${2:-1.08}
best=${TMPDIR:-/tmp}/kinfer-quiet-best
m=$(node "$SHARED/tools/ort-bench.js" "$SHARED/models/mobilenet_v3_small/model.onnx" --threads 2 \
    --runs 20 --warmup 3 2>/dev/null | sed -n 's/.*median \([0-9.]*\).*/\1/p')
[ -n "$m" ] || exit 2
b=$(cat "$best" 2>/dev/null || echo "")
if [ -z "$b" ] || awk -v m="$m" -v b="$b" 'BEGIN { exit !(m < b) }'; then
    echo "$m" > "$best"
    b=$m
fi
awk -v m="$m" -v b="$b" -v s="$SLACK" 'BEGIN { exit !(m <= b * s) }'
