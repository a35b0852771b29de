#!/usr/bin/env bash
# The command line as a user meets it: help, the schedule figures of mlp12
# (worked out by hand below), diff, policy files, build from elsewhere,
# errors and usage errors, reproducible output, and generated/ up to date.
. "$(dirname "$0")/lib.sh"
expect() {   # description expected actual
    if [ "$2" = "$3" ]; then ok; else bad "$1: expected '$2', got '$3'"; fi
}
figure() {   # policy key -> value from `remat schedule graphs/mlp12.xml`
    "$remat" schedule graphs/mlp12.xml --policy "$1" | sed -n "s/^$2: //p"
}

# --- help --------------------------------------------------------------------
"$remat" --help | grep -q "schedule" && ok || bad "remat --help"
for c in compile schedule diff build pareto memory import; do
    "$remat" $c --help | grep -q "usage: remat $c" && ok || bad "remat $c --help"
done

# --- mlp12's figures ------------------------------------------------------------
# One activation is 32x256 floats = 32768 bytes. What the backward reads, per
# block: fc1's weight gradient reads the block input, Gelu's backward reads h1,
# fc2's weight gradient reads g; Add reads nothing, so y is never kept; the
# loss's Mul reads d. Block inputs b0.out..b10.out are 11 tensors (x is an
# input, not an activation).
#   none: 11 inputs + 12 h1 + 12 g + d = 36 x 32768 = 1179648
#   sac:  h1 saved (matmul), g recomputed from it: 11 + 12 + 1 = 24 -> 786432
#   full: only the 11 block inputs and d (outside blocks): 12 -> 393216
# Recompute executions: sac reruns 12 Gelus; full reruns fc1 and Gelu per
# block (fc2 is not needed: its output is read by nobody's backward) = 24.
expect "none saved_bytes" 1179648 "$(figure none saved_bytes)"
expect "sac saved_bytes" 786432 "$(figure sac saved_bytes)"
expect "full saved_bytes" 393216 "$(figure full saved_bytes)"
expect "sac-aggressive saved_bytes" 786432 "$(figure sac-aggressive saved_bytes)"
expect "none recompute_executions" 0 "$(figure none recompute_executions)"
expect "sac recompute_executions" 12 "$(figure sac recompute_executions)"
expect "full recompute_executions" 24 "$(figure full recompute_executions)"
expect "forward_executions" 51 "$(figure full forward_executions)"
expect "none recompute_flops" 0 "$(figure none recompute_flops)"
# full: 12 x (fc1 2*32*256*256 + bias 32*256 + Gelu 8*32*256)
expect "full recompute_flops" 51216384 "$(figure full recompute_flops)"
"$remat" schedule graphs/mlp12.xml --policy full | grep -qE '^b3\.y .* - +not read' \
    && ok || bad "full: b3.y should be kept by nobody"
"$remat" compile graphs/mlp12.xml --policy full -o "$work/full.c"
n=$(sed -n '/^static float mlp12_train_schedule/,/^}/p' "$work/full.c" | grep -c 'recompute \*/')
expect "full: recompute statements in train_step" 24 "$n"
n=$(sed -n '/^float mlp12_train_step_fused/,/^}/p' "$work/full.c" | grep -c 'recompute \*/')
expect "full: recompute statements in train_step_fused" 24 "$n"
grep -q 'b0.fc2: Gemm -> b0.y \[32x256\] recompute' "$work/full.c" \
    && bad "full reruns fc2, which the backward does not need" || ok

# --- diff ------------------------------------------------------------------------
"$remat" diff graphs/mlp12.xml --policy none --policy sac > "$work/diff"
expect "diff none sac: changed tensors" 12 "$(grep -c 'SAVE  *-> RECOMPUTE' "$work/diff")"
grep -q '^b7.g ' "$work/diff" && ok || bad "diff lists b7.g"
grep -q '^saved_bytes: 1179648 -> 786432 (-393216)$' "$work/diff" && ok || bad "diff saved_bytes line"

# --- a policy file --------------------------------------------------------------
# keep-gelu: g must_save; b1's nodes prefer_save; the rest recompute. Saved: 11
# block inputs + 12 g + b1.h1 + d = 25 tensors; recomputed: h1 of the other 11
# blocks (fc1 reruns from the saved block input).
out=$("$remat" schedule graphs/mlp12.xml --policy tests/policies/keep_gelu.xml)
expect "policy file saved_bytes" $((25 * 32768)) "$(echo "$out" | sed -n 's/^saved_bytes: //p')"
expect "policy file recompute_executions" 11 "$(echo "$out" | sed -n 's/^recompute_executions: //p')"
echo "$out" | grep -qE '^b1\.h1 .*SAVE .*keep_gelu.xml:5 node=b1\.\* prefer_save' && ok \
    || bad "policy file rule not reported"

# --- build from another directory ---------------------------------------------------
(cd "$work" && "$remat" build "$root/graphs/mlp12.xml" --policy sac -o t) \
    && "$work/t" --steps 3 --lr 0.1 | grep -q '^step 3 loss' && ok || bad "build from elsewhere"

# --- the runtime's objects are cached ------------------------------------------------
# The first build compiles remat_rt.c and trainer.c into the cache; the next
# reuses both files untouched (same inode and modification time), --no-blas
# has its own, and a changed runtime source misses. Two cold builds at once
# both succeed and leave no temporary file.
cache=$work/cache
stamp() { stat -c '%n %i %.9Y' "$cache"/*.o | sort; }
REMAT_CACHE_DIR=$cache "$remat" build tests/graphs/edge_cases.xml -o "$work/c1" && ok || bad "cached build 1"
expect "objects after the first build" 2 "$(ls "$cache"/*.o | wc -l)"
before=$(stamp)
[ -n "$before" ] && ok || bad "no cached objects to compare"
REMAT_CACHE_DIR=$cache "$remat" build tests/graphs/edge_cases.xml -o "$work/c2" && ok || bad "cached build 2"
expect "the second build reuses the cached runtime" "$before" "$(stamp)"
"$work/c2" --seed 1 --dump "$work/c2d" > /dev/null && ok || bad "the trainer from cached objects does not run"
REMAT_CACHE_DIR=$cache "$remat" build tests/graphs/edge_cases.xml --no-blas -o "$work/c3" && ok || bad "cached --no-blas build"
expect "--no-blas has objects of its own" 4 "$(ls "$cache"/*.o | wc -l)"
mkdir "$work/rt"
cp runtime/remat_rt.c runtime/remat_rt.h runtime/trainer.c "$work/rt/"
echo "/* changed */" >> "$work/rt/trainer.c"
REMAT_RUNTIME_DIR=$work/rt REMAT_CACHE_DIR=$cache "$remat" build tests/graphs/edge_cases.xml -o "$work/c4" \
    && ok || bad "build with a changed runtime"
expect "a changed runtime compiles anew" 6 "$(ls "$cache"/*.o | wc -l)"
REMAT_CACHE_DIR=$work/cold "$remat" build tests/graphs/edge_cases.xml -o "$work/c5" & p1=$!
REMAT_CACHE_DIR=$work/cold "$remat" build tests/graphs/edge_cases.xml -o "$work/c6" & p2=$!
wait $p1 && wait $p2 && ok || bad "two builds at once on a cold cache"
expect "two builds at once: the cache" "2 0" "$(ls "$work"/cold/*.o | wc -l) $(ls "$work"/cold | grep -c tmp)"
REMAT_CACHE_DIR=/dev/null/cache "$remat" build tests/graphs/edge_cases.xml -o "$work/c7" \
    && "$work/c7" --steps 1 > /dev/null && ok || bad "a build without a usable cache"
"$work/c5" --seed 1 --dump "$work/c5d" > /dev/null && "$work/c6" --seed 1 --dump "$work/c6d" > /dev/null \
    && cmp -s "$work/c5d/loss.npy" "$work/c2d/loss.npy" && ok || bad "the concurrent builds' trainers"

# --- errors ------------------------------------------------------------------------
printf '<model name="m" format="1"><graph>\n<input name="x" shape="4 0"/>\n</graph></model>\n' > "$work/bad.xml"
cp "$work/full.c" "$work/keep.c"
cp "${work}/full.h" "$work/keep.h"
"$remat" compile "$work/bad.xml" -o "$work/full.c" 2> "$work/err"
expect "bad graph exit status" 1 $?
expect "bad graph: one line" 1 "$(wc -l < "$work/err")"
grep -q "bad.xml:2: input 'x': shape \"4 0\" has dimension 0" "$work/err" && ok || bad "message: $(cat "$work/err")"
cmp -s "$work/full.c" "$work/keep.c" && cmp -s "$work/full.h" "$work/keep.h" && ok \
    || bad "a failed compile changed an existing output"
# OUT.c cannot be written (it is a folder): OUT.h must stay as it was too
mkdir "$work/dir.c"
echo "old header" > "$work/dir.h"
"$remat" compile graphs/mlp12.xml -o "$work/dir.c" 2> /dev/null
expect "unwritable OUT.c exit status" 1 $?
expect "OUT.h kept when OUT.c fails" "old header" "$(cat "$work/dir.h")"
"$remat" schedule graphs/mlp12.xml --policy nosuch 2> "$work/err"
expect "unknown policy exit status" 1 $?
"$remat" compile graphs/mlp12.xml 2> /dev/null
expect "missing -o exit status" 2 $?
"$remat" frobnicate 2> /dev/null
expect "unknown command exit status" 2 $?
"$remat" diff graphs/mlp12.xml --policy sac 2> /dev/null
expect "diff with one policy exit status" 2 $?

# --- a .npy path that is not C comment text ----------------------------------------
# The generated file names the path in a comment: "/*" in it was -Wcomment.
mkdir -p "$work/odd"
cp tests/graphs/data/emb.npy "$work/odd/*e*.npy"
sed 's|path="data/emb.npy"|path="'"$work"'/odd/*e*.npy"|' tests/graphs/blocks_skip.xml > "$work/odd.xml"
"$remat" compile "$work/odd.xml" -o "$work/odd.c" \
    && cc -std=c99 -Wall -Wextra -pedantic -Wcast-align=strict -Werror -fsyntax-only -Iruntime "$work/odd.c" \
    && ok || bad "a path with /* or */ broke the generated comment"

# --- generated names that must not meet -------------------------------------------
# Node a_x's batch table bmm_a_x was node x's A index table too.
cat > "$work/names.xml" <<'XML'
<model name="names" format="1"><graph>
  <input name="p" shape="2 3 4"/>
  <initializer name="q" shape="2 4 5" init="uniform"/>
  <node name="x" op="MatMul" in="p q" out="y1"/>
  <node name="a_x" op="MatMul" in="p q" out="y2"/>
  <node name="s" op="Add" in="y1 y2" out="s1"/>
  <node name="r" op="ReduceSum" in="s1" out="l" keepdims="0"/>
  <output name="l"/>
</graph></model>
XML
"$remat" compile "$work/names.xml" -o "$work/names.c" \
    && cc -std=c99 -Wall -Wextra -pedantic -Wcast-align=strict -Werror -fsyntax-only -Iruntime "$work/names.c" \
    && ok || bad "two batched MatMuls x and a_x gave clashing tables"

# --- reproducible output and generated/ -------------------------------------------------
"$remat" compile graphs/mlp12.xml --policy sac -o "$work/a.c"
"$remat" compile graphs/mlp12.xml --policy sac -o "$work/b.c"
sed 's/"a.h"/"b.h"/; s/REMAT_A_H/REMAT_B_H/' "$work/a.c" | cmp -s - "$work/b.c" && ok || bad "compile is not reproducible"
for f in generated/*.c; do
    base=$(basename "$f" .c)
    graph=graphs/${base%_*}.xml
    policy=${base##*_}
    mkdir -p "$work/gen"
    "$remat" compile "$graph" --policy "$policy" -o "$work/gen/$base.c"
    if cmp -s "$f" "$work/gen/$base.c" && cmp -s "generated/$base.h" "$work/gen/$base.h"; then ok
    else bad "generated/$base.c is stale: run make generated"; fi
done
for g in graphs/*.xml; do
    for p in none full sac sac-aggressive; do
        base=generated/$(basename "$g" .xml)_$p
        [ -f "$base.c" ] && [ -f "$base.h" ] && ok || bad "$base.c is missing: run make generated"
    done
done

# --- the size the README promises ------------------------------------------------------------
# 25,000 blocks of (Gemm, Gelu, Gemm, Add) and a loss: 100,001 nodes. Under sac
# the forward runs each once and the backward reruns the 25,000 Gelus.
/usr/bin/python3 scripts/make_chain.py 100000 > "$work/chain.xml"
"$remat" compile "$work/chain.xml" --policy sac -o "$work/chain.c" && ok \
    || bad "a 100,000-node graph does not compile"
grep -q "^float chain_train_step(" "$work/chain.c" && ok || bad "chain.c lacks its train step"
"$remat" schedule "$work/chain.xml" --policy sac > "$work/chain.txt"
expect "100,000 nodes: forward_executions" 100001 "$(sed -n 's/^forward_executions: //p' "$work/chain.txt")"
expect "100,000 nodes: recompute_executions" 25000 "$(sed -n 's/^recompute_executions: //p' "$work/chain.txt")"

finish test_cli
