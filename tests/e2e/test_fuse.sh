#!/usr/bin/env bash
# End-to-end test of the rewrites that need shapes (compiler/middle/fuse.c,
# docs/ops.md): an Attention between Reshape and Transpose pairs reads and
# writes the projections' 3-D layout itself. Held to:
# - graphs/gpt.xml compiles to 3-D attention calls only, and no tensor the
#   removed pairs wrote is left in the C;
# - the rewrite changes no bit: gpt (its dropout ratio 0) against the same
#   graph with an Identity before each Attention's Q, which the rewrite
#   does not match (its C keeps the 4-D calls): 3 steps' losses and the
#   dumped gradients, bit for bit;
# - a Dropout's mask is drawn from the node's index in the file, which the
#   dropped nodes before it do not change (the C's dropout table against
#   the XML's own count);
# - ONNX's 3-D form written by hand: trains, and grouped-query heads or
#   missing head counts are refused with one line.
. "$(dirname "$0")/lib.sh"

gpt=graphs/gpt.xml
"$remat" compile "$gpt" -o "$work/gpt.c" > /dev/null || bad "gpt: compile"
n3=$(grep -c 'rt_attention_forward_3d(' "$work/gpt.c")
n4=$(grep -c 'rt_attention_forward(' "$work/gpt.c")
[ "$n3" -ge 4 ] && [ "$n4" = 0 ] && ok ||
    bad "gpt: $n3 3-D and $n4 4-D attention calls; every one should be 3-D"
grep -q 'v_l0_q3\b\|v_l0_att2\b' "$work/gpt.c" &&
    bad "gpt: a tensor of a removed Transpose is still in the C" || ok

# every linear layer's Add of its bias is folded into its MatMul: no
# product (l0.q0, l0.fc0, ...) is left as a tensor of its own
"$remat" schedule "$gpt" --policy none > "$work/gpt.sched" || bad "gpt: schedule"
left=$(grep -cE '^l[0-3]\.(q0|v0|o0|f0|y0) ' "$work/gpt.sched")
folded=$(grep -cE '^l[0-3]\.(q1|v1|o1|f1|y1) +l[0-3]\.(q|v|proj|fc|fc2) +MatMul ' "$work/gpt.sched")
[ "$left" = 0 ] && [ "$folded" = 20 ] && ok ||
    bad "gpt: $left MatMul products left beside their Add, $folded of 20 biases folded"

# the key of each Dropout in the C's table is its index among the file's
# <node> elements (0-based)
bad_keys=0
while read -r name key; do
    want=$(grep -o '<node name="[^"]*"' "$gpt" | sed 's/.*"\(.*\)"/\1/' |
           grep -nx -F "$name" | cut -d: -f1)
    [ "$key" = "$((want - 1))" ] || { bad_keys=1; echo "  $name: key $key, file index $((want - 1))"; }
done < <(sed -n 's/^ *{"\([^"]*\)", [0-9]*, [0-9]*, {[^}]*}, [^,]*, \([0-9]*\)},$/\1 \2/p' "$work/gpt.c")
n=$(sed -n 's/^ *{"\([^"]*\)", [0-9]*, [0-9]*, {[^}]*}, [^,]*, \([0-9]*\)},$/\1/p' "$work/gpt.c" | wc -l)
[ "$bad_keys" = 0 ] && [ "$n" = 9 ] && ok ||
    bad "gpt: the dropout table's keys ($n rows) are not the nodes' file indices"

# fused against unfused, bit for bit (no dropout: the Identity nodes shift
# the file indices of the nodes after them)
sed 's/ratio="0.1"/ratio="0"/' "$gpt" > "$work/fused.xml"
awk '{
    if ($0 ~ /op="Attention"/) {
        match($0, /in="[^ ]*/); q = substr($0, RSTART + 4, RLENGTH - 4)
        sub("in=\"" q " ", "in=\"" q ".id ")
        print "      <node name=\"" q ".id\" op=\"Identity\" in=\"" q "\" out=\"" q ".id\"/>"
    }
    print
}' "$work/fused.xml" > "$work/unfused.xml"
for v in fused unfused; do
    "$remat" build "$work/$v.xml" --policy none -o "$work/$v" > /dev/null &&
        "$work/$v" --seed 3 --steps 3 --bits > "$work/$v.bits" &&
        "$work/$v" --seed 3 --dump "$work/$v.d" > /dev/null && ok ||
        bad "$v: build, steps or dump"
done
"$remat" compile "$work/unfused.xml" -o "$work/unfused.c" > /dev/null &&
    [ "$(grep -c 'rt_attention_forward(' "$work/unfused.c")" -ge 4 ] && ok ||
    bad "unfused: the Identity before Q did not keep the 4-D attention"
cmp -s "$work/fused.bits" "$work/unfused.bits" && ok ||
    bad "fused and unfused losses differ: $(paste -d' ' "$work/fused.bits" "$work/unfused.bits" | tail -1)"
ng=0
for f in "$work"/unfused.d/grad.*.npy; do
    ng=$((ng + 1))
    cmp -s "$f" "$work/fused.d/${f##*/}" || { bad "gradient ${f##*/} differs"; ng=-1000; }
done
[ "$ng" -gt 20 ] && ok || bad "fused against unfused: $ng gradients compared"

# ONNX's 3-D form by hand: (2, 5, 3 * 4) in, 3 heads
mk3d() {   # q_num_heads kv_num_heads extra-attributes
    cat > "$work/a3.xml" <<EOF
<model name="attn3d" format="1">
  <graph>
    <input name="x" shape="2 5 12"/>
    <input name="target" shape="2 5 12"/>
    <initializer name="wq" shape="12 12" init="normal" mean="0" std="0.3"/>
    <initializer name="wk" shape="12 12" init="normal" mean="0" std="0.3"/>
    <initializer name="wv" shape="12 12" init="normal" mean="0" std="0.3"/>
    <node name="q" op="MatMul" in="x wq" out="q"/>
    <node name="k" op="MatMul" in="x wk" out="k"/>
    <node name="v" op="MatMul" in="x wv" out="v"/>
    <node name="attn" op="Attention" in="q k v" out="y" is_causal="1" $1/>
    <node name="d" op="Sub" in="y target" out="d"/>
    <node name="d2" op="Mul" in="d d" out="d2"/>
    <node name="mse" op="ReduceMean" in="d2" out="loss" keepdims="0"/>
    <output name="loss" loss="true"/>
  </graph>
</model>
EOF
}
mk3d 'q_num_heads="3" kv_num_heads="3"'
"$remat" build "$work/a3.xml" -o "$work/a3" > /dev/null &&
    "$work/a3" --steps 3 > "$work/a3.out" && ok || bad "3-D attention by hand: build or steps"
mk3d 'q_num_heads="3" kv_num_heads="1"'
run 1 "$remat" compile "$work/a3.xml" -o "$work/a3.c" &&
    grep -q 'grouped-query attention is not supported' "$work/err" && ok ||
    bad "3-D attention with kv_num_heads 1: not the grouped-query message: $(cat "$work/err")"
[ ! -e "$work/a3.c" ] && ok || bad "a refused compile wrote its output"
mk3d ''
run 1 "$remat" compile "$work/a3.xml" -o "$work/a3.c" &&
    grep -q 'need q_num_heads and kv_num_heads' "$work/err" && ok ||
    bad "3-D attention without head counts: $(cat "$work/err")"

# MatMul's bias written by hand: trains (tests/graphs/attention_ops.xml
# holds one to PyTorch); a bias that is not a vector of B's columns is
# refused
mk3d 'q_num_heads="3" kv_num_heads="3"'
for shape in 12 "1 12" 5; do
    sed 's/<node name="q" op="MatMul" in="x wq" out="q"\/>/<node name="q" op="MatMul" in="x wq bq" out="q"\/>/' "$work/a3.xml" |
        sed "s|<input name=\"target\"|<initializer name=\"bq\" shape=\"$shape\" init=\"ones\"/>\n    &|" > "$work/mb.xml"
    if [ "$shape" = 12 ]; then
        "$remat" build "$work/mb.xml" -o "$work/mb" > /dev/null &&
            "$work/mb" --steps 2 > /dev/null && ok || bad "MatMul with a bias by hand: build or steps"
    else
        run 1 "$remat" compile "$work/mb.xml" -o "$work/mb.c" &&
            grep -q "MatMul's bias 'bq' has shape" "$work/err" && ok ||
            bad "MatMul with a bias of shape $shape: $(cat "$work/err")"
    fi
done
# a training BatchNormalization beside a fused bias: sorting the graph
# again after the rewrite must not count its running statistics' reader
# twice (shapes.c's check that the step's in-place update is their only
# reader); the same MatMul whose product a second node reads keeps its Add
bn=tests/graphs/batchnorm_ops.xml
sed 's|<initializer name="w2"|<initializer name="b2" shape="5" init="zeros"/>\n    &|; s|<node name="fc" op="Gemm" in="f w2" out="h"/>|<node name="fc" op="MatMul" in="f w2" out="h0"/><node name="fc.bias" op="Add" in="h0 b2" out="h"/>|' "$bn" > "$work/bn_mm.xml"
"$remat" schedule "$work/bn_mm.xml" --policy none > "$work/bn_mm.s" 2> "$work/bn_mm.err" &&
    grep -qE '^h +fc +MatMul ' "$work/bn_mm.s" && ! grep -q '^h0 ' "$work/bn_mm.s" && ok ||
    bad "training BatchNorm beside a MatMul + Add: not compiled with the bias folded: $(cat "$work/bn_mm.err")"
sed 's|<output name="loss"|<node name="extra" op="ReduceMean" in="h0" out="ex" keepdims="0"/><output name="ex" loss="false"/>\n    &|' "$work/bn_mm.xml" > "$work/bn_keep.xml"
"$remat" schedule "$work/bn_keep.xml" --policy none > "$work/bn_keep.s" &&
    grep -qE '^h0 +fc +MatMul ' "$work/bn_keep.s" && grep -qE '^h +fc\.bias +Add ' "$work/bn_keep.s" && ok ||
    bad "a MatMul whose product is read twice lost its Add"
# Remade recomputes (docs/memory.md): under sac-aggressive each gpt layer
# recomputes its Gelu output for fc2's weight gradient and its second
# LayerNorm's output for fc's; both are written by their own backward,
# no statement of their own, and each of the 20 recomputed tensors still
# counts one recompute. test_plan.c checks that an arena bound splits
# nothing; test_graphs.sh holds the gradients to none's bit for bit.
"$remat" schedule "$gpt" --policy sac-aggressive > "$work/gpt_sa.s" || bad "gpt sac-aggressive: schedule"
n=$(grep -cE "^fused: l[0-3]\.(g|m), l[0-3]\.(act|ln2) \((Gelu|LayerNormalization)\) remade by its own backward" "$work/gpt_sa.s")
[ "$n" = 8 ] && ok || bad "gpt sac-aggressive: $n remade recomputes, want 8 (Gelu and ln2 in 4 layers)"
"$remat" compile "$gpt" --policy sac-aggressive -o "$work/gpt_sa.c" > /dev/null || bad "gpt sac-aggressive: compile"
body=$(sed -n '/^static float gpt_train_schedule/,/^}/p' "$work/gpt_sa.c")
n=$(grep -cE 'rt_(gelu|layernorm)_backward_remake\(' <<< "$body")
r=$(grep -cE '(Gelu|LayerNormalization) -> l[0-3]\.(g|m) \[[0-9x]*\] recompute' <<< "$body")
[ "$n" = 8 ] && [ "$r" = 0 ] && ok ||
    bad "gpt sac-aggressive C: $n remaking backwards (want 8), $r separate recomputes of g or m (want 0)"
rows=$(grep -c ' RECOMPUTE ' "$work/gpt_sa.s")
execs=$(sed -n 's/^recompute_executions: //p' "$work/gpt_sa.s")
[ "$rows" = 20 ] && [ "$execs" = 20 ] && ok ||
    bad "gpt sac-aggressive: $rows recomputed tensors and $execs recomputes, want 20 and 20"

finish test_fuse
