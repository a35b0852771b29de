#!/usr/bin/env bash
# End-to-end test of runtime/trainer.c, linked with the hand-written toy model
# tests/unit/toy_model.c (y = x W, loss = loss_scale * mean(y^2), where fc/W is
# trainable and loss_scale is a non-trainable scalar).
# Run from anywhere; needs cc, OpenBLAS and /usr/bin/python3 with numpy.
set -eu
cd "$(dirname "$0")/../.."

PY=/usr/bin/python3
BIN=build/toy_trainer
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
# check NAME CMD...: passes when CMD succeeds
check() {
    local name=$1
    shift
    if ( "$@" ); then ok "$name"; else bad "$name"; fi
}

# run EXPECTED_RC ARGS...: runs the trainer, stdout to $TMP/out, stderr to
# $TMP/err, and succeeds when its exit status is EXPECTED_RC
run() {
    local want=$1 rc=0
    shift
    "$BIN" "$@" </dev/null >"$TMP/out" 2>"$TMP/err" || rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "     $BIN $*: exit $rc, wanted $want" >&2
        sed 's/^/     stderr: /' "$TMP/err" >&2
        return 1
    fi
}
err_has() { grep -qF -- "$1" "$TMP/err" || { echo "     stderr lacks '$1':" >&2; sed 's/^/     stderr: /' "$TMP/err" >&2; return 1; }; }
out_has() { grep -qF -- "$1" "$TMP/out"; }
# the error is exactly one line starting "trainer: "
one_error_line() { [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q '^trainer: ' "$TMP/err"; }

# ---- build -------------------------------------------------------------------
mkdir -p build
for f in trainer trainer_args trainer_io; do
    check "$f.c compiles warning-free" \
        cc -std=c99 -Wall -Wextra -pedantic -Werror -O2 -Iruntime -c runtime/$f.c -o "$TMP/$f.o"
done
check "toy_model.c compiles warning-free" \
    cc -std=c99 -Wall -Wextra -pedantic -Werror -O2 -Iruntime -c tests/unit/toy_model.c -o "$TMP/toy.o"
if ! cc -std=c99 -O2 -Iruntime runtime/trainer.c runtime/trainer_args.c runtime/trainer_io.c \
        runtime/npy.c dist/remat_rt.c tests/unit/toy_model.c \
        -lopenblas -lm -o "$BIN"; then
    bad "build $BIN"
    echo "$passed passed, $failed failed"
    exit 1
fi
ok "build $BIN"

# ---- help and usage errors -----------------------------------------------------
check "--help exits 0 and mentions %2F" \
    eval 'run 0 --help && out_has "%2F" && out_has "--dump" && out_has "--bench"'
check "no arguments: usage, exit 2" eval 'run 2 && grep -q "usage" "$TMP/err"'
# --help names every input and output with its dtype, shape and file (the
# toy's x is 4x3 and y 4x2) and counts the parameters (fc/W trainable,
# loss_scale not)
check "--help lists the inputs and outputs with dtype, shape and file" eval '
    run 0 --help &&
    grep -Eq "^  x +float32 +\(4, 3\) +input\.x\.npy$" "$TMP/out" &&
    grep -Eq "^  y +float32 +\(4, 2\) +output\.y\.npy$" "$TMP/out" &&
    out_has "Parameters: 2 (1 trainable), param.NAME.npy each."'
usage_case() {
    run 2 "$@" && one_error_line
}
check "unknown option: exit 2" eval 'usage_case --frobnicate && err_has "--frobnicate"'
check "stray argument: exit 2" usage_case --steps 3 extra
check "missing value: exit 2" eval 'usage_case --dump && err_has "--dump needs a value"'
check "--steps abc: exit 2" eval 'usage_case --steps abc && err_has "--steps"'
check "--steps 0: exit 2" usage_case --steps 0
check "--bench -1: exit 2" usage_case --bench -1
check "--seed -1: exit 2" eval 'usage_case --seed -1 --steps 1 && err_has "--seed"'
check "--lr nan: exit 2" usage_case --steps 1 --lr nan
check "two actions: exit 2" usage_case --steps 3 --bench 3
check "--lr without --steps: exit 2" usage_case --dump "$TMP/x" --lr 0.1
check "--bits without --steps: exit 2" usage_case --dump "$TMP/x" --bits
check "--bits appends the float's bits" eval 'run 0 --steps 1 --bits && grep -qE "^step 1 loss [0-9.]+ bits 0x[0-9a-f]{8}$" "$TMP/out"'
check "--seed with --load: exit 2" usage_case --seed 1 --load "$TMP" --steps 1
check "--load alone is no action: exit 2" usage_case --load "$TMP"
check "--steps=3 form accepted" run 0 --steps=3

# ---- --dump ------------------------------------------------------------------------
D1=$TMP/d1/nested
check "--seed 3 --dump creates nested DIR" run 0 --seed 3 --dump "$D1"

check "--dump writes exactly the expected files" eval '
    [ "$(cd "$D1" && ls | sort | tr "\n" " ")" = \
      "forward.npy grad.fc%2FW.npy input.x.npy loss.npy output.y.npy param.fc%2FW.npy param.loss_scale.npy " ]'

check "--help says what --load needs and that outputs are dumped" eval '
    run 0 --help && out_has "output.NAME.npy" && out_has "every trainable parameter" &&
    out_has "keeps the model'"'"'s own value"'

check "--dump shapes and dtypes" "$PY" - "$D1" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
want = {"input.x.npy": (4, 3), "param.fc%2FW.npy": (3, 2), "output.y.npy": (4, 2),
        "param.loss_scale.npy": (), "loss.npy": (), "forward.npy": (),
        "grad.fc%2FW.npy": (3, 2)}
for f, shape in want.items():
    a = np.load(d + "/" + f)
    assert a.dtype == np.float32, (f, a.dtype)
    assert a.shape == shape, (f, a.shape, shape)
    assert np.all(np.isfinite(a)), f
x = np.load(d + "/input.x.npy")
assert x.min() >= -1 and x.max() < 1 and x.std() > 0.1, x
assert np.load(d + "/param.loss_scale.npy") == 1.0
EOF

check "dumped loss and grad match numpy" "$PY" - "$D1" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
x = np.load(d + "/input.x.npy").astype(np.float64)
w = np.load(d + "/param.fc%2FW.npy").astype(np.float64)
s = float(np.load(d + "/param.loss_scale.npy"))
y = x @ w
loss = s * np.mean(y ** 2)
grad = s * 2 * x.T @ y / y.size
got_loss = float(np.load(d + "/loss.npy"))
got_y = np.load(d + "/output.y.npy").astype(np.float64)
assert np.max(np.abs(got_y - y)) <= 1e-6 * np.max(np.abs(y)), (got_y, y)
got_grad = np.load(d + "/grad.fc%2FW.npy").astype(np.float64)
assert abs(got_loss - loss) <= 1e-5 * abs(loss), (got_loss, loss)
got_fwd = float(np.load(d + "/forward.npy"))
assert abs(got_fwd - loss) <= 1e-5 * abs(loss), (got_fwd, loss)
err = np.max(np.abs(got_grad - grad)) / np.max(np.abs(grad))
assert err <= 1e-5, (err, got_grad, grad)
EOF

D1b=$TMP/d1b
run 0 --seed 3 --dump "$D1b" || true
check "same seed: identical dump" eval '
    for f in "$D1"/*; do cmp -s "$f" "$D1b/$(basename "$f")" || exit 1; done'
D1c=$TMP/d1c
run 0 --dump "$D1c" || true
check "default seed 0 differs from seed 3" eval '
    ! cmp -s "$D1/param.fc%2FW.npy" "$D1c/param.fc%2FW.npy" &&
    ! cmp -s "$D1/input.x.npy" "$D1c/input.x.npy"'
check "--dump onto a regular file: exit 1" eval '
    touch "$TMP/afile" && run 1 --dump "$TMP/afile" && one_error_line'

# ---- --load --------------------------------------------------------------------------
D2=$TMP/d2
check "--load DIR --dump DIR2" run 0 --load "$D1" --dump "$D2"
check "--load reproduces loss, grads, params, inputs bitwise" eval '
    for f in loss.npy forward.npy grad.fc%2FW.npy param.fc%2FW.npy param.loss_scale.npy input.x.npy; do
        cmp "$D1/$f" "$D2/$f" || exit 1
    done'

D3=$TMP/d3
cp -r "$D1" "$D3"
"$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.zeros((2, 3), np.float32))' \
    "$D3/param.fc%2FW.npy"
check "--load wrong shape: exit 1 naming the file" eval '
    run 1 --load "$D3" --steps 1 && one_error_line && err_has "param.fc%2FW.npy"'
"$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.zeros((3, 2), np.float64))' \
    "$D3/param.fc%2FW.npy"
check "--load float64 file: exit 1 naming the file" eval '
    run 1 --load "$D3" --dump "$TMP/d3out" && one_error_line && err_has "param.fc%2FW.npy"'
good=$D1/param.fc%2FW.npy
bad=$D3/param.fc%2FW.npy
head -c $(($(wc -c <"$good") - 4)) "$good" > "$bad"
check "--load truncated file: exit 1 naming the file and the shortfall" eval '
    run 1 --load "$D3" --steps 1 && one_error_line &&
    err_has "$bad: truncated data: 20 of 24 bytes"'
{ cat "$good"; printf 1234; } > "$bad"
check "--load file with bytes past its shape: exit 1 naming the file" eval '
    run 1 --load "$D3" --steps 1 && one_error_line &&
    err_has "$bad: 4 bytes after the data"'
echo "0.5 0.5 0.5" > "$bad"
check "--load text file: exit 1 naming the file" eval '
    run 1 --load "$D3" --steps 1 && one_error_line &&
    err_has "$bad: not a .npy file"'
rm "$bad"
mkdir "$bad"
check "--load a folder in place of the file: exit 1 naming it" eval '
    run 1 --load "$D3" --steps 1 && one_error_line &&
    err_has "$bad: read error: Is a directory"'
rmdir "$bad"
check "--load missing trainable parameter: exit 1 naming the file" eval '
    run 1 --load "$D3" --steps 1 && one_error_line &&
    err_has "$bad: no such file; --load needs every input and every trainable parameter"'
# Only the inputs and the trainable parameters: loss_scale (not trainable)
# keeps the model's own init value, 1.
D6=$TMP/d6
mkdir "$D6"
cp "$D1/input.x.npy" "$D1/param.fc%2FW.npy" "$D6/"
check "--load without a non-trainable parameter: its init value, same dump" eval '
    run 0 --load "$D6" --dump "$TMP/d6out" &&
    for f in loss.npy grad.fc%2FW.npy output.y.npy param.loss_scale.npy; do
        cmp "$D1/$f" "$TMP/d6out/$f" || exit 1
    done'
"$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.float32(3))' "$D6/param.loss_scale.npy"
check "--load reads a non-trainable parameter that is there" eval '
    run 0 --load "$D6" --dump "$TMP/d6b" &&
    "$PY" -c "import numpy as np; a = np.load(\"$D1/loss.npy\"); b = np.load(\"$TMP/d6b/loss.npy\"); assert abs(b - 3 * a) <= 1e-6 * abs(b), (a, b)"'
rm "$D6/input.x.npy"
check "--load missing input: exit 1 naming the file" eval '
    run 1 --load "$D6" --dump "$TMP/d6c" && one_error_line &&
    err_has "$D6/input.x.npy: no such file"'

# ---- NaN / Inf detection ----------------------------------------------------------------
D4=$TMP/d4
cp -r "$D1" "$D4"
"$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.float32("nan"))' \
    "$D4/param.loss_scale.npy"
check "NaN loss in --steps: exit 1" eval '
    run 1 --load "$D4" --steps 5 && one_error_line && err_has "step 1: loss is nan"'
check "NaN loss in --dump: exit 1" eval '
    run 1 --load "$D4" --dump "$TMP/d4out" && err_has "step 1: loss is nan"'
D5=$TMP/d5
cp -r "$D1" "$D5"
# finite loss (y[0,0] = 6) but x^T y overflows float32 in the gradient
"$PY" - "$D5" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
x = np.zeros((4, 3), np.float32); x[0, 0] = 3e38
w = np.zeros((3, 2), np.float32); w[0, 0] = 2e-38
np.save(d + "/input.x.npy", x)
np.save(d + "/param.fc%2FW.npy", w)
EOF
check "Inf gradient in --dump: exit 1 naming grad and element" eval '
    run 1 --load "$D5" --dump "$TMP/d5out" && one_error_line &&
    err_has "grad.fc/W contains inf at element 0"'

# ---- --steps -------------------------------------------------------------------------------
check "--seed 3 --steps 20: decreasing losses at steps 1,2,4,...,20" eval '
    run 0 --seed 3 --steps 20 && "$PY" - "$TMP/out" "$D1/loss.npy"' <<'EOF'
import re, sys, numpy as np
lines = open(sys.argv[1]).read().splitlines()
steps, losses = [], []
for l in lines:
    m = re.fullmatch(r"step (\d+) loss (-?\d+\.\d{6})", l)
    assert m, l
    steps.append(int(m.group(1))); losses.append(float(m.group(2)))
assert steps == [1] + list(range(2, 21, 2)), steps
assert all(a > b for a, b in zip(losses, losses[1:])), losses
# step 1 is the loss of the seeded data, as --dump wrote it
assert lines[0] == "step 1 loss %.6f" % float(np.load(sys.argv[2])), lines[0]
EOF
check "--steps 25 --lr 0.1: steps 1,2,4,...,24,25" eval '
    run 0 --steps 25 --lr 0.1 &&
    [ "$(cut -d" " -f2 "$TMP/out" | tr "\n" " ")" = "1 2 4 6 8 10 12 14 16 18 20 22 24 25 " ]'
check "--steps 1: one line" eval '
    run 0 --steps 1 && [ "$(wc -l <"$TMP/out")" -eq 1 ] && out_has "step 1 loss "'
check "--load DIR --steps: same first loss as the seed" eval '
    run 0 --seed 3 --steps 3 && cp "$TMP/out" "$TMP/out_seed" &&
    run 0 --load "$D1" --steps 3 && cmp -s "$TMP/out" "$TMP/out_seed"'

# ---- --bench -------------------------------------------------------------------------------
check "--bench 5: median_ms and min_ms" eval '
    run 0 --bench 5 && "$PY" - "$TMP/out"' <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 2, lines
m1 = re.fullmatch(r"median_ms (\d+\.\d{4})", lines[0]); assert m1, lines
m2 = re.fullmatch(r"min_ms (\d+\.\d{4})", lines[1]); assert m2, lines
assert float(m2.group(1)) <= float(m1.group(1)), lines
EOF

# ---- int64 inputs and Dropout: a generated model ------------------------------
# tests/graphs/embedding_loss.xml: tokens (2x5) index an 11-row table, labels
# (2x5, ignore_index 3) and labels_flat (10) name 6 classes; Dropouts
# drop_in (ratio 0.25, output 2x5x4) and drop_mid (0.5, 2x5x4) sit in a block.
EL=tests/graphs/embedding_loss.xml
for p in none full; do
    build/remat build "$EL" --policy $p -o "$TMP/el_$p"
done
BIN=$TMP/el_none
check "int64 model: --dump writes int64 inputs in range and 0/1 masks" eval '
    run 0 --seed 3 --dump "$TMP/el3" && "$PY" - "$TMP/el3"' <<'EOF'
import sys, numpy as np
d = sys.argv[1] + "/"
for name, hi in [("tokens", 11), ("labels", 6), ("labels_flat", 6)]:
    a = np.load(d + f"input.{name}.npy")
    assert a.dtype == np.int64, (name, a.dtype)
    assert a.min() >= 0 and a.max() < hi, (name, a)
for node, ratio in [("drop_in", 0.25), ("drop_mid", 0.5)]:
    m = np.load(d + f"mask.{node}.npy")
    assert m.dtype == np.float32 and m.shape == (2, 5, 4), (node, m.shape)
    assert set(np.unique(m)) <= {0.0, 1.0}, node
    # 40 draws: some kept, some dropped, whatever the seed
    assert 0 < m.sum() < m.size, (node, m.sum())
EOF
check "Dropout masks follow the seed" eval '
    run 0 --seed 4 --dump "$TMP/el4" &&
    ! cmp -s "$TMP/el3/mask.drop_mid.npy" "$TMP/el4/mask.drop_mid.npy"'
check "--load of int64 inputs reproduces the dump bitwise" eval '
    run 0 --dump "$TMP/el0" && run 0 --load "$TMP/el0" --dump "$TMP/el0b" &&
    for f in "$TMP"/el0/*.npy; do cmp -s "$f" "$TMP/el0b/${f##*/}" || exit 1; done'
check "--load token id past the table: exit 1 naming file, element and range" eval '
    mkdir -p "$TMP/elbad" && cp "$TMP"/el0/*.npy "$TMP/elbad/" &&
    "$PY" -c "import numpy as np; np.save(\"$TMP/elbad/input.tokens.npy\", np.full((2, 5), 11, np.int64))" &&
    run 1 --load "$TMP/elbad" --steps 1 && one_error_line &&
    err_has "input.tokens.npy: element 0 (at [0, 0]) is 11, outside [-11, 11)"'
check "--load float32 in place of int64 labels: exit 1" eval '
    cp "$TMP"/el0/input.tokens.npy "$TMP/elbad/" &&
    "$PY" -c "import numpy as np; np.save(\"$TMP/elbad/input.labels.npy\", np.zeros((2, 5), np.float32))" &&
    run 1 --load "$TMP/elbad" --steps 1 && one_error_line &&
    err_has "input.labels.npy: dtype '"'"'<f4'"'"' is not int64"'
# tests/graphs/structural_ops.xml: int64 labels (2x3) reach two
# SoftmaxCrossEntropyLoss nodes of 6 classes only through views (Reshape,
# Identity, Unsqueeze, Squeeze); the range still reaches the input (drawn
# from [0, 1) it would be all zeros).
BIN=$TMP/so
build/remat build tests/graphs/structural_ops.xml -o "$BIN"
check "int64 labels through views: drawn within the loss's classes" eval '
    run 0 --seed 3 --dump "$TMP/so3" &&
    "$PY" -c "import sys, numpy as np; a = np.load(sys.argv[1]); assert a.dtype == np.int64 and a.shape == (2, 3) and a.min() >= 0 and 0 < a.max() < 6, a" \
        "$TMP/so3/input.labels.npy"'
check "int64 labels through views: --load of a class past the scores: exit 1" eval '
    "$PY" -c "import numpy as np; np.save(\"$TMP/so3/input.labels.npy\", np.full((2, 3), 6, np.int64))" &&
    run 1 --load "$TMP/so3" --steps 1 && one_error_line &&
    err_has "input.labels.npy: element 0 (at [0, 0]) is 6, outside [0, 6)"'
# Labels with ignore_index -100 and 10 classes accept exactly [0, 10) and
# -100, as torch does ("Target -50 is out of bounds"): -50 is no label,
# though it lies between the two, and the message names both, for --load and
# for --data (with the batch).
cat > "$TMP/ignore.xml" <<'EOF'
<?xml version="1.0"?>
<model name="ignore" format="1">
  <graph>
    <input name="x" shape="4 3"/>
    <input name="labels" shape="4" dtype="int64"/>
    <initializer name="w" shape="3 10" init="uniform" low="-1" high="1"/>
    <node name="head" op="MatMul" in="x w" out="scores"/>
    <node name="ce" op="SoftmaxCrossEntropyLoss" in="scores labels" out="loss" ignore_index="-100"/>
    <output name="loss" loss="true"/>
  </graph>
</model>
EOF
BIN=$TMP/ignore
build/remat build "$TMP/ignore.xml" -o "$BIN"
run 0 --seed 2 --dump "$TMP/ig"
# ig_labels V0 V1 V2 V3: $TMP/igl for --load holds these four labels (and
# the dump's x and w); $TMP/igd for --data holds 4 batches, these in batch 3
# and zeros before
ig_labels() {
    mkdir -p "$TMP/igl" "$TMP/igd" &&
    cp "$TMP"/ig/*.npy "$TMP/igl/" &&
    "$PY" -c "import sys, numpy as np
v = np.array([int(a) for a in sys.argv[2:]], np.int64)
x = np.load(sys.argv[1] + '/igl/input.x.npy')
np.save(sys.argv[1] + '/igl/input.labels.npy', v)
np.save(sys.argv[1] + '/igd/input.x.npy', np.stack([x] * 4))
d = np.zeros((4, 4), np.int64); d[3] = v
np.save(sys.argv[1] + '/igd/input.labels.npy', d)" "$TMP" "$@"
}
check "ignore_index -100: drawn labels are classes, not the ignore index" eval '
    "$PY" -c "import sys, numpy as np; a = np.load(sys.argv[1]); assert a.min() >= 0 and a.max() < 10, a" "$TMP/ig/input.labels.npy"'
check "ignore_index -100: --load of 0, 9 and -100 trains" eval '
    ig_labels 0 9 -100 -100 && run 0 --load "$TMP/igl" --steps 1'
check "ignore_index -100: --data of 0, 9 and -100 trains" eval '
    ig_labels 9 -100 0 9 && run 0 --data "$TMP/igd" --steps 4'
check "ignore_index -100: --load of -50: exit 1 naming element, value, classes and ignore index" eval '
    ig_labels 0 -100 -50 9 && run 1 --load "$TMP/igl" --steps 1 && one_error_line &&
    err_has "input.labels.npy: element 2 is -50; '"'"'labels'"'"' must be in [0, 10) or the ignore index -100"'
check "ignore_index -100: --data of -50: exit 1 naming the batch" eval '
    ig_labels 0 -100 -50 9 && run 1 --data "$TMP/igd" --steps 1 && one_error_line &&
    err_has "input.labels.npy: batch 3 element 2 is -50; '"'"'labels'"'"' must be in [0, 10) or the ignore index -100"'
check "ignore_index -100: --load of 10 (= C): exit 1" eval '
    ig_labels 10 0 0 0 && run 1 --load "$TMP/igl" --steps 1 && one_error_line &&
    err_has "input.labels.npy: element 0 is 10; '"'"'labels'"'"' must be in [0, 10) or the ignore index -100" &&
    ! grep -qF "[-100" "$TMP/err"'
check "ignore_index -100: --data of 10 (= C): exit 1" eval '
    ig_labels 0 0 0 10 && run 1 --data "$TMP/igd" --steps 1 && one_error_line &&
    err_has "input.labels.npy: batch 3 element 3 is 10; '"'"'labels'"'"' must be in [0, 10) or the ignore index -100"'
check "ignore_index -100: --load of -1: exit 1" eval '
    ig_labels 0 0 -1 0 && run 1 --load "$TMP/igl" --steps 1 && one_error_line &&
    err_has "element 2 is -1; '"'"'labels'"'"' must be in [0, 10) or the ignore index -100"'
# --load with --data: DIR holds the parameters alone (the inputs are the
# batches), and step 1 trains on batch 0 exactly as --load of the parameters
# and batch 0's inputs does.
check "--load DIR of parameters alone with --data trains on the batches" eval '
    ig_labels 0 0 0 0 && rm -rf "$TMP/igp" && mkdir "$TMP/igp" &&
    cp "$TMP"/ig/param.*.npy "$TMP/igp/" && ! ls "$TMP"/igp/input.* 2>/dev/null &&
    run 0 --load "$TMP/igl" --steps 1 --bits && head -1 "$TMP/out" > "$TMP/one" &&
    run 0 --load "$TMP/igp" --data "$TMP/igd" --steps 4 --bits &&
    [ "$(grep -c "^step" "$TMP/out")" -eq 4 ] && head -1 "$TMP/out" | cmp -s - "$TMP/one"'
check "--load DIR of parameters alone without --data: exit 1 naming the input" eval '
    run 1 --load "$TMP/igp" --steps 1 && one_error_line && err_has "input.x.npy"'
check "--help lists int64 labels with what they accept, the ignore index too" eval '
    run 0 --help &&
    grep -Eq "^  labels +int64 +\(4,\) +input\.labels\.npy +values \[0, 10\) or -100$" "$TMP/out" &&
    grep -Eq "^  x +float32 +\(4, 3\) +input\.x\.npy$" "$TMP/out" &&
    grep -Eq "^  loss +float32 +\(\) +output\.loss\.npy$" "$TMP/out"'
# Without ignore_index (the attribute is optional) -100 is no label either.
sed 's/ ignore_index="-100"//' "$TMP/ignore.xml" > "$TMP/noignore.xml"
build/remat build "$TMP/noignore.xml" -o "$TMP/noignore"
check "no ignore_index: --load of -100: exit 1, outside [0, 10)" eval '
    ig_labels 0 -100 0 0 && BIN=$TMP/noignore run 1 --load "$TMP/igl" --steps 1 && one_error_line &&
    err_has "input.labels.npy: element 1 is -100, outside [0, 10)"'
check "no ignore_index: --data of 9 and 0 trains" eval '
    ig_labels 9 0 9 0 && BIN=$TMP/noignore run 0 --data "$TMP/igd" --steps 4'
BIN=$TMP/el_none
# PyTorch's own test of checkpointing (test_checkpoint_rng_*): gradients with
# and without it are equal with dropout in the model. Here full recomputes
# each Dropout in the backward from (seed, step, node) instead of replaying a
# saved RNG state; the dumps must match bit for bit, masks included.
check "checkpointing with dropout: full recomputes the Dropouts" eval '
    build/remat compile "$EL" --policy full -o "$TMP/el_full.c" &&
    [ "$(sed -n "/^static float [a-z_]*_train_schedule/,/^}/p" "$TMP/el_full.c" | grep -c "^ *rt_dropout_forward")" -eq 4 ] &&
    [ "$(sed -n "/^float [a-z_]*_train_step_fused/,/^}/p" "$TMP/el_full.c" | grep -c "^ *rt_dropout_forward")" -eq 4 ] &&
    grep -q "drop_mid: Dropout -> ad \[2x5x4\] recompute" "$TMP/el_full.c"'
check "checkpointing with dropout: gradients equal to no checkpointing" eval '
    BIN=$TMP/el_full run 0 --seed 3 --dump "$TMP/el3full" &&
    for f in "$TMP"/el3/*.npy; do cmp -s "$f" "$TMP/el3full/${f##*/}" || exit 1; done &&
    ls "$TMP"/el3/grad.*.npy >/dev/null'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
