#!/usr/bin/env bash
# The tables of docs/mpi.md: the data-parallel trainer's step on this
# machine with 1 and 2 ranks (mpirun -n 1|2 EXE --bench N), and a scaling
# projection to K machines worked out from those figures on paper.
#
# Measured, per graph and rank count (medians over N steps, after warm-up):
#   step      the hooked train step, then the wait for the last all-reduce
#   wait      the part of it spent waiting, after this rank's backward (for
#             the all-reduces, and for a slower rank)
#   exposed   the communication left once the last rank's backward ended:
#             the wait without the time spent waiting for a slower rank
#             (the ranks' clocks compared: one machine)
#   window    from the first bucket handed on to the end of the backward:
#             the time the all-reduces can run under
#   blocking  one blocking all-reduce of the whole gradient buffer: what the
#             step would wait with no overlap
#   hidden    1 - exposed / blocking (0 when the exposed time is longer)
#
# Projected, for K machines of this machine's 1-rank compute (weak scaling:
# each rank its own micro-batch), a ring all-reduce over a network of BW
# Gbit/s per link with LAT microseconds per hop (MPI_TABLE_GBPS, default
# 10; MPI_TABLE_LAT_US, default 20):
#   comm(K)    = 2 (K-1)/K * S / BW + 2 (K-1) * LAT   (S: gradient bytes)
#   exposed(K) = max(0, comm(K) * (1 - f) - window) + comm(K) * f
#   step(K)    = step(1) + exposed(K),  efficiency = step(1) / step(K)
# where f is the last bucket's share of S (its reduction starts when the
# backward ends). It assumes the reductions take no compute from the
# backward (a NIC that moves and sums the data, or a spare core for the
# progress), no contention beyond the ring's links, and identical ranks.
#
# usage: scripts/mpi_table.sh [STEPS]   (default 50)
set -eu
cd "$(dirname "$0")/.."
export REMAT_RATES=builtin OPENBLAS_NUM_THREADS=1
steps=${1:-50}
gbps=${MPI_TABLE_GBPS:-10}
lat=${MPI_TABLE_LAT_US:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -s build/remat
get() { sed -n "s/^$1 //p" "$2"; }

echo "Measured by scripts/mpi_table.sh $steps on $(nproc) cores, MPICH $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start:"
echo
echo "| graph | ranks | gradient MB | buckets | step ms | wait ms | exposed ms | window ms | blocking all-reduce ms | hidden |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for g in mlp12 gpt; do
    build/remat build "graphs/$g.xml" --mpi -o "$tmp/$g" > /dev/null
    for n in 1 2; do
        mpirun -n "$n" "$tmp/$g" --bench "$steps" > "$tmp/$g.$n"
        f=$tmp/$g.$n
        awk -v g="$g" -v n="$n" -v s="$(get median_ms "$f")" -v w="$(get wait_ms "$f")" \
            -v e="$(get exposed_ms "$f")" \
            -v win="$(get window_ms "$f")" -v a="$(get allreduce_ms "$f")" \
            -v h="$(get hidden "$f")" -v fl="$(get gradient_floats "$f")" \
            -v b="$(get buckets "$f")" 'BEGIN {
            printf "| %s | %d | %.1f | %d | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", g, n,
                fl * 4 / 1e6, b, s, w, e, win, (n > 1 ? sprintf("%.2f", a) : "-"),
                (n > 1 ? h : "-") }'
    done
done
echo
echo "Projected with a ring all-reduce at $gbps Gbit/s and $lat us per hop, from the 1-rank step and window:"
echo
echo "| graph | K | comm ms | exposed ms | step ms | efficiency | speed-up over 1 |"
echo "|---|---|---|---|---|---|---|"
for g in mlp12 gpt; do
    f=$tmp/$g.1
    for k in 2 4 8 16 64; do
        awk -v g="$g" -v k="$k" -v s="$(get median_ms "$f")" -v win="$(get window_ms "$f")" \
            -v fl="$(get gradient_floats "$f")" -v last="$(get last_bucket_floats "$f")" \
            -v gbps="$gbps" -v lat="$lat" 'BEGIN {
            bytes = fl * 4; frac = last / fl
            comm = 2 * (k - 1) / k * bytes / (gbps * 1e9 / 8) * 1e3 + 2 * (k - 1) * lat / 1e3
            hid = comm * (1 - frac) - win; if (hid < 0) hid = 0
            exposed = hid + comm * frac
            step = s + exposed
            printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.1f |\n", g, k, comm, exposed,
                step, s / step, k * s / step }'
    done
done
