#!/usr/bin/env bash
# Runs every test: the Check unit tests (built by `make test`) and the
# end-to-end scripts in tests/e2e/, TEST_JOBS at a time (default: the
# machine's cores; each test has its own scratch folder), then prints each
# one's result in a fixed order and one closing line "N passed, M failed";
# exits non-zero on any failure. Tests that must have the machine to
# themselves (SERIAL: MPI's ranks spin on every core and wait with
# timeouts) run after the others, alone.
set -u
cd "$(dirname "$0")/.."
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
SERIAL="tests/e2e/test_mpi.sh"
passed=0
failed=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
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

units=()
for t in build/test_*; do [ -x "$t" ] && units+=("$t"); done
e2e=(tests/e2e/test_*.sh)
# the pool: longest first, so that the last tests to finish are short
# ones; by the last run's seconds (kept in build/), else these guesses
times=build/test-times.txt
guess() {
    case $1 in   # seconds on the 2-core machine, two tests at a time
    tests/e2e/test_onnx.sh) echo 1300 ;;
    tests/e2e/test_graphs.sh) echo 700 ;;
    tests/e2e/test_tiny.sh) echo 600 ;;
    build/test_solve) echo 400 ;;
    tests/e2e/test_sanitize.sh) echo 290 ;;
    tests/e2e/test_conformance.sh) echo 150 ;;
    tests/e2e/test_cli.sh|tests/e2e/test_optim.sh|tests/e2e/test_firmware.sh) echo 80 ;;
    *) echo 20 ;;
    esac
}
by_time() {
    local t s
    for t in "$@"; do
        case " $SERIAL " in *" $t "*) continue ;; esac
        s=$(awk -v t="$t" '$2 == t {print $1}' "$times" 2>/dev/null | tail -1)
        printf '%s %s\n' "${s:-$(guess "$t")}" "$t"
    done | sort -k1,1rn -k2 | awk '{print $2}'
}
run_one() {   # test: its output to $logs/NAME.log, its status and seconds to .rc
    local t=$1 name start
    name=$(basename "$t")
    start=$(date +%s)
    "$t" > "$logs/$name.log" 2>&1
    echo "$? $(($(date +%s) - start))" > "$logs/$name.rc"
}
pool() {
    local t running=0
    for t in "$@"; do
        if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
        run_one "$t" &
        running=$((running + 1))
    done
    wait
}
echo "running ${#units[@]} unit and ${#e2e[@]} end-to-end tests, $jobs at a time"
# shellcheck disable=SC2046
pool $(by_time "${units[@]}" "${e2e[@]}")
for t in $SERIAL; do run_one "$t"; done

: > "$logs/times"
for t in "${units[@]}"; do
    log=$logs/$(basename "$t").log
    read -r rc secs < "$logs/$(basename "$t").rc"
    echo "$secs $t" >> "$logs/times"
    line=$(grep -E 'Checks: [0-9]+' "$log" | tail -1)
    n=$(echo "$line" | sed -n 's/.*Checks: \([0-9]*\).*/\1/p')
    f=$(echo "$line" | sed -n 's/.*Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1+\2/p')
    f=$(( ${f:-1} ))
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + ${n:-0} - f))
    failed=$((failed + f))
    [ "$f" -eq 0 ] && echo "unit $(basename "$t"): ${n:-0} checks passed (${secs} s)" \
        || { cat "$log"; echo "unit $(basename "$t"): FAILED"; }
done
for t in "${e2e[@]}"; do
    log=$logs/$(basename "$t").log
    read -r rc secs < "$logs/$(basename "$t").rc"
    echo "$secs $t" >> "$logs/times"
    line=$(grep -oE '[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    p=$(echo "$line" | awk '{print $1}')
    f=$(echo "$line" | awk '{print $3}')
    p=${p:-0}
    f=${f:-1}
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -eq 0 ]; then echo "$(basename "$t"): $p passed (${secs} s)"
    else
        # the failed checks; a script that stopped before its summary line
        # (a crash, an unset variable) shows its last lines instead
        if [ -n "$line" ]; then grep -E '^ *FAIL|error:' "$log" | head -40
        else tail -20 "$log"; fi
        echo "$(basename "$t"): $f FAILED"
    fi
done
cp "$logs/times" "$times" 2>/dev/null
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
