#!/usr/bin/python3
"""make bench: the generated trainers against PyTorch and the GEMM floor.

For each graph in graphs/ and in bench/graphs/ (larger configurations
where compute dominates; they run --large-steps steps, not --steps): the
trainer under every built-in policy, PyTorch eager, PyTorch with each
block under checkpoint(use_reentrant=False), and the GEMM floor (the same
sgemm calls the trainer makes, alone) each time a train step, with one
thread everywhere and with two. A round runs every contender with one
thread, then every contender with two; the rounds repeat (A B C ... A B C
...) and every figure is the median of the rounds' medians. Memory: the
compiler's saved and arena bytes beside the bytes PyTorch holds after the
forward.

Model FLOP utilization (MFU): a step's model FLOPs over its time, against
the sgemm peak (bench/gemm_peak.c: OpenBLAS on 1024x1024 matrices, the
fastest of 7 calls) that each round measures with the same thread count
before its contenders; the best round's. A
step's model FLOPs are 3x `remat schedule`'s forward_flops: the backward
counted as twice the forward, as it is for GEMM, convolution and attention
(a gradient for each of the two operands); recomputation is not counted, so
it shows as a lower MFU.

Then the compiler itself: the time and peak memory to compile graphs of
10,000 and 100,000 nodes (scripts/make_chain.py), and how they scale.

Writes bench/results.md (or --out PATH: machine, date, command, tables)
and prints it.
Usage: bench/run.py [--rounds R] [--steps N] [--large-steps N] [--no-large]
                    [--out PATH] [--compile-only]
"""
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REMAT = os.path.join(ROOT, "build", "remat")
RT = os.path.join(ROOT, "runtime")
# the single-file runtime (make dist), and the trainer's own files in RT
DIST = os.path.join(ROOT, "dist")
TRAINER_SRCS = ["trainer.c", "trainer_args.c", "trainer_io.c", "npy.c"]
POLICIES = ["none", "full", "sac", "sac-aggressive"]
PY = "/usr/bin/python3"


def run(cmd, env=None, **kw):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=env, **kw)
    return out.stdout, out.stderr


def figure(text, key):
    return float(re.search(rf"^{key}:? (\S+)$", text, re.M).group(1))


def build(graph, work):
    """Trainers per policy, the GEMM floor binary and its call list."""
    exes = {}
    for p in POLICIES:
        exes[p] = os.path.join(work, f"trainer-{p}")
        run([REMAT, "build", graph, "--policy", p, "-o", exes[p]])
    name = re.search(r'<model name="(\w+)"', open(graph).read()).group(1)
    c = os.path.join(work, "model.c")
    run([REMAT, "compile", graph, "--policy", "none", "-o", c])
    with open(os.path.join(work, "shim.c"), "w") as f:
        f.write(f'#include "model.h"\nconst rt_model *const rt_trainer_model = &{name}_model;\n')
    trace = os.path.join(work, "trace")
    run(["cc", "-std=c99", "-O3", "-march=native", "-DRT_TRACE_GEMM", "-I" + work,
         "-I" + RT, c, os.path.join(work, "shim.c"), os.path.join(DIST, "remat_rt.c")]
        + [os.path.join(RT, f) for f in TRAINER_SRCS]
        + ["-lopenblas", "-pthread", "-lm", "-o", trace])
    # one train step exactly: --dump would run an inference forward
    # before it, whose GEMMs the floor would then replay too (issue 28)
    _, calls = run([trace, "--seed", "1", "--steps", "1"])
    with open(os.path.join(work, "calls.txt"), "w") as f:
        f.write(calls)
    floor = os.path.join(work, "floor")
    run(["cc", "-std=c99", "-O3", "-march=native", "-I" + RT,
         os.path.join(ROOT, "bench", "gemm_floor.c"), os.path.join(DIST, "remat_rt.c"),
         "-lopenblas", "-pthread", "-lm", "-o", floor])
    return exes, floor


def contenders(graph, exes, floor, work, steps):
    tb = os.path.join(ROOT, "bench", "torch_bench.py")
    calls = os.path.join(work, "calls.txt")
    # --threads: the runtime's pool on the column's count, GEMMs cut into
    # that many one-thread OpenBLAS calls. OpenBLAS is started with one
    # thread: the trainer sets it to one anyway, but a thread OpenBLAS
    # starts at load spins for about 0.1 s, a whole 30-step run on mlp12
    # (1.8 or 3.3 ms a step at random, measured)
    c = {p: lambda env, e=exes[p]: run([e, "--bench", str(steps), "--threads",
                                        env["OPENBLAS_NUM_THREADS"]],
                                       dict(env, OPENBLAS_NUM_THREADS="1"))[0]
         for p in POLICIES}
    c["pytorch eager"] = lambda env: run([PY, tb, graph, "eager", "time", str(steps),
                                          env["OPENBLAS_NUM_THREADS"]], env)[0]
    c["pytorch checkpoint"] = lambda env: run([PY, tb, graph, "checkpoint", "time",
                                               str(steps), env["OPENBLAS_NUM_THREADS"]], env)[0]
    c["gemm floor"] = lambda env: run([floor, str(steps)], env, stdin=open(calls))[0]
    return c


def time_all(cs, peak, rounds):
    """Per thread count: each contender's median ms (the median over the
    rounds of each run's median) and the sgemm peak in GFLOP/s (the best
    round's: a peak, least disturbed by the machine's other work)."""
    ms = {t: {k: [] for k in cs} for t in (1, 2)}
    gf = {t: [] for t in (1, 2)}
    for _ in range(rounds):
        for t in (1, 2):
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
            gf[t].append(figure(run([peak], env)[0], "gflops"))
            for k, f in cs.items():
                ms[t][k].append(figure(f(env), "median_ms"))
    return ({t: {k: statistics.median(v) for k, v in ms[t].items()} for t in (1, 2)},
            {t: max(v) for t, v in gf.items()})


def memory(graph):
    """Saved and arena bytes per contender, and the forward's FLOPs."""
    rows = {}
    for p in POLICIES:
        s, _ = run([REMAT, "schedule", graph, "--policy", p])
        rows[p] = (figure(s, "saved_bytes"), figure(s, "arena_bytes"))
        fwd = figure(s, "forward_flops")    # the same under every policy
    tb = os.path.join(ROOT, "bench", "torch_bench.py")
    for mode in ["eager", "checkpoint"]:
        out, _ = run([PY, tb, graph, mode, "memory"])
        rows["pytorch " + mode] = (figure(out, "retained_bytes"), None)
    return rows, fwd


def table(graph, steps, times, peaks, mem, fwd):
    step_flops = 3 * fwd
    out = [f"### {os.path.relpath(graph, ROOT)}", "",
           f"{steps} steps a run; a step's model FLOPs: 3 x forward_flops = "
           f"{step_flops / 1e9:.3f} GFLOP; sgemm peak, the best of these rounds: "
           f"{peaks[1]:.1f} GFLOP/s 1 thread, {peaks[2]:.1f} GFLOP/s 2 threads", "",
           "| contender | ms/step 1 thread | ms/step 2 threads | vs none (1t) | "
           "vs PyTorch eager (1t) | vs GEMM floor (1t) | MFU 1t | MFU 2t | "
           "saved or retained bytes | arena bytes |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    t1, t2 = times[1], times[2]

    def mfu(ms, t):
        return f"{step_flops / (ms * 1e-3) / (peaks[t] * 1e9) * 100:.1f}%"
    for k in t1:
        saved, arena = mem.get(k, (None, None))
        out.append(f"| {k} | {t1[k]:.3f} | {t2[k]:.3f} | {t1[k] / t1['none']:.3f}x | "
                   f"{t1[k] / t1['pytorch eager']:.3f}x | {t1[k] / t1['gemm floor']:.3f}x | "
                   f"{mfu(t1[k], 1)} | {mfu(t2[k], 2)} | "
                   f"{'' if saved is None else f'{saved:,.0f}'} | "
                   f"{'' if arena is None else f'{arena:,.0f}'} |")
    return out


def timed(cmd):
    """CPU seconds (user + system) and peak resident MiB of one run of cmd.
    CPU time, not wall time: it hardly moves when the machine is busy."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{cmd}: failed: {proc.stderr.read().decode()}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def compile_scaling(rounds):
    """remat schedule and compile (sac) on chains of 10,000 and 100,000
    nodes: medians over the rounds, and each figure per node."""
    rows = {}
    with tempfile.TemporaryDirectory() as work:
        for n in (10000, 100000):
            g = os.path.join(work, f"chain{n}.xml")
            with open(g, "w") as f:
                subprocess.run([PY, os.path.join(ROOT, "scripts", "make_chain.py"), str(n)],
                               stdout=f, check=True)
            out = os.path.join(work, "out.c")
            runs = {"schedule": [REMAT, "schedule", g, "--policy", "sac"],
                    "compile": [REMAT, "compile", g, "--policy", "sac", "-o", out]}
            got = {k: [timed(c) for _ in range(rounds)] for k, c in runs.items()}
            rows[n] = (os.path.getsize(g), os.path.getsize(out),
                       {k: (statistics.median(s for s, _ in v), max(m for _, m in v))
                        for k, v in got.items()})
    out = ["### the compiler on large graphs", "",
           f"scripts/make_chain.py N: residual blocks of Gemm, Gelu, Gemm, Add with "
           f"two 16x16 weights each; policy sac; CPU seconds, median of {rounds} runs.", "",
           "| nodes | graph MB | C file MB | schedule s | compile s | compile peak MiB | "
           "compile us/node | time per node vs 10,000 |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base = rows[10000][2]["compile"][0] / 10000
    for n, (gsize, csize, f) in rows.items():
        out.append(f"| {n:,} | {gsize / 1e6:.1f} | {csize / 1e6:.1f} | {f['schedule'][0]:.2f} | "
                   f"{f['compile'][0]:.2f} | {f['compile'][1]:.0f} | "
                   f"{f['compile'][0] / n * 1e6:.1f} | {f['compile'][0] / n / base:.2f}x |")
    return out


def arg(argv, flag, default):
    return argv[argv.index(flag) + 1] if flag in argv else default


def xmls(d):
    d = os.path.join(ROOT, d)
    return sorted(os.path.join(d, g) for g in os.listdir(d) if g.endswith(".xml"))


def main(argv):
    rounds = int(arg(argv, "--rounds", 5))
    steps = int(arg(argv, "--steps", 50))
    large_steps = int(arg(argv, "--large-steps", 3))
    out_path = arg(argv, "--out", os.path.join(ROOT, "bench", "results.md"))
    graphs = [(g, steps) for g in xmls("graphs")]
    if "--no-large" not in argv:
        graphs += [(g, large_steps) for g in xmls(os.path.join("bench", "graphs"))]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    lines = ["# Benchmark results", "",
             f"- command: `make bench` (bench/run.py --rounds {rounds} --steps {steps} "
             f"--large-steps {large_steps}{' --no-large' if '--no-large' in argv else ''})",
             f"- date: {datetime.date.today().isoformat()}",
             f"- machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
             f"- each figure: median over {rounds} rounds of the median of a run's train "
             f"steps (forward, loss, backward; {steps} a run, {large_steps} on "
             "bench/graphs/) after 3 warm-up steps; a round runs every contender with "
             "one thread, then every contender with two",
             "- ratios are against the same run's figures, one thread; "
             "bytes: the compiler's saved_bytes and arena_bytes; for PyTorch, "
             "the bytes of live tensors after the forward minus before "
             "(the profiler's allocation events)",
             "- MFU: a step's model FLOPs (3x the forward's, by `remat schedule`'s "
             "forward_flops: the backward counted as twice the forward, as for GEMM, "
             "convolution and attention; recomputation not counted) per second, over "
             "the OpenBLAS sgemm peak on 1024x1024 matrices (bench/gemm_peak.c) with "
             "the same thread count (the fastest of 7 calls), measured in every round; "
             "the best round's", ""]
    with tempfile.TemporaryDirectory() as work:
        peak = os.path.join(work, "gemm_peak")
        run(["cc", "-std=c99", "-O3", "-march=native", os.path.join(ROOT, "bench", "gemm_peak.c"),
             "-lopenblas", "-o", peak])
        for g, n in [] if "--compile-only" in argv else graphs:
            with tempfile.TemporaryDirectory() as gw:
                exes, floor = build(g, gw)
                cs = contenders(g, exes, floor, gw, n)
                times, peaks = time_all(cs, peak, rounds)
                mem, fwd = memory(g)
                lines += table(g, n, times, peaks, mem, fwd) + [""]
    lines += compile_scaling(3) + [""]
    text = "\n".join(lines)
    if "--compile-only" in argv:    # a partial run leaves results.md alone
        print(text)
        return
    with open(out_path, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
