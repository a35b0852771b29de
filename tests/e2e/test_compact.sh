#!/usr/bin/env bash
# End-to-end test of compact residuals (docs/memory.md): where every
# backward that reads a tensor can read a compact form of it instead (a
# Relu's, LeakyRelu's or Clip's 1-bit mask, a MaxPool's window winners),
# every policy keeps that and not the floats. Held to:
# - a ReLU MLP of width 1024 with every weight frozen (TinyTL's bias-only
#   update), policy none: the three Relu outputs are COMPACT, their masks
#   3 x 32 x 1024 / 8 = 12,288 bytes, and the saved bytes at most a
#   sixteenth of the Relu outputs' floats (3 x 32 x 1024 x 4 = 393,216);
#   with the weights trainable no mask (the weight gradients read the
#   floats);
# - its bias gradients and loss bitwise equal to the same model with the
#   weights trainable, where the Relu backwards read the floats: the mask
#   backward computes what the float one does; and bitwise equal across
#   policies;
# - a saved-bytes budget may rebuild a mask instead of keeping it (the
#   compact form a third choice): the frozen MLP's curve reaches 0 saved
#   bytes (every activation can be rebuilt from the input x); between, the
#   mask rebuilt is relu0's, the cheapest (one Gemm from x, where relu1's
#   needs two); the recompute writes it, the first forward does not; the
#   gradients stay bitwise those of none; an arena bound keeps the masks
#   where it has room and rebuilds relu0's where the three do not fit;
# - graphs/cnn.xml under none: both Relu outputs kept as masks and read by
#   their MaxPools as window winners, the bytes worked by hand, in the text
#   report, its JSON and the generated file's summary.
# tests/graphs/compact_residuals.xml (test_graphs.sh) holds the other ops
# to torch and across policies. Needs cc, OpenBLAS and /usr/bin/python3.
. "$(dirname "$0")/lib.sh"

key() { sed -n "s/^$2: //p" "$1"; }

# ---- the ReLU MLP, width 1024, batch 32 ---------------------------------------------
/usr/bin/python3 - "$work/mlp.xml" <<'PY'
import sys
dims = [784, 1024, 1024, 1024, 10]
inits, nodes, x = [], [], "x"
for i in range(4):
    n, k = dims[i + 1], dims[i]
    inits.append(f'<initializer name="fc{i}.weight" shape="{n} {k}" init="uniform" low="-0.03" high="0.03"/>')
    inits.append(f'<initializer name="fc{i}.bias" shape="{n}" init="uniform" low="-0.1" high="0.1"/>')
    nodes.append(f'<node name="fc{i}" op="Gemm" in="{x} fc{i}.weight fc{i}.bias" out="h{i}" transB="1"/>')
    x = f"h{i}"
    if i < 3:
        nodes.append(f'<node name="relu{i}" op="Relu" in="h{i}" out="a{i}"/>')
        x = f"a{i}"
body = "\n    ".join(['<input name="x" shape="32 784"/>', '<input name="target" shape="32 10"/>']
                     + inits + nodes +
                     [f'<node name="diff" op="Sub" in="{x} target" out="d"/>',
                      '<node name="sq" op="Mul" in="d d" out="d2"/>',
                      '<node name="mse" op="ReduceMean" in="d2" out="loss" keepdims="0"/>',
                      '<output name="loss" loss="true"/>'])
open(sys.argv[1], "w").write(f'<?xml version="1.0"?>\n<model name="relu_mlp" format="1">\n  <graph>\n    {body}\n  </graph>\n</model>\n')
PY
mlp=$work/mlp.xml
set -f
frozen=(--freeze '*.weight')
run 0 "$remat" schedule "$mlp" --policy none "${frozen[@]}" && cp "$work/out" "$work/s_frozen" &&
    run 0 "$remat" schedule "$mlp" --policy none && cp "$work/out" "$work/s_trained" && ok ||
    bad "mlp: schedule"
[ "$(grep -cE '^a[012] +relu[012] +Relu .* COMPACT ' "$work/s_frozen")" = 3 ] && ok ||
    bad "mlp frozen: the Relu outputs are not COMPACT"
[ "$(key "$work/s_frozen" compact_bytes)" = 12288 ] &&
    [ "$(key "$work/s_frozen" compact_forms)" = 3 ] && ok ||
    bad "mlp frozen: compact_bytes $(key "$work/s_frozen" compact_bytes), want 12288"
saved=$(key "$work/s_frozen" saved_bytes)
[ "$((saved * 16))" -le 393216 ] && ok || bad "mlp frozen: saved bytes $saved above 393216 / 16"
grep -q ' COMPACT ' "$work/s_trained" && bad "mlp trained: a COMPACT tensor" || ok
[ "$(key "$work/s_trained" compact_bytes)" = 0 ] && ok || bad "mlp trained: compact bytes"
# a budget counts the masks in its bytes: the least is still reachable
run 0 "$remat" schedule "$mlp" --budget "$saved" "${frozen[@]}" &&
    [ "$(key "$work/out" saved_bytes)" = "$saved" ] && ok || bad "mlp frozen: --budget $saved"

# gradients: the frozen model under every policy, and the trained one
for p in none full sac; do
    "$remat" build "$mlp" --policy "$p" "${frozen[@]}" -o "$work/frozen_$p" &&
        "$work/frozen_$p" --seed 2 --dump "$work/frozen_$p.d" >/dev/null && ok ||
        bad "mlp frozen $p: build or dump"
done
"$remat" build "$mlp" --policy none -o "$work/trained" &&
    "$work/trained" --seed 2 --dump "$work/trained.d" >/dev/null && ok || bad "mlp trained: build or dump"
set +f
for p in full sac; do
    same_dirs "$work/frozen_none.d" "$work/frozen_$p.d" && ok || bad "mlp frozen: $p differs from none"
done
n=0
for f in "$work"/frozen_none.d/grad.*.npy "$work/frozen_none.d/loss.npy"; do
    n=$((n + 1))
    cmp -s "$f" "$work/trained.d/$(basename "$f")" || bad "mlp: $(basename "$f") with masks differs from the float backward's"
done
[ "$n" = 5 ] && ok || bad "mlp: $n files compared, want 4 bias gradients and the loss"

# ---- a budget rebuilds masks ---------------------------------------------------------
# none keeps 3 masks of 4096 bytes and d (32x10 floats, 1280 bytes): 13568
set -f
run 0 "$remat" pareto "$mlp" --policy none "${frozen[@]}" --json &&
    /usr/bin/python3 - "$work/out" <<'PY' && ok || bad "mlp frozen: pareto does not reach 0 saved bytes"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["proven"], r
assert r["plans"][0]["saved_bytes"] == 0, r["plans"][0]
assert r["plans"][-1]["saved_bytes"] == 13568 and r["plans"][-1]["recompute_flops"] == 0
PY
run 0 "$remat" schedule "$mlp" --policy none "${frozen[@]}" --budget 9472 &&
    [ "$(key "$work/out" compact_forms)" = 2 ] && [ "$(key "$work/out" compact_bytes)" = 8192 ] &&
    grep -q '^compact: a0, 1-bit mask of relu0 (Relu), 4096 bytes, rebuilt in the backward, not kept$' "$work/out" &&
    grep -qE '^a0 +relu0 +Relu .* RECOMPUTE +budget: its compact form rebuilt' "$work/out" &&
    [ "$(key "$work/out" proven_optimal)" = yes ] && ok ||
    bad "mlp frozen --budget 9472: not relu0's mask rebuilt"
run 0 "$remat" schedule "$mlp" --policy none "${frozen[@]}" --budget 9472 --json &&
    /usr/bin/python3 - "$work/out" <<'PY' && ok || bad "mlp frozen --budget 9472: the JSON's rebuilt flags"
import json, sys
r = json.load(open(sys.argv[1]))
assert [(c["tensor"], c["rebuilt"]) for c in r["compact"]] == \
    [("a0", True), ("a1", False), ("a2", False)], r["compact"]
assert r["summary"]["compact_bytes"] == 8192 and r["summary"]["compact_forms"] == 2
PY
run 0 "$remat" schedule "$mlp" --policy none "${frozen[@]}" --budget 1280 &&
    [ "$(key "$work/out" compact_bytes)" = 0 ] && [ "$(key "$work/out" compact_forms)" = 0 ] &&
    [ "$(grep -c 'rebuilt in the backward, not kept$' "$work/out")" = 3 ] && ok ||
    bad "mlp frozen --budget 1280: masks kept"
# a form a recompute writes is not saved: the peak holds no more saved
# bytes than the plan saves
[ "$(key "$work/out" peak_saved_bytes)" -le "$(key "$work/out" saved_bytes)" ] && ok ||
    bad "mlp frozen --budget 1280: peak_saved_bytes above saved_bytes (a rebuilt mask counted saved)"
# an arena bound weighs rebuilding a form too (solve_compact.c): where
# it has room, every mask kept and nothing recomputed; the saved-bytes
# budget of 9,472 under a RAM bound is the budget's plan above; and at
# 266,240 bytes, below the 270,336 every plan keeping the three masks
# needs (the arena solver's refusal before), relu0's mask is rebuilt
run 0 "$remat" schedule "$mlp" --policy none "${frozen[@]}" --max-arena 400000 &&
    [ "$(key "$work/out" compact_forms)" = 3 ] && [ "$(key "$work/out" recompute_flops)" = 0 ] &&
    [ "$(key "$work/out" proven_optimal)" = yes ] && ok || bad "mlp frozen --max-arena 400000: masks not kept"
run 0 "$remat" schedule "$mlp" --policy none "${frozen[@]}" --budget 9472 --max-ram 100000000 &&
    grep -q '^compact: a0, 1-bit mask of relu0 (Relu), 4096 bytes, rebuilt in the backward, not kept$' "$work/out" &&
    [ "$(key "$work/out" saved_bytes)" = 9472 ] && [ "$(key "$work/out" proven_optimal)" = yes ] &&
    ok || bad "mlp frozen --budget 9472 --max-ram: not relu0's mask rebuilt"
run 0 "$remat" schedule "$mlp" --policy none "${frozen[@]}" --max-arena 266240 &&
    grep -q '^compact: a0, 1-bit mask of relu0 (Relu), 4096 bytes, rebuilt in the backward, not kept$' "$work/out" &&
    [ "$(key "$work/out" compact_forms)" = 2 ] && [ "$(key "$work/out" arena_bytes)" -le 266240 ] &&
    ok || bad "mlp frozen --max-arena 266240: not relu0's mask rebuilt"
run 1 "$remat" schedule "$mlp" --policy none "${frozen[@]}" --max-arena 200000 &&
    grep -q 'max-arena 200000 bytes cannot be met' "$work/err" && ok ||
    bad "mlp frozen --max-arena 200000: no refusal"
"$remat" compile "$mlp" --policy none "${frozen[@]}" --budget 9472 -o "$work/b9472.c" &&
    grep -q 'rt_relu_forward_mask(r_a0, ' "$work/b9472.c" &&
    ! grep -q 'rt_relu_forward_mask(v_a0, ' "$work/b9472.c" &&
    grep -q 'rt_relu_forward_mask(v_a1, ' "$work/b9472.c" && ok ||
    bad "mlp frozen --budget 9472: the mask is not written by the recompute alone"
for b in 9472 1280; do
    "$remat" build "$mlp" --policy none "${frozen[@]}" --budget $b -o "$work/frozen_b$b" &&
        "$work/frozen_b$b" --seed 2 --dump "$work/frozen_b$b.d" >/dev/null && ok ||
        bad "mlp frozen --budget $b: build or dump"
done
"$remat" build "$mlp" --policy none "${frozen[@]}" --max-arena 266240 -o "$work/frozen_a266240" &&
    "$work/frozen_a266240" --seed 2 --dump "$work/frozen_a266240.d" >/dev/null && ok ||
    bad "mlp frozen --max-arena 266240: build or dump"
set +f
for b in b9472 b1280 a266240; do
    same_dirs "$work/frozen_none.d" "$work/frozen_$b.d" && ok ||
        bad "mlp frozen $b: gradients differ from none's"
done

# ---- cnn: masks and window winners ---------------------------------------------------
# stage1.a is 32x16x28x28 (401,408 floats: 50,176 mask bytes), its pool's
# output 32x16x14x14 (100,352 one-byte winners of 4 taps); stage2.a is
# 32x32x14x14 (25,088 mask bytes), its pool's 32x32x7x7 (50,176).
run 0 "$remat" schedule graphs/cnn.xml --policy none --json &&
    /usr/bin/python3 - "$work/out" <<'PY' && ok || bad "cnn: the JSON's compact forms"
import json, sys
r = json.load(open(sys.argv[1]))
got = [(c["tensor"], c["node"], c["form"], c["bytes"]) for c in r["compact"]]
want = [("stage1.a", "stage1.relu", "1-bit mask", 50176),
        ("stage1.a", "stage1.pool", "window winners", 100352),
        ("stage2.a", "stage2.relu", "1-bit mask", 25088),
        ("stage2.a", "stage2.pool", "window winners", 50176)]
assert got == want, got
assert r["summary"]["compact_bytes"] == 225792
dec = {t["name"]: t["decision"] for t in r["tensors"]}
assert dec["stage1.a"] == dec["stage2.a"] == "COMPACT", dec
PY
run 0 "$remat" schedule graphs/cnn.xml --policy full &&
    grep -q '^compact: stage1.a, window winners of stage1.pool (MaxPool), 100352 bytes$' "$work/out" &&
    [ "$(key "$work/out" recompute_flops)" = 0 ] && ok || bad "cnn full: compact lines or a recompute"
grep -q '^ \*   stage2.a: 1-bit mask of stage2.relu (25088 bytes)$' generated/cnn_none.c &&
    grep -q 'rt_maxpool_backward_index' generated/cnn_none.c && ok ||
    bad "generated/cnn_none.c: no compact forms"

finish test_compact
