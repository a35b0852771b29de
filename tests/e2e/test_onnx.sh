#!/usr/bin/env bash
# PyTorch models brought in through ONNX (tests/onnx/torch_models.py exports
# each with torch.onnx.export, training mode, opset 17, no constant
# folding, as a user would). For each:
#  - `remat import` writes XML whose weights equal the module's state_dict
#    bit for bit, and compiling that XML gives the same C, byte for byte,
#    as compiling the .onnx;
#  - under every built-in policy the trainer's loss and gradients, from the
#    module's own parameters and inputs, agree with torch autograd (float64)
#    within 1e-4 relative (or, on a tensor float32 cannot resolve, within 8
#    times torch float32's own error), and so do the parameters after three
#    SGD steps; both are bitwise identical to none's;
#  - sac keeps fewer saved bytes than none (on the models with blocks;
#    no more on the Elman RNN, whose steps have nothing to recompute);
#  - initializers in an external data file load as from the model itself,
#    and only from inside the model's folder, symbolic links resolved;
#  - past 262,144 initial values (wide, and a 10.5M-parameter model), the
#    values go to a weights file, not into the C;
#  - `remat import` warns on no clean export, and on a folded or a
#    padding_idx export with one line each.
# The models are checked ONNX_JOBS at a time (default: nproc), each one's
# output printed whole and in order.
. "$(dirname "$0")/lib.sh"
policies="none full sac sac-aggressive"
py=/usr/bin/python3
models=${ONNX_MODELS:-"mlp_ln_gelu mlp_opset16 gpt mha cnn_bn wide activations resmlp_dict mobilenetv2 prelu_max dscnn groupnorm pad_modes nll lstm bigru rnn lstm32 unet_convt unet_upsample conv1d tcn conv3d resnet8 gpt2_hf bert_mask einsum_attn label_smooth one_hot_ce cumsum_pool tile_mlp cosine_head logsumexp_pool pixel_shuffle_sr repeat_interleave bert_padmask nll_index binary_from_labels where_labels gpt_padmask last_token_cls mha_padmask mha_leftpad attn_unfused frozen_bn_fold eval_bn_affine tiny_kws tiny_vww tiny_ad"}

saved() {   # model.onnx policy [flags]
    # shellcheck disable=SC2086
    "$remat" schedule "$1" --policy "$2" ${3:-} | sed -n 's/^saved_bytes: //p'
}

# frozen_bn_fold: with its --freeze flags the eval-mode BatchNorm after the
# frozen conv is folded into it (front/fold.c), so `remat schedule` lists
# no BatchNormalization; without them conv1 trains and nothing folds.
check_folded() {   # model.onnx flags
    # shellcheck disable=SC2086
    local bn='$3 == "BatchNormalization" { n++ } END { print n + 0 }'
    if [ "$("$remat" schedule "$1" --policy none $2 | awk "$bn")" = 0 ] &&
       [ "$("$remat" schedule "$1" --policy none | awk "$bn")" = 1 ]; then ok
    else bad "frozen_bn_fold: BatchNormalization not folded under $2 (or folded without)"; fi
}

check_model() {   # name
    local m=$1 d=$work/$1
    mkdir -p "$d"
    if ! $py tests/onnx/torch_models.py "$m" "$d" > "$d/export.log" 2>&1; then
        cat "$d/export.log"; bad "$m: torch export"; return; fi
    local onnx=$d/$m.onnx flags
    flags=$($py tests/onnx/torch_models.py --flags "$m")
    [ "$m" = frozen_bn_fold ] && check_folded "$onnx" "$flags"
    mkdir -p "$d/xml" "$d/a" "$d/b"
    if ! "$remat" import "$onnx" -o "$d/xml/$m.xml" > "$d/import.log" 2>&1; then
        cat "$d/import.log"; bad "$m: import"; return; fi
    # a clean export (no folding, no padding_idx) gets no import warning
    if grep 'warning:' "$d/import.log"; then bad "$m: import warns on a clean export"; else ok; fi
    if $py tests/onnx/torch_models.py --same-weights "$d/ref" "$d/xml/$m.weights"; then
        ok; else bad "$m: imported weights differ from the state_dict"; fi
    # shellcheck disable=SC2086
    "$remat" compile "$onnx" --policy sac $flags -o "$d/a/$m.c"
    # shellcheck disable=SC2086
    "$remat" compile "$d/xml/$m.xml" --policy sac $flags -o "$d/b/$m.c"
    if cmp -s "$d/a/$m.c" "$d/b/$m.c" && cmp -s "$d/a/$m.h" "$d/b/$m.h"; then ok
    else bad "$m: the .onnx and its imported XML compile to different C"; fi
    for p in $policies; do
        mkdir -p "$d/$p"
        # shellcheck disable=SC2086
        if ! "$remat" build "$onnx" --policy "$p" $flags -o "$d/$p/trainer" > "$d/$p/build.log" 2>&1; then
            cat "$d/$p/build.log"; bad "$m $p: build"; continue; fi
        if ! "$d/$p/trainer" --load "$d/ref" --dump "$d/$p/dump" > "$d/$p/run.log" 2>&1; then
            cat "$d/$p/run.log"; bad "$m $p: trainer --load --dump"; continue; fi
        if $py tests/onnx/torch_models.py --compare "$d/ref" "$d/$p/dump" 1e-4; then ok
        else bad "$m $p: differs from torch autograd"; fi
        if "$d/$p/trainer" --load "$d/ref" --steps 3 --save "$d/$p/steps" > "$d/$p/steps.log" 2>&1 &&
           $py tests/onnx/torch_models.py --compare-steps "$d/ref" "$d/$p/steps" 1e-4; then ok
        else cat "$d/$p/steps.log"; bad "$m $p: parameters after 3 SGD steps differ from torch's"; fi
        [ "$p" = none ] && continue
        local same=1
        for f in "$d/none/dump"/*.npy "$d/none/steps"/param.*.npy; do
            local g=${f#"$d/none/"}
            cmp -s "$f" "$d/$p/$g" || { same=0; echo "$g differs"; }
        done
        [ "$same" = 1 ] && ok || bad "$m $p: not bitwise equal to none (one step, and parameters after 3)"
    done
    # no blocks (tiny_ad's layers are each a module of their own, none
    # repeated): sac keeps what none keeps; attn_unfused's attention stays
    # MatMul, Softmax, MatMul, and sac keeps the scores (a MatMul's) where
    # none keeps the probabilities, as many bytes, and q, k, v besides
    case $m in wide|tiny_ad|attn_unfused) return ;; esac
    local a b
    a=$(saved "$onnx" sac "$flags") b=$(saved "$onnx" none "$flags")
    if [ "$m" = rnn ] || [ "$m" = pixel_shuffle_sr ]; then
        # an Elman step's backward reads only h_t (a block boundary) and
        # x_t; a pixel_shuffle_sr block's only its ReLU's sign, kept as a
        # 1-bit mask under every policy (docs/memory.md, compact
        # residuals): nothing for sac to recompute, so no more than none
        if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -le "$b" ]; then ok
        else bad "$m: sac saves $a bytes, more than none's $b"; fi
    elif [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; then ok
    else bad "$m: sac saves $a bytes, not fewer than none's $b"; fi
    echo "model $m: checked (sac saves $a bytes, none $b)"
}

# The models run side by side, ONNX_JOBS at a time (default: the number
# of processors), each in a subshell whose output goes to its own log and
# whose counts to its own file; the logs are printed whole and in the
# list's order, each as soon as it and all before it are done, and the
# counts summed, so the output reads as a run one after another would.
onnx_jobs=${ONNX_JOBS:-$(nproc 2>/dev/null || echo 2)}
case $onnx_jobs in ''|*[!0-9]*|0) echo "ONNX_JOBS=$onnx_jobs: not a positive number" >&2; exit 2 ;; esac
queue=()     # models started, not yet printed, in order
declare -A pid_of
print_done() {   # all: wait for every model; else print the leading finished ones
    while [ ${#queue[@]} -gt 0 ]; do
        local m=${queue[0]} p f
        if [ "$1" = all ]; then wait "${pid_of[$m]}"
        elif [ ! -e "$work/$m.counts" ] && kill -0 "${pid_of[$m]}" 2>/dev/null; then return
        else wait "${pid_of[$m]}"; fi
        cat "$work/$m.log"
        if read -r p f 2>/dev/null < "$work/$m.counts"; then
            pass=$((pass + p)) fail=$((fail + f))
        else
            bad "$m: its check stopped before the end"
        fi
        queue=("${queue[@]:1}")
    done
}
for m in $models; do
    while [ "$(jobs -rp | wc -l)" -ge "$onnx_jobs" ]; do wait -n || true; done
    print_done some
    ( pass=0 fail=0; check_model "$m"; echo "$pass $fail" > "$work/$m.counts" ) \
        > "$work/$m.log" 2>&1 < /dev/null &
    pid_of[$m]=$!
    queue+=("$m")
done
print_done all

# Inferred blocks are convex: resmlp_dict's blocks are found by their
# parameters, and the GELU between two Gemms of a block, which reads no
# parameter, joins it. Were it left out, each block would be cut in three
# and full would save exactly what sac saves (10,872 bytes before).
if [ -f "$work/resmlp_dict/resmlp_dict.onnx" ]; then
    o=$work/resmlp_dict/resmlp_dict.onnx
    f=$(saved "$o" full) s=$(saved "$o" sac) n=$(saved "$o" none)
    if [ -n "$f" ] && [ "$f" -lt "$s" ] && [ "$s" -lt "$n" ]; then ok
    else bad "resmlp_dict: saved bytes full $f, sac $s, none $n: not full < sac < none"; fi
    if "$remat" import "$o" -o "$work/resmlp_dict/c.xml" > /dev/null &&
       [ "$(grep -c '<block ' "$work/resmlp_dict/c.xml")" = 3 ] &&
       sed -n '/<block name="blocks.1"/,/<\/block>/p' "$work/resmlp_dict/c.xml" |
           grep -q 'op="Gelu"'; then ok
    else bad "resmlp_dict: the GELU is not inside its block"; fi
fi

# lstm32 (issue 25): the LSTM over 32 steps unrolls into one block per
# time step, lstm.t0 to lstm.t31 in order and nothing else, the steps'
# nodes named /lstm.tN/..., and `remat pareto` proves its frontier (as
# test_budget.sh checks pareto): from at most full's saved bytes (a budget
# may rebuild a step's state from an earlier one: docs/solver.md) to a
# plan without recompute that saves no more than none. Below 5,504 bytes,
# the least arena of the plans that keep every step's state, --max-arena
# 5000 gets a plan that rebuilds some.
if [ -f "$work/lstm32/xml/lstm32.xml" ]; then
    d=$work/lstm32
    first=? last=? h=? c=? pairs=?   # set -u: shown as ? when a step fails
    want=$(seq 0 31 | sed 's/^/lstm.t/' | tr '\n' ' ')
    got=$(sed -n 's/^ *<block name="\([^"]*\)">$/\1/p' "$d/xml/lstm32.xml" | tr '\n' ' ')
    if [ "$got" = "$want" ]; then ok
    else bad "lstm32: blocks are '$got', not one per step lstm.t0 .. lstm.t31"; fi
    outside=$(awk '/<block /{b=1} /<\/block>/{b=0} b && /<node / && !/name="\/lstm\.t[0-9]+\//' "$d/xml/lstm32.xml" | wc -l)
    [ "$outside" = 0 ] && ok || bad "lstm32: $outside nodes in a step's block are not named /lstm.tN/"
    full=$(saved "$d/lstm32.onnx" full) none=$(saved "$d/lstm32.onnx" none)
    if "$remat" pareto "$d/lstm32.onnx" > "$d/pareto"; then
        first=$(awk 'NR == 3 {print $2}' "$d/pareto")
        last=$(tail -1 "$d/pareto" | awk '{print $2, $5}')
        if head -1 "$d/pareto" | grep -q 'optimal plans, proven$' &&
           [ "$first" -le "$full" ] && [ "${last#* }" = 0.000000000000 ] &&
           [ "${last% *}" -le "$none" ]; then ok
        else bad "lstm32: pareto '$(head -1 "$d/pareto")' runs from $first to $last; full saves $full, none $none"; fi
    else bad "lstm32: pareto"; fi
    "$remat" schedule "$d/lstm32.onnx" --max-arena 5000 > "$d/nested" &&
        [ "$(sed -n 's/^arena_bytes: //p' "$d/nested")" -le 5000 ] &&
        grep -q 'budget: turned to recompute (asked: block boundary' "$d/nested" \
        && ok || bad "lstm32 --max-arena 5000: no plan rebuilding a step's state"
    # Chen et al.'s sqrt(n) on the LSTM itself: keeping all 32 steps'
    # states (h and c, 2,048 bytes) takes the least arena of those plans
    # to 5,504 bytes, so 2,500 leaves room for a handful of steps; the plan
    # keeps both states of each step it keeps, 4 to 8 steps of 32 (about
    # sqrt(32)), rebuilding the others from them at each use; and
    # `pareto --by arena` reaches that arena too (its spaced plans).
    if "$remat" schedule "$d/lstm32.onnx" --max-arena 2500 > "$d/sqrt"; then
        h=$(grep -cE '^/lstm\.t[0-9]+/h .* SAVE ' "$d/sqrt")
        c=$(grep -cE '^/lstm\.t[0-9]+/c .* SAVE ' "$d/sqrt")
        pairs=$(grep -E '^/lstm\.t[0-9]+/[hc] .* SAVE ' "$d/sqrt" |
                sed 's|/[hc] .*||' | sort | uniq -c | awk '$1 == 2' | wc -l)
        if [ "$(sed -n "s/^arena_bytes: //p" "$d/sqrt")" -le 2500 ] && [ "$h" = "$pairs" ] &&
           [ "$c" = "$pairs" ] && [ "$pairs" -ge 4 ] && [ "$pairs" -le 8 ]; then ok
        else bad "lstm32 --max-arena 2500: keeps $h hidden and $c cell states ($pairs steps whole), arena $(sed -n "s/^arena_bytes: //p" "$d/sqrt")"; fi
        # one forward sweep per step reversed, as revolve does: step t's
        # backward reruns steps k+1 .. t from the nearest kept step k < t
        # (the input for none), t - k steps of the forward's 32, so the
        # recompute is at most sum(t - k) / 32 forwards (10% for the head
        # and the weight slices); rebuilding for each node's backward
        # instead of each step's cost 5.4 times that
        sweep=$(grep -E '^/lstm\.t[0-9]+/h .* SAVE ' "$d/sqrt" | sed 's|^/lstm\.t\([0-9]*\)/.*|\1|' |
                awk -v f="$(sed -n 's/^forward_flops: //p' "$d/sqrt")" \
                    '{kept[$1] = 1} END {k = -1; for (t = 0; t < 32; t++) {s += t - k; if (kept[t]) k = t}
                      printf "%d", 1.1 * s * f / 32}')
        rec=$(sed -n 's/^recompute_flops: //p' "$d/sqrt")
        [ "$rec" -le "$sweep" ] && ok ||
            bad "lstm32 --max-arena 2500: recomputes $rec FLOPs, over one sweep per step's $sweep"
        # and the plan is revolve's: some rebuilt states are held as
        # checkpoints for the sweeps after (docs/solver.md)
        [ "$(sed -n 's/^rebuilt_checkpoints: //p' "$d/sqrt")" -gt 0 ] && ok ||
            bad "lstm32 --max-arena 2500: no rebuilt checkpoint"
        # the generated C says so: its header counts them as the report
        # does (each checkpoint here one statement's output), and the train
        # step's statements that rebuild one say they keep it
        if "$remat" compile "$d/lstm32.onnx" --max-arena 2500 -o "$d/sqrt.c" > /dev/null; then
            hc=$(sed -n 's/^ \* rebuilt checkpoints: \([0-9]*\) recomputes .*/\1/p' "$d/sqrt.c")
            sc=$(sed -n '/^static float lstm32_train_schedule(/,/^}/p' "$d/sqrt.c" | grep -c 'recompute, kept to its last reader')
            [ "$hc" = "$(sed -n 's/^rebuilt_checkpoints: //p' "$d/sqrt")" ] && [ "$sc" = "$hc" ] && ok ||
                bad "lstm32 --max-arena 2500: the C's header counts ${hc:-no} rebuilt checkpoints, its train step marks $sc"
        else bad "lstm32 --max-arena 2500: compile"; fi
    else bad "lstm32 --max-arena 2500: no plan"; fi
    # its gradients are none's, bit for bit, rebuilt states and all
    mkdir -p "$d/sqrt_plan"
    if "$remat" build "$d/lstm32.onnx" --max-arena 2500 -o "$d/sqrt_plan/trainer" > /dev/null &&
       "$d/sqrt_plan/trainer" --load "$d/ref" --dump "$d/sqrt_plan/dump" > /dev/null; then
        same=1
        for f in "$d/none/dump"/*.npy; do
            cmp -s "$f" "$d/sqrt_plan/dump/${f##*/}" || { same=0; echo "${f##*/} differs"; }
        done
        [ "$same" = 1 ] && ok || bad "lstm32 --max-arena 2500: gradients not bitwise none's"
    else bad "lstm32 --max-arena 2500: build or dump"; fi
    "$remat" pareto "$d/lstm32.onnx" --by arena > "$d/by_arena" &&
        awk 'NR > 2 && $3 <= 2500 {n++} END {exit !n}' "$d/by_arena" \
        && ok || bad "lstm32: pareto --by arena stops above 2,500 bytes: $(tail -1 "$d/by_arena")"
    echo "lstm32: 32 step blocks; pareto $(head -1 "$d/pareto" | sed 's/.*: //'), $first to ${last% *} bytes; at 2,500 bytes of arena $pairs steps kept"
fi

# Attention as torch exports it becomes remat's Attention (docs/onnx.md),
# one node per layer and no Softmax left (no probabilities kept): the
# Hugging Face GPT-2 layout, causal by a Where whose fill is
# torch.finfo(float32).min; nn.MultiheadAttention's heads in the batch
# (3-D, q scaled before the product); BERT's additive mask from its
# attention_mask, the Attention's mask input; a padded GPT's Where on a
# computed condition (causal and padding), made that mask; torch's
# nn.TransformerEncoderLayer's src_key_padding_mask (3-D, heads in the
# batch), viewed with a head axis; einops-style Einsum products; all
# held to torch above.
for m in gpt2_hf mha bert_mask bert_padmask gpt_padmask mha_padmask einsum_attn mha_leftpad; do
    x=$work/$m/xml/$m.xml
    [ -f "$x" ] || continue
    n=2; case $m in mha_padmask|mha_leftpad) n=1 ;; esac
    [ "$(grep -c 'op="Attention"' "$x")" = $n ] && ! grep -q 'op="Softmax"' "$x" && ok ||
        bad "$m: $(grep -c 'op="Attention"' "$x") Attention nodes, $(grep -c 'op="Softmax"' "$x") Softmax, want $n and 0"
done
[ ! -f "$work/gpt2_hf/xml/gpt2_hf.xml" ] || grep -q 'op="Attention".*is_causal="1"' "$work/gpt2_hf/xml/gpt2_hf.xml" &&
    ok || bad "gpt2_hf: its Attention is not causal"
# and the patterns it must not fuse stay three Softmaxes (docs/onnx.md)
[ ! -f "$work/attn_unfused/xml/attn_unfused.xml" ] ||
    { [ "$(grep -c 'op="Softmax"' "$work/attn_unfused/xml/attn_unfused.xml")" = 3 ] &&
      ! grep -q 'op="Attention"' "$work/attn_unfused/xml/attn_unfused.xml"; } &&
    ok || bad "attn_unfused: an Attention where none may be"
[ ! -f "$work/bert_mask/xml/bert_mask.xml" ] ||
    [ "$(grep -c 'op="Attention" in="[^ "]* [^ "]* [^ "]* [^ "]*"' "$work/bert_mask/xml/bert_mask.xml")" = 2 ] &&
    ok || bad "bert_mask: its Attention nodes do not take the mask"

# Initializers in an external data file (location, offset, length), as
# onnx.save_model(save_as_external_data=True) writes a large model: the
# same C, byte for byte, as from raw_data in the model itself.
if [ -f "$work/mlp_ln_gelu/mlp_ln_gelu.onnx" ]; then
    d=$work/external
    mkdir -p "$d/a" "$d/b"
    $py - "$work/mlp_ln_gelu/mlp_ln_gelu.onnx" "$d/mlp_ln_gelu.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.save_model(m, sys.argv[2], save_as_external_data=True,
                all_tensors_to_one_file=True, location="mlp_ln_gelu.data",
                size_threshold=0)
PY
    "$remat" compile "$work/mlp_ln_gelu/mlp_ln_gelu.onnx" -o "$d/a/m.c"
    "$remat" compile "$d/mlp_ln_gelu.onnx" -o "$d/b/m.c"
    if [ -s "$d/mlp_ln_gelu.data" ] && [ "$(wc -c < "$d/mlp_ln_gelu.onnx")" -lt 20000 ] &&
       cmp -s "$d/a/m.c" "$d/b/m.c"; then ok
    else bad "a model with external data compiles to other C than with raw_data"; fi
fi

# External data stays inside the model's folder even through a symbolic
# link: a location that is a link to a file outside the folder, or a path
# through a linked folder that leads out, is refused with one line naming
# the real paths, exit 1 and no output written; a link that stays inside
# and a plain file inside are read.
d=$work/extlink
mkdir -p "$d/m" "$d/out"
$py - "$d" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
np.arange(6, dtype=np.float32).tofile(d + "/outside.bin")
np.arange(6, dtype=np.float32).tofile(d + "/m/inside.bin")
for name, loc in (("link", "w.bin"), ("folder", "up/outside.bin"),
                  ("plain", "inside.bin")):
    w = nh.from_array(np.zeros((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = T.EXTERNAL
    w.external_data.add(key="location", value=loc)
    g = h.make_graph([h.make_node("Mul", ["x", "w"], ["y"], name="scale")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])], [w])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]),
              f"{d}/m/{name}.onnx")
PY
ln -s ../outside.bin "$d/m/w.bin"
ln -s .. "$d/m/up"
real=$(cd "$d" && pwd -P)
refused() {   # model location: refused, exit 1, nothing written
    local want="$d/m/$1.onnx: initializer 'w': external data location '$2' leads through a symbolic link to '$real/outside.bin', outside the model's folder '$real/m'; it must be a file inside that folder (a link there may point only within it)"
    if run 1 "$remat" compile "$d/m/$1.onnx" -o "$d/out/m.c" &&
       [ "$(cat "$work/err")" = "$want" ] && [ ! -s "$work/out" ] &&
       [ -z "$(ls "$d/out")" ]; then ok
    else bad "external data $2 through a link out of the folder: $(cat "$work/err")"; fi
}
refused link w.bin
refused folder up/outside.bin
if run 0 "$remat" compile "$d/m/plain.onnx" -o "$d/out/m.c" &&
   grep -q '0.0f,1.0f,2.0f,3.0f,4.0f,5.0f' "$d/out/m.c"; then ok
else bad "external data in a plain file inside the folder is not read"; fi
rm -f "$d/m/w.bin" "$d/out"/*
ln -s inside.bin "$d/m/w.bin"
if run 0 "$remat" compile "$d/m/link.onnx" -o "$d/out/m.c" &&
   grep -q '0.0f,1.0f,2.0f,3.0f,4.0f,5.0f' "$d/out/m.c"; then ok
else bad "external data through a link that stays in the folder is not read"; fi

# Import semantics the review found wrong once, each a small model against
# numpy or against what must train (tests/onnx/import_semantics.py).
mkdir -p "$work/semantics"
if $py tests/onnx/import_semantics.py "$remat" "$work/semantics"; then ok
else bad "import semantics"; fi

# The round trip of make demo: the GPT exported, trained with AdamW on
# data, saved, loaded into the PyTorch module by name: the same loss there.
if $py scripts/torch_roundtrip.py "$remat" "$work/roundtrip" > "$work/roundtrip.log" 2>&1; then ok
else cat "$work/roundtrip.log"; bad "the PyTorch round trip"; fi

# remat import's own refusals: an XML input, an output not .xml, and a model
# it cannot take, which leaves an existing XML as it was.
mkdir -p "$work/cli"
printf 'sentinel\n' > "$work/cli/keep.xml"
"$remat" import graphs/mlp12.xml -o "$work/cli/x.xml" 2> "$work/cli/err"
if [ $? -eq 1 ] && grep -q 'is XML already' "$work/cli/err"; then ok
else bad "import of an XML file: $(cat "$work/cli/err")"; fi
"$remat" import tests/onnx/seeds/mlp.onnx -o "$work/cli/x.c" 2> /dev/null
[ $? -eq 2 ] && ok || bad "import -o x.c is not a usage error"
"$remat" import tests/bad/onnx_unknown_op.onnx -o "$work/cli/keep.xml" 2> /dev/null
if [ $? -eq 1 ] && [ "$(cat "$work/cli/keep.xml")" = sentinel ] &&
   [ ! -e "$work/cli/keep.weights" ]; then ok
else bad "a failed import touched the existing XML or wrote weights"; fi

# Import warnings (issue 25): exports that import and train, but not as
# the module does, get one line each on stderr and the import succeeds:
# weights folded by do_constant_folding=True (onnx::MatMul_N initializers,
# transposed copies of fc.weight), and an embedding's all-zero row, which
# nn.Embedding(padding_idx=0) leaves and a plain Gather then trains. The
# same model exported cleanly gets none.
d=$work/warnings
mkdir -p "$d"
$py - "$d" <<'PY' > "$d/export.log" 2>&1 || { cat "$d/export.log"; bad "warnings: torch export"; }
import sys, torch, torch.nn as nn
d = sys.argv[1]
class M(nn.Module):
    def __init__(self, padding_idx):
        super().__init__()
        self.emb = nn.Embedding(10, 4, padding_idx=padding_idx)
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 3)
    def forward(self, ids, y):   # 3-D: a MatMul by each transposed weight
        return ((self.fc2(torch.relu(self.fc1(self.emb(ids)))) - y) ** 2).mean()
ids, y = torch.randint(0, 10, (2, 5)), torch.randn(2, 5, 3)
for name, pad, fold in (("clean", None, False), ("padding", 0, False),
                        ("folded", None, True)):
    torch.manual_seed(0)
    torch.onnx.export(M(pad), (ids, y), f"{d}/{name}.onnx", opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=fold, input_names=["ids", "y"],
                      output_names=["loss"])
PY
warns() {   # name: import succeeds; its stderr to $work/err
    run 0 "$remat" import "$d/$1.onnx" -o "$d/$1.xml"
}
if warns clean && [ ! -s "$work/err" ]; then ok
else bad "warnings: a clean export warns: $(cat "$work/err")"; fi
if warns padding && [ "$(wc -l < "$work/err")" = 1 ] &&
   grep -q '^remat import: warning: row 0 of emb.weight, which Gather reads, is all zeros, as nn.Embedding(padding_idx=0) leaves it; .*trains where torch.s stays zero$' "$work/err"; then ok
else bad "warnings: padding_idx: '$(cat "$work/err")'"; fi
if warns folded && [ "$(wc -l < "$work/err")" = 1 ] &&
   grep -q '^remat import: warning: 2 trainable initializers named after the op that reads them (onnx::MatMul_[0-9]*, onnx::MatMul_[0-9]*) look like weights torch folded at export (do_constant_folding=True): .*; export with do_constant_folding=False$' "$work/err" &&
   grep -q 'name="onnx::MatMul_[0-9]*" shape="4 8"' "$d/folded.xml"; then ok
else bad "warnings: do_constant_folding=True: '$(cat "$work/err")'"; fi

# A model past 262,144 initial values keeps them out of the C file: the
# trainer above (wide) read them from EXE.weights; here the files' sizes.
weights_file() {   # name expected_param_floats
    local d=$work/$1
    local bytes
    bytes=$(wc -c < "$d/a/$1.weights" 2>/dev/null || echo 0)
    if [ "$bytes" -eq $(($2 * 4)) ] && ! grep -q 'static const float init_' "$d/a/$1.c" &&
       grep -q "${1}_load_weights" "$d/a/$1.h"; then ok
    else bad "$1: weights not in $1.weights ($bytes bytes)"; fi
}
case " $models " in *" wide "*) weights_file wide 264708 ;; esac

# 10.5M parameters: imported and compiled to a small C file and a 42 MB
# weights file (untimed here; docs/onnx.md gives the time).
if [ -z "${ONNX_MODELS:-}" ]; then
    d=$work/big
    mkdir -p "$d/a"
    if $py tests/onnx/torch_models.py big "$d" > /dev/null 2>&1 &&
       "$remat" compile "$d/big.onnx" -o "$d/a/big.c" &&
       [ "$(wc -c < "$d/a/big.c")" -lt 200000 ]; then ok
    else bad "big: a 10.5M-parameter model does not compile to a small C file"; fi
    weights_file big 10506250
fi
finish test_onnx
