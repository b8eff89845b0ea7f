#!/bin/sh
# levels.sh KINFER SHARED [ROUNDS] - every shared network at each vector level beside ONNX Runtime:
# per network ROUNDS (default 3) rounds of `kinfer bench --isa avx2`, `--isa avx512` (when the CPU
# has it) and ort-bench.js, one right after the other, 2 threads, float32 weights
# (model_f32.pnnx.param where the zoo has it). Prints "network round avx2_ms avx512_ms ort_ms
# avx2_min_ms" (medians of each bench, and the avx2 bench's minimum), then the FMA peak of each
# level (SHARED/tools/fma-peak, three times), then per network the medians of the rounds and the
# figures of issue #20: the AVX2 rate (2 x GMAC, from the AVX2 table of
# SHARED/docs/performance-anchors.md, over the AVX2 median) as a multiple of the AVX2 peak on two
# threads measured here (the highest of the three), and the median of the rounds' avx512 / ONNX
# Runtime ratios; last, the same AVX2 multiple from the
# median of the rounds' minima, which tells a busy machine (a median far above the minimum)
# from slow code; the figure is the one from the medians. Benchmarks, not tests: run it
# on a quiet machine; ONNX Runtime is used when node finds onnxruntime-node (NODE_PATH).
# LEVELS_GATE (optional): a command asked before every round, retried every 2 s until it exits 0
# (e.g. LEVELS_GATE="sh tests/bench/quiet.sh ../shared"), for a shared machine that is quiet only
# in moments; after LEVELS_GATE_WAIT seconds (default 600) the round runs anyway, marked with a
# "*" after its round number.
set -eu
K=$1 SHARED=$2 R=${3:-3}
med() { sed -n 's/.*median \([0-9.]*\).*/\1/p' | head -n 1; }
least() { sed -n 's/.*min \([0-9.]*\).*/\1/p' | head -n 1; }
rounds=$(mktemp)
peaks=$(mktemp)
trap 'rm -f "$rounds" "$peaks"' EXIT
# gate: waits for LEVELS_GATE (if set); mark is '*' when it waited LEVELS_GATE_WAIT in vain
gate() {
    mark=
    if [ -n "${LEVELS_GATE:-}" ]; then
        t0=$(date +%s)
        until sh -c "$LEVELS_GATE" >/dev/null 2>&1; do
            if [ $(($(date +%s) - t0)) -ge "${LEVELS_GATE_WAIT:-600}" ]; then
                mark='*'
                break
            fi
            sleep 2
        done
    fi
}
for n in resnet18 mobilenet_v2 mobilenet_v3_small squeezenet1_1 unet yolov5s; do
    d=$SHARED/models/$n
    p=$d/model_f32.pnnx.param
    [ -f "$p" ] || p=$d/model.pnnx.param
    [ -f "$p" ] || continue
    runs=20
    [ "$n" = yolov5s ] && runs=8
    for i in $(seq "$R"); do
        gate
        out=$("$K" bench "$p" --isa avx2 --runs $runs || true) # a failed bench: "—", as before
        a=$(echo "$out" | med)
        am=$(echo "$out" | least)
        b=$("$K" bench "$p" --isa avx512 --runs $runs 2>/dev/null | med || true)
        o=$(node "$SHARED/tools/ort-bench.js" "$d/model.onnx" --threads 2 --runs $runs --warmup 3 \
            2>/dev/null | med || true)
        echo "$n $i$mark ${a:-—} ${b:-—} ${o:-—} ${am:-—}" | tee -a "$rounds"
    done
done
# the peak three times, each behind the gate: another tenant's work lowers it as it slows the
# benches, and a low peak would flatter the rates, so the summary takes the highest
if [ -x "$SHARED/tools/fma-peak" ]; then
    for i in 1 2 3; do
        gate
        "$SHARED/tools/fma-peak" | sed "s/\$/${mark:+ *}/" | tee -a "$peaks"
    done
fi
# the summary: GMAC from the anchors' AVX2 table ("| resnet18 (224) | 1.814 | ..."), the peak from
# the highest of fma-peak's "avx2 2 threads" lines; "—" where a figure is missing
echo "network avx2_ms avx512_ms ort_ms avx2_rate/peak avx512/ort avx2_min_rate/peak"
awk -v anchors="$SHARED/docs/performance-anchors.md" -v peaks="$peaks" '
function med(list,   a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    if (k == 0) return ""
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function add(list, v) { return v ~ /^[0-9.]+$/ ? list " " v : list }
BEGIN {
    while ((getline l < anchors) > 0) {
        if (l ~ /AVX2-only machine/) avx2 = 1
        if (avx2 && split(l, f, "|") > 3 && f[3] ~ /^ *[0-9.]+ *$/) { split(f[2], w, " "); gmac[w[1]] = f[3] + 0 }
    }
    while ((getline l < peaks) > 0) if (l ~ /^avx2 +2 threads/) { split(l, w, " "); if (w[4] + 0 > peak) peak = w[4] + 0 }
}
!($1 in seen) { seen[$1] = 1; order[++n] = $1 }
{ a[$1] = add(a[$1], $3); b[$1] = add(b[$1], $4); o[$1] = add(o[$1], $5); am[$1] = add(am[$1], $6)
  if ($4 ~ /^[0-9.]+$/ && $5 ~ /^[0-9.]+$/) r[$1] = add(r[$1], $4 / $5) }
END {
    for (i = 1; i <= n; i++) {
        k = order[i]; ma = med(a[k]); mb = med(b[k]); mo = med(o[k]); mr = med(r[k]); mm = med(am[k])
        rate = ma != "" && peak > 0 && (k in gmac) ? sprintf("%.2f", 2 * gmac[k] / ma * 1000 / peak) : "—"
        mrate = mm != "" && peak > 0 && (k in gmac) ? sprintf("%.2f", 2 * gmac[k] / mm * 1000 / peak) : "—"
        printf "%s %s %s %s %s %s %s\n", k, ma == "" ? "—" : ma, mb == "" ? "—" : mb, mo == "" ? "—" : mo, rate, mr == "" ? "—" : sprintf("%.2f", mr), mrate
    }
}' "$rounds"
