#!/bin/sh
# Runs every cmocka test program given and prints one summary line:
# "N passed, N failed, N skipped" (tests, not programs). Exit status 1 if anything failed.
# A skipped test (cmocka's skip(), e.g. a kernel this CPU lacks) is listed by name.
passed=0
failed=0
skipped=0
for t in "$@"; do
    out=$("$t" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E '^\[  (FAILED|ERROR)|^\[  PASSED  \]|^\[==========\]|^\[  SKIPPED \] [^0-9]|^golden [a-z0-9]+: ' | sed "s|^|$(basename "$t"): |"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        printf '%s\n' "$out" | tail -20
        echo "$(basename "$t"): exited with status $rc"
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
