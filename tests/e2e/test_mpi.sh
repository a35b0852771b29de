#!/usr/bin/env bash
# The data-parallel trainer (remat build --mpi, docs/mpi.md) under MPICH's
# mpirun on this machine:
#   - 2 ranks against one process accumulating the same 2 micro-batches per
#     step (--accumulate 2), on mlp12 and gpt, SGD with momentum and AdamW,
#     10 steps: every loss and the parameters within 1e-6 relative, and the
#     ranks' parameters and optimizer state bitwise identical;
#   - the results do not depend on --bucket-kb (bitwise);
#   - where the generated step hands gradients to its hook (hook_order.py)
#     and what the hook sees (hookcheck.c);
#   - faults: a rank killed, terminated or stopped mid-run, and ranks that
#     disagree on the model, the batch shape or the options, end every rank
#     with a non-zero status and a line naming the failure, well within 30 s;
#   - checkpoints: written by rank 0 alone, and a resumed run equals an
#     uninterrupted one bitwise.
# Needs mpicc and mpirun (MPICH: scripts/deps.sh), OpenBLAS and
# /usr/bin/python3 with numpy.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
# one OpenBLAS thread per rank: two ranks share this machine's cores
export OPENBLAS_NUM_THREADS=1

mpirun_() {   # RC ARGS...: mpirun under a 30 s bound (124: it hung)
    local want=$1
    shift
    run "$want" timeout 30 mpirun "$@"
}

# ---- trainers and data ------------------------------------------------------------
for g in mlp12 gpt; do
    "$remat" build "graphs/$g.xml" --policy sac -o "$work/$g" &&
        "$remat" build "graphs/$g.xml" --policy sac --mpi -o "$work/${g}_mpi" &&
        ok || bad "build $g with and without --mpi"
done
# without mpicc on PATH: one line saying what to install, no trainer
mkdir "$work/bin"
ln -s "$(command -v cc)" "$work/bin/cc"
if PATH=$work/bin run 1 "$remat" build graphs/mlp12.xml --mpi -o "$work/nompi" &&
    grep -qF "$work/nompi: --mpi needs the MPI compiler wrapper mpicc, which is not on PATH (Debian: apt-get install mpich libmpich-dev" "$work/err" &&
    [ "$(wc -l < "$work/err")" -eq 1 ] && [ ! -e "$work/nompi" ]; then ok
else cat "$work/err"; bad "remat build --mpi without mpicc"; fi
sed 's/shape="32 256"/shape="8 256"/' graphs/mlp12.xml > "$work/mlp12_small.xml"
"$remat" build "$work/mlp12_small.xml" --policy sac --mpi -o "$work/small_mpi" &&
    ok || bad "build mlp12 with another batch shape"
$PY - "$work" <<'PY' && ok || bad "write the batches"
import os, sys, numpy as np
w = sys.argv[1]
r = np.random.default_rng(0)
for d in ("mlp12", "gpt"):
    os.makedirs(os.path.join(w, "data_" + d))
np.save(f"{w}/data_mlp12/input.x.npy", r.uniform(-1, 1, (6, 32, 256)).astype(np.float32))
np.save(f"{w}/data_mlp12/input.target.npy", r.uniform(-1, 1, (6, 32, 256)).astype(np.float32))
np.save(f"{w}/data_gpt/input.tokens.npy", r.integers(0, 65, (6, 4, 64), dtype=np.int64))
np.save(f"{w}/data_gpt/input.targets.npy", r.integers(0, 65, (6, 4, 64), dtype=np.int64))
PY

# ---- 2 ranks against --accumulate 2 ------------------------------------------------
# The ranks sum their gradients in another order than accumulation does
# (g0 + g1 against g0 plus each of g1's terms), so the two agree to
# rounding, not bitwise. AdamW divides each update by sqrt(v): a parameter
# whose gradient is rounding noise (gpt's attention q and k biases, whose
# exact gradient is 0 or nearly) moves by ~lr either way, so the check is
# over the whole parameter vector, |a - b| / |b| in the 2-norm; the worst
# single tensor is printed too (docs/mpi.md).
compare() {   # MPI_DIR ONE_DIR MPI_LOG ONE_LOG
    $PY - "$@" <<'PY'
import glob, os, struct, sys, numpy as np
a, b, la, lb = sys.argv[1:]
num = den = 0.0
worst, name = 0.0, ""
for f in sorted(glob.glob(os.path.join(a, "param.*.npy"))):
    n = os.path.basename(f)
    x = np.load(f).astype(np.float64)
    y = np.load(os.path.join(b, n)).astype(np.float64)
    num += ((x - y) ** 2).sum()
    den += (y ** 2).sum()
    r = np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30)
    if r > worst:
        worst, name = r, n
def losses(path):
    return [struct.unpack("<f", struct.pack("<I", int(l.split()[-1], 16)))[0]
            for l in open(path) if l.startswith("step ")]
ma, mb = losses(la), losses(lb)
dl = max(abs(p - q) / abs(q) for p, q in zip(ma, mb))
rel = (num / den) ** 0.5
print(f"     parameters {rel:.1e} (worst tensor {worst:.1e}, {name}), losses {dl:.1e}")
sys.exit(0 if len(ma) == len(mb) == 10 and rel <= 1e-6 and dl <= 1e-6 else 1)
PY
}
# the ranks' parameters and optimizer state, file by file
same_state() {   # DIR DIR.rank1
    local f
    for f in "$1"/param.* "$1"/momentum.* "$1"/exp_avg*; do
        [ -e "$f" ] || continue
        cmp -s "$f" "$2/$(basename "$f")" || { echo "     $(basename "$f") differs between the ranks" >&2; return 1; }
    done
}
against_accumulate() {   # GRAPH CFG
    local g=$1 cfg=$2 d=$work/c
    rm -rf "$d"*
    # shellcheck disable=SC2086
    if REMAT_TEST_MPI_SAVE_ALL=1 mpirun_ 0 -n 2 "$work/${g}_mpi" --steps 10 --seed 1 \
            --data "$work/data_$g" --bits --save "$d.mpi" $cfg &&
        cp "$work/out" "$d.mpi.log" &&
        run 0 "$work/$g" --steps 10 --seed 1 --data "$work/data_$g" --bits \
            --accumulate 2 --save "$d.one" $cfg && cp "$work/out" "$d.one.log" &&
        compare "$d.mpi" "$d.one" "$d.mpi.log" "$d.one.log"; then
        ok
    else
        bad "$g $cfg: 2 ranks differ from one process accumulating 2 micro-batches"
    fi
    same_state "$d.mpi" "$d.mpi.rank1" && ok || bad "$g $cfg: the ranks' parameters differ"
}
for g in mlp12 gpt; do
    against_accumulate $g "--momentum 0.9 --lr 0.05"
    against_accumulate $g "--optimizer adamw --weight-decay 0.1 --clip-grad-norm 0.5"
done
# 2 ranks of 2 micro-batches each: the 4 of --accumulate 4, rank 1 taking
# the third and fourth
rm -rf "$work/c"*
if mpirun_ 0 -n 2 "$work/mlp12_mpi" --steps 10 --seed 1 --data "$work/data_mlp12" --bits \
        --accumulate 2 --momentum 0.9 --save "$work/c.mpi" && cp "$work/out" "$work/c.mpi.log" &&
    run 0 "$work/mlp12" --steps 10 --seed 1 --data "$work/data_mlp12" --bits \
        --accumulate 4 --momentum 0.9 --save "$work/c.one" && cp "$work/out" "$work/c.one.log" &&
    compare "$work/c.mpi" "$work/c.one" "$work/c.mpi.log" "$work/c.one.log"; then ok
else bad "mlp12: 2 ranks accumulating 2 differ from one process accumulating 4"; fi
# seeded data: every micro-batch the same inputs, gpt's Dropout masks drawn
# from the micro-batch's number, rank 1's as the second micro-batch's
rm -rf "$work/c"*
if mpirun_ 0 -n 2 "$work/gpt_mpi" --steps 10 --seed 2 --bits --save "$work/c.mpi" &&
    cp "$work/out" "$work/c.mpi.log" &&
    run 0 "$work/gpt" --steps 10 --seed 2 --bits --accumulate 2 --save "$work/c.one" &&
    cp "$work/out" "$work/c.one.log" &&
    compare "$work/c.mpi" "$work/c.one" "$work/c.mpi.log" "$work/c.one.log"; then ok
else bad "gpt, seeded data and Dropout: 2 ranks differ from --accumulate 2"; fi
# and not by chance: one rank alone is not the 2-micro-batch step
run 0 mpirun -n 1 "$work/gpt_mpi" --steps 10 --seed 2 --bits &&
    ! cmp -s "$work/out" "$work/c.mpi.log" && ok || bad "1 rank gave 2 ranks' losses"

# ---- buckets ------------------------------------------------------------------------
# one bucket per parameter pair, a few, and one at the end: the same bits
for g in mlp12 gpt; do
    rm -rf "$work/b"*
    for kb in 1 256 1000000; do
        mpirun_ 0 -n 2 "$work/${g}_mpi" --steps 4 --seed 1 --data "$work/data_$g" \
            --optimizer adamw --bucket-kb $kb --save "$work/b$kb" || bad "$g --bucket-kb $kb"
    done
    same_dirs "$work/b1" "$work/b256" && same_dirs "$work/b1" "$work/b1000000" &&
        ok || bad "$g: the parameters depend on --bucket-kb"
done

# ---- the hook's place in the step ---------------------------------------------------
# broadcast.xml reads parameters twice: a hook at the first writer fails it
for g in graphs/mlp12.xml graphs/gpt.xml tests/graphs/broadcast.xml; do
    n=$(basename "$g" .xml) d=$work/hook_$n
    mkdir -p "$d"
    "$remat" compile "$g" -o "$d/model.c" || { bad "$n: compile"; continue; }
    if $PY tests/e2e/hook_order.py "$d/model.c" > "$d/order.log"; then ok
    else cat "$d/order.log"; bad "$n: a gradient is handed to the hook before it is final or later than it could be"; fi
    sed 's/^/     /' "$d/order.log" | grep -v FAIL
    model=$(sed -n 's/^const rt_model \([A-Za-z0-9_]*\) = {$/\1/p' "$d/model.c")
    printf '#include "model.h"\nconst rt_model *const rt_trainer_model = &%s;\n' "$model" > "$d/shim.c"
    if cc -std=c99 -O2 -Wall -Wextra -pedantic -Werror -I"$d" -I"$root/runtime" \
            "$d/model.c" "$d/shim.c" "$root/dist/remat_rt.c" tests/e2e/hookcheck.c \
            -lopenblas -lm -o "$d/hookcheck" && "$d/hookcheck" > "$d/check.log"; then ok
    else cat "$d/check.log"; bad "$n: the hook saw other gradients than the step's"; fi
done

# ---- faults ------------------------------------------------------------------------------
# one line from us where we can say it; Hydra's own report, on stdout,
# when a rank is SIGKILLed (it kills the others and names the signal)
fault() {   # WHAT RC TEXT ARGS...
    local what=$1 want=$2 text=$3
    shift 3
    if mpirun_ "$want" "$@" && cat "$work/out" "$work/err" | grep -qF -- "$text"; then ok
    else sed 's/^/     /' "$work/err" | head -5; bad "$what"; fi
}
REMAT_TEST_MPI_FAULT=kill:1:4 fault "rank 1 killed at step 4" 9 "Killed (signal 9)" \
    -n 2 "$work/mlp12_mpi" --steps 50
REMAT_TEST_MPI_FAULT=term:1:4 fault "rank 1 terminated at step 4" 15 \
    "trainer: rank 1: ended by signal 15 (SIGTERM)" -n 2 "$work/gpt_mpi" --steps 50
REMAT_TEST_MPI_FAULT=stop:1:4 fault "rank 1 stopped at step 4" 1 \
    "trainer: rank 0: step 4: no answer to a gradient all-reduce from the other ranks within 3 s" \
    -n 2 "$work/mlp12_mpi" --steps 50 --mpi-timeout 3
fault "different models" 1 "trainer: rank 1 runs model 'gpt' (policy sac)" \
    -n 1 "$work/mlp12_mpi" --steps 3 : -n 1 "$work/gpt_mpi" --steps 3
fault "different batch shapes" 1 "(x[8,256] target[8,256]), rank 0 model 'mlp12' (policy sac) (x[32,256] target[32,256])" \
    -n 1 "$work/mlp12_mpi" --steps 3 : -n 1 "$work/small_mpi" --steps 3
fault "different options" 1 "trainer: rank 1's --accumulate (2) differs from rank 0's (1)" \
    -n 1 "$work/mlp12_mpi" --steps 3 : -n 1 "$work/mlp12_mpi" --steps 3 --accumulate 2
fault "--fused under mpirun" 2 "--fused updates each parameter before the ranks' gradients are summed" \
    -n 2 "$work/mlp12_mpi" --steps 3 --fused
# the mismatch lines are one line
fault "different learning rates" 1 "rank 1's learning rate (0.1) differs from rank 0's (0.01)" \
    -n 1 "$work/mlp12_mpi" --steps 3 : -n 1 "$work/mlp12_mpi" --steps 3 --lr 0.1 &&
    [ "$(wc -l < "$work/err")" -eq 1 ] && ok || bad "a mismatch is more than one line"
# parameters that drift apart (one bit of rank 1's) are caught, not saved
REMAT_TEST_MPI_FAULT=flip:1:2 fault "ranks whose parameters differ" 1 \
    "trainer: rank 0: rank 1's parameters are not rank 0's bit for bit after step 3: nothing saved" \
    -n 2 "$work/mlp12_mpi" --steps 3 --save "$work/flip"
[ ! -e "$work/flip" ] && ok || bad "a checkpoint was saved from ranks that differ"
run 2 "$work/mlp12" --steps 3 --bucket-kb 64 &&
    grep -qF -- "--bucket-kb needs a trainer built with remat build --mpi" "$work/err" &&
    ok || bad "a trainer without --mpi takes --bucket-kb"

# ---- --bench under mpirun: the figures scripts/mpi_table.sh reads ------------------
if mpirun_ 0 -n 2 "$work/gpt_mpi" --bench 3 &&
    for f in ranks median_ms wait_ms exposed_ms window_ms allreduce_ms gradient_floats buckets last_bucket_floats hidden; do
        grep -q "^$f [0-9.]*$" "$work/out" || exit 1
    done && grep -q '^ranks 2$' "$work/out"; then ok
else cat "$work/out"; bad "--bench under mpirun lacks a figure"; fi

# ---- checkpoints -------------------------------------------------------------------------
# rank 0 alone writes (no other folder appears); 6 steps, save, 4 more
# resumed equal 10 at once, every file
rm -rf "$work/k"*
if mpirun_ 0 -n 2 "$work/gpt_mpi" --steps 10 --seed 3 --optimizer adamw --data "$work/data_gpt" --save "$work/k_all" &&
    mpirun_ 0 -n 2 "$work/gpt_mpi" --steps 6 --seed 3 --optimizer adamw --data "$work/data_gpt" --save "$work/k_part" &&
    mpirun_ 0 -n 2 "$work/gpt_mpi" --steps 4 --optimizer adamw --data "$work/data_gpt" --resume "$work/k_part" --save "$work/k_part" &&
    same_dirs "$work/k_all" "$work/k_part"; then ok
else bad "2 ranks: save, stop and resume differs from an uninterrupted run"; fi
[ "$(cd "$work" && ls -d k_* | tr '\n' ' ')" = "k_all k_part " ] && ok ||
    bad "a rank other than 0 wrote a checkpoint: $(cd "$work" && ls -d k_*)"

finish test_mpi
