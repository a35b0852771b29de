#!/usr/bin/env bash
# Runs every test: the Check unit tests (built by `make unit`) and the
# end-to-end scripts in tests/e2e/. Prints each one's result, then one
# closing line "N passed, M failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# dist/ is checked in: it must be what runtime/'s files make (make dist).
if scripts/amalgamate.sh --check; then
    passed=$((passed + 1))
    echo "dist: the single-file runtime is runtime/'s"
else
    failed=$((failed + 1))
fi
# the compiler's files flow one way: no circle of files spans two families
# (docs/layout.md); it prints the largest circle
if scripts/check_circles.py build/obj compiler; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
fi
for t in build/test_*; do
    [ -x "$t" ] || continue
    "$t" > "$log" 2>&1
    rc=$?
    line=$(grep -E 'Checks: [0-9]+' "$log" | tail -1)
    n=$(echo "$line" | sed -n 's/.*Checks: \([0-9]*\).*/\1/p')
    f=$(echo "$line" | sed -n 's/.*Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1+\2/p')
    f=$(( ${f:-1} ))
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + ${n:-0} - f))
    failed=$((failed + f))
    [ "$f" -eq 0 ] && echo "unit $(basename "$t"): ${n:-0} checks passed" \
        || { cat "$log"; echo "unit $(basename "$t"): FAILED"; }
done
for t in tests/e2e/test_*.sh; do
    "$t" > "$log" 2>&1
    rc=$?
    line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    p=$(echo "$line" | awk '{print $1}')
    f=$(echo "$line" | awk '{print $3}')
    p=${p:-0}
    f=${f:-1}
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -eq 0 ]; then echo "$(basename "$t"): $p passed"
    else
        # the failed checks; a script that stopped before its summary line
        # (a crash, an unset variable) shows its last lines instead
        if [ -n "$line" ]; then grep -E '^ *FAIL|error:' "$log" | head -40
        else tail -20 "$log"; fi
        echo "$(basename "$t"): $f FAILED"
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
