#!/bin/sh
# run_bench.sh KINFER SHARED THREADS [DOC] - times the shared networks with `kinfer bench` and,
# right after each, ONNX Runtime (SHARED/tools/ort-bench.js, when node finds onnxruntime-node),
# and prints a markdown table; with DOC, the table also replaces the lines between
# <!-- bench-table --> and <!-- /bench-table --> in DOC. ncnn's figures are the anchors'.
# The two engines alternate ROUNDS times per network (machine speed drifts); each column is the
# median of the rounds' medians, min and max are over all of kinfer's runs.
set -eu
KINFER=$1 SHARED=$2 T=$3 DOC=${4:-}
RUNS=${RUNS:-20} WARMUP=${WARMUP:-3} ROUNDS=${ROUNDS:-3}

ncnn_anchor() { # 2-thread / 1-thread ncnn medians from SHARED/docs/performance-anchors.md
    case "$1:$T" in
    resnet18:2) echo 12.18 ;; resnet18:1) echo 17.59 ;;
    mobilenet_v2:2) echo 5.31 ;; mobilenet_v2:1) echo 5.03 ;;
    mobilenet_v3_small:2) echo 1.90 ;; mobilenet_v3_small:1) echo 1.51 ;;
    squeezenet1_1:2) echo 3.84 ;; squeezenet1_1:1) echo 3.95 ;;
    unet:2) echo 7.34 ;; unet:1) echo 7.14 ;;
    *) echo "—" ;;
    esac
}

median() { # the median of the numbers on stdin
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

field() { # field NAME JSON -> the number after "NAME":
    printf '%s\n' "$2" | sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" | head -n 1
}

table=$(mktemp)
trap 'rm -f "$table"' EXIT
echo "| network | kinfer median ms | kinfer min–max | ONNX Runtime median ms | kinfer / ORT | ncnn (anchors) ms | kinfer peak RSS MB |" >"$table"
echo "|---|---|---|---|---|---|---|" >>"$table"
for net in resnet18 mobilenet_v2 mobilenet_v3_small squeezenet1_1 unet yolov5s; do
    dir=$SHARED/models/$net
    [ -f "$dir/model.pnnx.param" ] || continue
    ks="" os="" kmin="" kmax="" rss=0
    have_ort=false
    if [ -f "$dir/model.onnx" ] && node -e "require('onnxruntime-node')" 2>/dev/null; then
        have_ort=true
    fi
    r=0
    while [ "$r" -lt "$ROUNDS" ]; do
        k=$("$KINFER" bench "$dir/model.pnnx.param" "$dir/model.pnnx.bin" --threads "$T" \
            --runs "$RUNS" --warmup "$WARMUP" --json)
        ks="$ks $(field median_ms "$k")"
        kmin=$(awk -v a="${kmin:-1e30}" -v b="$(field min_ms "$k")" 'BEGIN { print (b < a) ? b : a }')
        kmax=$(awk -v a="${kmax:-0}" -v b="$(field max_ms "$k")" 'BEGIN { print (b > a) ? b : a }')
        rss=$(awk -v a="$rss" -v b="$(field peak_rss_kb "$k")" 'BEGIN { print (b > a) ? b : a }')
        if $have_ort; then
            o=$(node "$SHARED/tools/ort-bench.js" "$dir/model.onnx" --threads "$T" --runs "$RUNS" \
                --warmup "$WARMUP" --json 2>/dev/null || true)
            os="$os $(field median_ms "$o")"
        fi
        r=$((r + 1))
    done
    km=$(printf '%s\n' $ks | median)
    om="—" ratio="—"
    if [ -n "$(printf '%s' "$os" | tr -d ' ')" ]; then
        om=$(printf '%s\n' $os | median)
        ratio=$(awk -v a="$km" -v b="$om" 'BEGIN { printf "%.2f", a / b }')
        om=$(awk -v v="$om" 'BEGIN { printf "%.2f", v }')
    fi
    printf '| %s | %.2f | %.2f–%.2f | %s | %s | %s | %.0f |\n' "$net" "$km" "$kmin" "$kmax" \
        "$om" "$ratio" "$(ncnn_anchor "$net")" "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" \
        >>"$table"
done
cat "$table"
if [ -n "$DOC" ] && [ -f "$DOC" ]; then
    awk -v tf="$table" '
        /<!-- bench-table -->/ { print; while ((getline l < tf) > 0) print l; skip = 1; next }
        /<!-- \/bench-table -->/ { skip = 0 }
        !skip { print }' "$DOC" >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
fi
