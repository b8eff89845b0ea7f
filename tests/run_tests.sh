#!/bin/sh
# Runs every cmocka test program given and prints one summary line:
# "N passed, N failed, N skipped" (tests, not programs). Exit status 1 if anything failed.
# A skipped test (cmocka's skip(), e.g. a kernel this CPU lacks) is listed by name.
# Then the programs run again as on each CPU with fewer instruction-set levels than this one
# (KINFER_TEST_CPU, tests/unit/cpu_level.c: an AVX-512 machine also checks what an AVX2-only
# and a plain CPU would see), all but test_cpu (this CPU's own detection and the CLI, which does
# not pretend) and test_golden (which runs every level itself); their tests count in the sum.
passed=0
failed=0
skipped=0
# run_one PROGRAM LABEL: runs it (in the caller's environment) and adds its counts
run_one() {
    out=$("$1" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E '^\[  (FAILED|ERROR)|^\[  PASSED  \]|^\[==========\]|^\[  SKIPPED \] [^0-9]|^golden [a-z0-9]+: ' | sed "s|^|$(basename "$1")$2: |"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        printf '%s\n' "$out" | tail -20
        echo "$(basename "$1")$2: exited with status $rc"
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
}
for t in "$@"; do
    run_one "$t" ""
done
cpu=$("${BUILD:-build/release}/kinfer" --version 2>/dev/null | sed -n 's/.*(CPU: \([a-z0-9]*\)).*/\1/p')
for lvl in avx2 generic; do
    case "$cpu:$lvl" in
    avx512:* | avx2:generic) ;;
    *) continue ;;
    esac
    for t in "$@"; do
        case "$(basename "$t")" in
        test_cpu | test_golden) continue ;;
        esac
        KINFER_TEST_CPU=$lvl run_one "$t" " (as $lvl)"
    done
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
