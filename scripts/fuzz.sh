#!/usr/bin/env bash
# Runs the libFuzzer targets that `make fuzz` built: build/fuzz_compile on
# graph files for FUZZ_SECONDS, then build/fuzz_policy on policy files and
# build/fuzz_npy on .npy files and build/fuzz_onnx on ONNX models for a
# fifth of that each. Each starts from
# the corpus it left last time plus the repository's own graphs, policies
# and .npy files (build/fuzz-corpus/), with its dictionary from fuzz/. One
# worker: a 2-core machine is shared with its users.
#
# Any crash, leak, UBSan report, timeout (10 s: the compiler must never
# hang) or use of more than 2 GiB fails the run; the input that did it is
# in build/fuzz-crashes/, and the log's end is printed. Logs are in
# build/fuzz-logs/.
set -u
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-300}
corpus=build/fuzz-corpus
mkdir -p "$corpus/compile" "$corpus/policy" "$corpus/npy" "$corpus/onnx" build/fuzz-crashes \
    build/fuzz-logs

# Seeds: every graph the repository has, good or bad, every policy and
# every .npy file.
for f in graphs/*.xml tests/graphs/*.xml tests/bad/*.xml; do
    case $f in *.policy.xml) continue ;; esac
    cp "$f" "$corpus/compile/seed-$(basename "$f")"
done
for f in tests/policies/*.xml tests/bad/*.policy.xml; do
    [ -f "$f" ] && cp "$f" "$corpus/policy/seed-$(basename "$f")"
done
for f in tests/bad/onnx_*.onnx tests/onnx/seeds/*.onnx; do
    [ -f "$f" ] && cp "$f" "$corpus/onnx/seed-$(basename "$f")"
done
# ...and the test zoo's models as torch exports them (tests/onnx/
# torch_models.py), exported once into build/fuzz-seeds/ and kept; those
# past the fuzzer's 64 KiB input limit are left out.
seeds=build/fuzz-seeds
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    for m in $(/usr/bin/python3 tests/onnx/torch_models.py --names); do
        [ -f "$seeds/$m/$m.onnx" ] ||
            /usr/bin/python3 tests/onnx/torch_models.py "$m" "$seeds/$m" \
                > /dev/null 2>&1 || { echo "fuzz: torch export of $m failed"; exit 1; }
        [ "$(wc -c < "$seeds/$m/$m.onnx")" -le 65536 ] &&
            cp "$seeds/$m/$m.onnx" "$corpus/onnx/seed-zoo-$m.onnx"
    done
else
    echo "fuzz: no torch (python3-torch): the ONNX target starts without the zoo's exports"
fi
for f in tests/graphs/data/*.npy tests/unit/data/*.npy; do
    cp "$f" "$corpus/npy/seed-$(basename "$f")"
done

# run TARGET SECONDS DICT: fuzzes, prints the final figures, fails on a
# finding.
run() {
    local t=$1 s=$2 log=build/fuzz-logs/$1.log rc
    echo "fuzz: $t for $s s (log: $log)"
    UBSAN_OPTIONS=print_stacktrace=1 "build/fuzz_$t" \
        -max_total_time="$s" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        ${3:+-dict="fuzz/$3"} -artifact_prefix="build/fuzz-crashes/$t-" \
        -print_final_stats=1 "$corpus/$t" > "$log" 2>&1
    rc=$?
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|stat::new_units_added)|^#[0-9]+.*DONE' "$log" \
        | sed 's/^/fuzz:   /'
    echo "fuzz:   corpus: $(ls "$corpus/$t" | wc -l) files"
    if [ "$rc" -ne 0 ]; then
        tail -60 "$log"
        echo "fuzz: $t FAILED (exit $rc); the input is in build/fuzz-crashes/"
        return 1
    fi
}

small=$((secs / 5))
[ "$small" -lt 10 ] && small=10
run compile "$secs" xml.dict || exit 1
run policy "$small" xml.dict || exit 1
run npy "$small" npy.dict || exit 1
run onnx "$small" "" || exit 1
echo "fuzz: no crash, leak, UB, timeout or OOM"
