#!/usr/bin/env bash
# The ONNX backend node tests (Debian's libonnx-testdata) through remat:
# every test whose ops remat computes or folds and whose tensors are
# float32 or int64 is imported, built and run (tests/onnx/conformance.py),
# its outputs against the test's own (rtol 1e-4, atol 1e-5). A test that
# fails must be listed, with why, in tests/onnx/conformance_failures.txt
# (docs/onnx.md lists them); a listed one that passes fails this test too,
# so the list stays true. Tests that pass count as passed; a failure off the
# list, or a listed test that passes, as failed.
. "$(dirname "$0")/lib.sh"
list=tests/onnx/conformance_failures.txt
/usr/bin/python3 tests/onnx/conformance.py "$remat" "$work/conf" "$list" -j 2 \
    > "$work/conf.log" 2>&1
rc=$?
grep -E '^(FAIL|onnx node tests)' "$work/conf.log"
summary=$(grep '^onnx node tests' "$work/conf.log")
pass=$(echo "$summary" | sed -n 's/^onnx node tests: \([0-9]*\) of.*/\1/p')
pass=${pass:-0}
fail=$(grep -c '^FAIL' "$work/conf.log")
[ "$rc" -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
# the target: at least 90% of the tests of the ops remat computes pass
computed=$(grep '^onnx node tests of computed ops' "$work/conf.log")
cp=$(echo "$computed" | sed -n 's/.*: \([0-9]*\) of \([0-9]*\) passed.*/\1/p')
cn=$(echo "$computed" | sed -n 's/.*: \([0-9]*\) of \([0-9]*\) passed.*/\2/p')
if [ -z "$cn" ] || [ $((${cp:-0} * 10)) -lt $((cn * 9)) ]; then
    echo "FAIL: ${cp:-?} of ${cn:-?} tests of computed ops is under 90%"
    fail=$((fail + 1)); fi
finish test_conformance
