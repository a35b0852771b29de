/*
 * main.c: the command line. It parses arguments, chains the stages through
 * compile_graph, and is the only place that prints an error and exits:
 * 0 done, 1 an error in the input (one message: file:line: what is wrong),
 * 2 a usage error (two lines: what is wrong, and which --help to read;
 * never the whole help, which would bury the message).
 */
#define _DEFAULT_SOURCE
#include "remat.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *usage_main =
    "usage: remat COMMAND GRAPH [options]\n"
    "\n"
    "Compiles a model graph (graph format v1 XML, or an ONNX model such as\n"
    "torch.onnx.export writes; told apart by content) into C training code\n"
    "whose backward recomputes or saves each activation as a policy says.\n"
    "\n"
    "commands:\n"
    "  compile    write the generated trainer code: OUT.c and OUT.h\n"
    "  schedule   print every forward tensor's decision and the plan's totals\n"
    "  diff       compare the decisions and totals of two policies\n"
    "  build      compile, then build a runnable trainer executable\n"
    "  pareto     every optimal plan from budget 0 to 1, as a table (and SVG)\n"
    "  memory     what the arena holds at each statement, as text or SVG\n"
    "  import     write an ONNX model as the format's XML and .npy weights\n"
    "  calibrate  time this machine's kernels for the cost model (no GRAPH)\n"
    "  ops        list the ops remat computes, and those it only folds (no GRAPH)\n"
    "\n"
    "policies: none, full, sac, sac-aggressive, or a policy file FILE.xml\n"
    "`remat COMMAND --help` (or `remat help COMMAND`) describes each command;\n"
    "`remat --version` prints the version. Recompute is priced in time\n"
    "(docs/cost-model.md) at the rates `remat calibrate` stored, else\n"
    "built-in ones; REMAT_RATES=FILE reads another file, REMAT_RATES=builtin\n"
    "ignores it. A usage error exits 2, an error in the input 1\n"
    "(docs/cli.md).\n";

/* The trainer's optimizer flags, which every command that plans takes. */
#define OPTIM_HELP \
    "  --optimizer sgd|adamw, --momentum M, --fused\n" \
    "               the optimizer the trainer will use (its flags of the same\n" \
    "               names; default plain SGD, not fused): ram_bytes counts\n" \
    "               its state (momentum > 0: one float per trainable float,\n" \
    "               AdamW two) and, unless fused, the gradient buffer\n" \
    "               (docs/memory.md)\n"

/* --max-ram, on the commands that take --max-arena. */
#define MAX_RAM_HELP \
    "  --max-ram B  the same, bounding ram_bytes (bytes): the arena gets\n" \
    "               what the parameters, optimizer state, gradients and\n" \
    "               inputs and outputs leave (the fused arena with --fused);\n" \
    "               not with --max-arena\n"

/* Frozen parameters drawn at compile time: the commands that compile, and
 * those that count flash_bytes as compile would. */
/* compile's and build's --name. */
#define NAME_HELP \
    "  --name NAME  prefix the generated symbols with NAME (NAME_model,\n" \
    "               NAME_train_step, NAME_ARENA_BYTES ...) instead of the\n" \
    "               model's own name: a C identifier of at most 64\n" \
    "               characters, as a model name must be\n"

#define SEED_HELP \
    "  --seed N     draw the frozen parameters init would draw from seed N\n" \
    "               now, so that they are static const data (flash), not\n" \
    "               in the parameter buffer (docs/firmware.md)\n"

/* The option every compiling command takes. */
#define FREEZE_HELP \
    "  --freeze GLOB  make the parameters GLOB matches (* and ? over whole\n" \
    "               names; repeatable) constants, as trainable=\"false\" does:\n" \
    "               no gradient slot, no optimizer state, and no activation\n" \
    "               kept only for their gradients; a GLOB matching none is\n" \
    "               an error\n"

/* And the bound on a Conv's im2col columns (docs/memory.md). */
#define CONV_SCRATCH_HELP \
    "  --conv-scratch B  hold at most B bytes of a Conv's im2col columns at\n" \
    "               once (3MiB, 64KiB, 123456): built in bands of output rows\n" \
    "               (forward) and taps (backward), at least one row; default\n" \
    "               no bound, each image's whole columns (the fastest)\n"

static const char *usage_compile =
    "usage: remat compile GRAPH.xml [--policy NAME|FILE.xml] -o OUT.c\n"
    "\n"
    "Writes OUT.c and OUT.h beside it: the model's init, forward, train step\n"
    "(loss and gradients) and SGD functions, straight-line C calling the\n"
    "runtime (dist/remat_rt.c), with every buffer at a planned offset in\n"
    "one arena of NAME_ARENA_BYTES. Files are replaced only when complete.\n"
    "A graph none of whose outputs is the loss (docs/graph-format.md) is\n"
    "forward only: init and forward, and NAME_HAS_TRAIN_STEP 0.\n"
    "  --policy P   none (default), full, sac, sac-aggressive, or FILE.xml\n"
    "  --budget B   the least recompute time keeping saved bytes within B:\n"
    "               a fraction (0.4: 0 is full's saved bytes, 1 none's) or\n"
    "               bytes (3MiB, 750KiB, 123456); only prefer_* decisions move\n"
    "  --max-arena B  the same, bounding the planned arena instead (bytes)\n"
    MAX_RAM_HELP
    "  (with any and no --policy, the policy is sac, must_save softened)\n"
    OPTIM_HELP
    FREEZE_HELP
    SEED_HELP
    CONV_SCRATCH_HELP
    NAME_HELP
    "  -o OUT.c     the C file to write; the header is OUT.h\n";

/* The option the reporting commands take. */
#define JSON_HELP \
    "  --json       the same figures as one JSON object (docs/memory.md)\n"

static const char *usage_schedule =
    "usage: remat schedule GRAPH.xml [--policy NAME|FILE.xml] [--json]\n"
    "\n"
    "Prints, for each forward tensor in topological order: its node, op,\n"
    "shape, bytes, decision (SAVE, RECOMPUTE, or - when the backward never\n"
    "reads it) and the rule that decided it; then `key: value` lines:\n"
    "  saved_bytes           activations kept from forward to backward\n"
    "                        (graph inputs and parameters excluded; a\n"
    "                        Reshape or Flatten shares its input's bytes)\n"
    "  arena_bytes           the planned arena (forward and train step)\n"
    "  peak_live_bytes       the most bytes live at one statement: no\n"
    "                        arena of this schedule is smaller\n"
    "  recompute_flops       FLOPs of the recomputes in one train step\n"
    "  recompute_seconds     their estimated time, what a budget minimizes\n"
    "                        (docs/cost-model.md)\n"
    "  forward_flops         FLOPs of the forward's node executions (the\n"
    "                        ops' own counts; a train step's backward is\n"
    "                        not counted)\n"
    "  forward_executions    node executions in the forward\n"
    "  recompute_executions  node executions recomputed in the backward\n"
    "  saved_tensors, recomputed_tensors\n"
    "  gradient_bytes, fused_arena_bytes  the gradient buffer, and the\n"
    "                        arena of the step with the update fused\n"
    "  ram_bytes             what a device holds in RAM to train, for the\n"
    "                        optimizer below; then its terms: ram_params_bytes,\n"
    "                        ram_optimizer_bytes, ram_gradient_bytes,\n"
    "                        ram_arena_bytes, ram_io_bytes\n"
    "  flash_bytes           frozen parameters and int64 constants\n"
    "  optimizer             the optimizer ram_bytes is for\n"
    "and with a budget: budget_bytes, max_ram_bytes, max_arena_bytes,\n"
    "free_decisions (the prefer_* decisions the budget could turn) and\n"
    "proven_optimal.\n"
    "  --policy P   none (default), full, sac, sac-aggressive, or FILE.xml\n"
    "  --budget B   the least recompute time keeping saved bytes within B:\n"
    "               a fraction (0.4: 0 is full's saved bytes, 1 none's) or\n"
    "               bytes (3MiB, 750KiB, 123456); only prefer_* decisions move\n"
    "  --max-arena B  the same, bounding the planned arena instead (bytes)\n"
    MAX_RAM_HELP
    "  (with any and no --policy, the policy is sac, must_save softened)\n"
    OPTIM_HELP
    JSON_HELP
    FREEZE_HELP
    SEED_HELP
    CONV_SCRATCH_HELP;

static const char *usage_diff =
    "usage: remat diff GRAPH.xml --policy A --policy B [--budget B]\n"
    "       remat diff GRAPH.xml [--policy A] --budget B\n"
    "\n"
    "Prints the tensors whose decision differs between policies A and B, with\n"
    "the rule behind each side, then every summary figure as `key: A -> B\n"
    "(change)`. With a budget, both sides are within it; with a budget and one\n"
    "policy (default sac), the sides are that policy without and with it.\n"
    "Both sides freeze what --freeze says. --max-arena and --max-ram bound\n"
    "as a budget does (see schedule).\n"
    OPTIM_HELP
    JSON_HELP
    FREEZE_HELP
    SEED_HELP
    CONV_SCRATCH_HELP;

static const char *usage_pareto =
    "usage: remat pareto GRAPH.xml [--policy NAME|FILE.xml] [--measure]\n"
    "                    [--by saved|arena] [-o CURVE.svg] [--json]\n"
    "\n"
    "Prints every optimal plan, from the least saved bytes (budget 0) to the\n"
    "most (budget 1): the budget fraction at which it becomes optimal, its\n"
    "saved bytes, arena bytes, recompute FLOPs and estimated recompute\n"
    "seconds (the solver's objective, docs/cost-model.md); with --measure\n"
    "also the median ms per train step of its trainer (built and run, which\n"
    "takes a while). -o writes the curve of saved bytes against estimated\n"
    "recompute time as an SVG picture with the built-in policies marked.\n"
    "  --by arena   only the plans that need less arena than every plan\n"
    "               with less recompute: arena bytes fall as recompute\n"
    "               rises (among the plans optimal for saved bytes; the\n"
    "               picture draws arena bytes); --by saved, the default,\n"
    "               every plan\n"
    "  --policy P   the decisions the budget may turn (its PREFER_* ones);\n"
    "               default sac with must_save softened to prefer_save\n"
    "The last column, ram_bytes, is each plan's (see schedule).\n"
    OPTIM_HELP
    JSON_HELP
    FREEZE_HELP
    SEED_HELP
    CONV_SCRATCH_HELP;

static const char *usage_memory =
    "usage: remat memory GRAPH.xml [--policy NAME|FILE.xml] [-o MEMORY.svg]\n"
    "                    [--json]\n"
    "\n"
    "Draws the bytes live at each statement of the train step (forward, then\n"
    "backward; the forward alone when no output is the loss) as a stacked\n"
    "area by what holds them: saved (forward values the backward reads),\n"
    "forward, recomputed, gradient and scratch; with the peak statement\n"
    "(peak_live_bytes) marked and its largest values named; it prints\n"
    "nothing. Without -o, prints the peak statement, its bytes by kind and\n"
    "its largest values instead (docs/memory.md).\n"
    "  --policy, --budget, --max-arena, --max-ram: as for schedule\n"
    "  -o MEMORY.svg  the picture to write (replaced only when complete)\n"
    "  --json       the figures, and each kind's bytes at every statement,\n"
    "               as one JSON object on standard output (with -o too)\n"
    OPTIM_HELP
    FREEZE_HELP
    SEED_HELP
    CONV_SCRATCH_HELP;

static const char *usage_build =
    "usage: remat build GRAPH.xml [--policy NAME|FILE.xml] [--no-blas]\n"
    "                   [--fma] [--cflags \"FLAGS\"] [--mpi] -o EXE\n"
    "\n"
    "Compiles the graph, then builds a trainer executable with $CC (else cc),\n"
    "the runtime and OpenBLAS, with -std=c99 -O3 -ffp-contract=off (the same\n"
    "bits on every machine), and -march=native when the\n"
    "build is for this machine: $CC unset and no -march=, -mcpu= or --target=\n"
    "in --cflags. Works from any directory. The runtime's objects\n"
    "are compiled once per C compiler, flags and runtime source and kept in\n"
    "$REMAT_CACHE_DIR, else $XDG_CACHE_HOME/remat, else ~/.cache/remat. The\n"
    "trainer:\n"
    "  EXE --seed N --dump DIR   one train step on seeded data; writes .npy\n"
    "                            files of inputs, params, outputs, loss and\n"
    "                            grads (forward only: inputs, params, outputs)\n"
    "  EXE --load DIR ...        read input.* and param.* from DIR instead; a\n"
    "                            non-trainable param may be left out (init)\n"
    "  EXE --steps N [--lr F]    train with SGD, printing the loss\n"
    "  EXE --bench N             median milliseconds of a train step (forward\n"
    "                            only: of the forward)\n"
    "  --no-blas    build with the runtime's portable GEMM instead of OpenBLAS\n"
    "  --fma        -ffp-contract=fast: a * b + c may be one fused multiply-add,\n"
    "               faster, but the bits then differ between machines (and\n"
    "               from firmware); never -ffast-math (docs/training.md)\n"
    "  --cflags \"FLAGS\"  more compiler flags, split on spaces, after the\n"
    "               built-in ones (so -O2 overrides -O3); e.g. for results\n"
    "               bitwise equal to firmware: --no-blas (docs/firmware.md)\n"
    "  CC=COMPILER  cross-compile (CC=aarch64-linux-gnu-gcc): no -march=native\n"
    "  --mpi        a data-parallel trainer for mpirun -n K, built with mpicc\n"
    "               (or $CC, which must then be an MPI wrapper; docs/mpi.md)\n"
    "  --policy, --budget, --max-arena, --max-ram: as for compile\n"
    OPTIM_HELP
    "               (for the count: the trainer does not take them from\n"
    "               here, so run it with the same flags)\n"
    FREEZE_HELP
    SEED_HELP
    CONV_SCRATCH_HELP
    NAME_HELP;

static const char *usage_import =
    "usage: remat import MODEL.onnx -o MODEL.xml [--blocks auto|none]\n"
    "\n"
    "Writes the ONNX model as the format's XML, the graph every other command\n"
    "compiles from MODEL.onnx, so that compiling MODEL.xml gives the same C\n"
    "byte for byte. Each initializer's values go to MODEL.weights/NAME.npy\n"
    "beside it (init=\"file\"); those no gradient reaches are constants\n"
    "(trainable=\"false\"). Constant subgraphs are folded and known\n"
    "patterns rewritten; a summary of both is printed and heads the XML.\n"
    "  --blocks auto  blocks from repeated NAME.N scopes (default)\n"
    "  --blocks none  no blocks: every activation outside a block is saved\n";

static const char *usage_calibrate =
    "usage: remat calibrate\n"
    "\n"
    "Times the runtime's copy, Relu, Tanh and GEMM (the compiler's own build\n"
    "of them: the portable GEMM, one thread) for a few runs each, the best\n"
    "kept, under a second in all; prints the rates and writes them to\n"
    "$REMAT_RATES if set, else ${XDG_CONFIG_HOME:-$HOME/.config}/remat/rates\n"
    "(replaced whole). Every command that compiles a graph prices recomputes\n"
    "at them; REMAT_RATES=builtin uses the built-in rates instead\n"
    "(docs/cost-model.md).\n";

static const char *usage_ops =
    "usage: remat ops [--json]\n"
    "\n"
    "Lists every op remat computes, forward and backward, one per line: its\n"
    "ONNX name (the op=\"...\" of the graph format) and its category (matmul,\n"
    "conv, attention, pointwise, reduction, normalization, shape, random,\n"
    "loss), in the op table's order; then the ONNX ops the importer only\n"
    "folds: evaluates at import when their inputs are constants (Shape and\n"
    "Size: static shapes), and refuses on a computed tensor unless noted;\n"
    "then those it lowers into the ops above (LSTM, GRU, RNN: unrolled).\n"
    "  --json       the same as one JSON object (docs/cli.md)\n";

typedef struct {
    const char *cmd, *graph, *out, *blocks;
    const char *policy[2];
    int npolicy, no_blas, measure, json, by_arena, mpi, fma;
    const char *cflags;               /* build's --cflags */
    const char *budget, *max_arena, *max_ram;   /* as given */
    const char *conv_scratch;                   /* as given */
    Optim optim;            /* --optimizer, --momentum, --fused */
    int have_optimizer, have_momentum;
    const char **freeze;    /* --freeze globs, NULL-terminated (argc slots) */
    int nfreeze;
    int has_seed;           /* compile's and build's --seed N */
    uint64_t seed;
    const char *name;       /* compile's and build's --name */
    const Rates *rates;     /* how recompute is priced (cost.c) */
} Args;

/* What is wrong with name as the generated symbols' prefix, or NULL: the
 * rules a model name follows (parse.c's check_model_name). */
static const char *symbol_prefix_problem(const char *name)
{
    size_t n = strlen(name);
    int ok = n > 0 && n <= 64 && (isalpha((unsigned char)name[0]) ||
                                  name[0] == '_');
    for (size_t i = 1; ok && i < n; i++)
        ok = isalnum((unsigned char)name[i]) || name[i] == '_';
    if (!ok)
        return "not a C identifier of at most 64 characters";
    const char *clash = model_name_clash(name);
    return clash ? (strcmp(clash, "rt") == 0
                    ? "would clash with the runtime's rt_ symbols"
                    : "could clash with the generated code's tables (not "
                      "map, init, bmm, bmma, bmmb, dims, perm, win, where, "
                      "slicein, sliceout, slicestart or slicestep, alone "
                      "or followed by _)")
                 : NULL;
}

/* Two lines: what is wrong, and where the rest is, so the message is not
 * lost above a page of help. cmd is NULL for the command itself. */
static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "remat%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\ntry 'remat %s%s--help'\n", cmd ? cmd : "",
            cmd ? " " : "");
    return 2;
}

static int is_help(const char *s)
{
    return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0;
}

static int is_optim_flag(const char *s)
{
    return strcmp(s, "--optimizer") == 0 || strcmp(s, "--momentum") == 0 ||
           strcmp(s, "--fused") == 0;
}

/* The trainer's optimizer flags (runtime/trainer_args.c), so that
 * ram_bytes counts the state of the optimizer the trainer will use:
 * argv[*i] is one of them; 2 after a usage error. */
static int optim_arg(int argc, char **argv, int *i, Args *a)
{
    const char *s = argv[*i];
    if (strcmp(s, "--fused") == 0) {
        if (a->optim.fused)
            return usage_error(a->cmd, "%s given twice", s);
        a->optim.fused = 1;
        return 0;
    }
    if (*i + 1 >= argc)
        return usage_error(a->cmd, "%s needs a value", s);
    const char *v = argv[++*i];
    int *seen = s[2] == 'o' ? &a->have_optimizer : &a->have_momentum;
    if ((*seen)++)
        return usage_error(a->cmd, "%s given twice", s);
    if (s[2] == 'o') {
        if (strcmp(v, "sgd") && strcmp(v, "adamw"))
            return usage_error(a->cmd, "--optimizer takes sgd or adamw, not "
                               "%s", v);
        a->optim.adamw = strcmp(v, "adamw") == 0;
        return 0;
    }
    char *end;
    double m = strtod(v, &end);
    if (!*v || *end || !isfinite(m) || m < 0)
        return usage_error(a->cmd, "--momentum takes a number of 0 or more, "
                           "not %s", v);
    a->optim.momentum = m;
    return 0;
}

/* Decimal digits alone, within uint64_t; -1 otherwise. */
static int parse_seed(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, const char *usage, Args *a)
{
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        } else if ((strcmp(s, "--budget") == 0 || strcmp(s, "--max-arena") == 0)
                   && strcmp(a->cmd, "pareto") != 0) {
            const char **v = s[2] == 'b' ? &a->budget : &a->max_arena;
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            if (*v)
                return usage_error(a->cmd, "%s given twice", s);
            *v = argv[++i];
        } else if (strcmp(s, "--max-ram") == 0 && strcmp(a->cmd, "pareto") != 0
                   && strcmp(a->cmd, "import") != 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            if (a->max_ram)
                return usage_error(a->cmd, "%s given twice", s);
            a->max_ram = argv[++i];
        } else if (is_optim_flag(s) && strcmp(a->cmd, "import") != 0) {
            int rc = optim_arg(argc, argv, &i, a);
            if (rc)
                return rc;
        } else if (strcmp(s, "--conv-scratch") == 0 &&
                   strcmp(a->cmd, "import") != 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            if (a->conv_scratch)
                return usage_error(a->cmd, "%s given twice", s);
            a->conv_scratch = argv[++i];
        } else if (strcmp(s, "--policy") == 0 || strcmp(s, "-o") == 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            if (s[1] == 'o')
                a->out = argv[++i];
            else if (a->npolicy == 2)
                return usage_error(a->cmd, "%s given more than twice", s);
            else
                a->policy[a->npolicy++] = argv[++i];
        } else if (strcmp(s, "--blocks") == 0 && strcmp(a->cmd, "import") == 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            a->blocks = argv[++i];
            if (strcmp(a->blocks, "auto") && strcmp(a->blocks, "none"))
                return usage_error(a->cmd, "--blocks takes auto or none, not "
                                   "%s", a->blocks);
        } else if (strcmp(s, "--freeze") == 0 && strcmp(a->cmd, "import") != 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            a->freeze[a->nfreeze++] = argv[++i];
        } else if (strcmp(s, "--seed") == 0 && strcmp(a->cmd, "import") != 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            if (a->has_seed)
                return usage_error(a->cmd, "%s given twice", s);
            if (parse_seed(argv[++i], &a->seed))
                return usage_error(a->cmd, "--seed takes a whole number from 0 "
                                   "to 18446744073709551615, not '%s'", argv[i]);
            a->has_seed = 1;
        } else if (strcmp(s, "--name") == 0 && (strcmp(a->cmd, "compile") == 0 ||
                                                strcmp(a->cmd, "build") == 0)) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            if (a->name)
                return usage_error(a->cmd, "%s given twice", s);
            a->name = argv[++i];
            const char *bad = symbol_prefix_problem(a->name);
            if (bad)
                return usage_error(a->cmd, "--name '%s': %s", a->name, bad);
        } else if (strcmp(s, "--no-blas") == 0 && strcmp(a->cmd, "build") == 0) {
            a->no_blas = 1;
        } else if (strcmp(s, "--mpi") == 0 && strcmp(a->cmd, "build") == 0) {
            a->mpi = 1;
        } else if (strcmp(s, "--fma") == 0 && strcmp(a->cmd, "build") == 0) {
            a->fma = 1;
        } else if (strcmp(s, "--cflags") == 0 && strcmp(a->cmd, "build") == 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            if (a->cflags)
                return usage_error(a->cmd, "%s given twice", s);
            a->cflags = argv[++i];
        } else if (strcmp(s, "--measure") == 0 && strcmp(a->cmd, "pareto") == 0) {
            a->measure = 1;
        } else if (strcmp(s, "--by") == 0 && strcmp(a->cmd, "pareto") == 0) {
            if (i + 1 >= argc)
                return usage_error(a->cmd, "%s needs a value", s);
            s = argv[++i];
            if (strcmp(s, "arena") && strcmp(s, "saved"))
                return usage_error(a->cmd, "--by takes saved or arena, not %s", s);
            a->by_arena = strcmp(s, "arena") == 0;
        } else if (strcmp(s, "--json") == 0 && (strcmp(a->cmd, "schedule") == 0
                   || strcmp(a->cmd, "diff") == 0
                   || strcmp(a->cmd, "pareto") == 0
                   || strcmp(a->cmd, "memory") == 0)) {
            a->json = 1;
        } else if (s[0] == '-' && s[1])
            return usage_error(a->cmd, "unknown option %s", s);
        else if (a->graph)
            return usage_error(a->cmd, "more than one graph file (%s)", s);
        else
            a->graph = s;
    }
    if (!a->graph)
        return usage_error(a->cmd, "no graph file given");
    if (a->max_ram && a->max_arena)
        return usage_error(a->cmd, "--max-ram and --max-arena both bound the "
                           "arena; give one");
    if (a->have_momentum && a->optim.adamw)
        return usage_error(a->cmd, "--momentum is SGD's; --optimizer is adamw");
    int want = strcmp(a->cmd, "diff") == 0 ? 2 : 1;
    int budgeted = a->budget || a->max_arena || a->max_ram;
    if (want == 2 && a->npolicy != 2 && !budgeted)
        return usage_error(a->cmd, "needs --policy twice (or a budget)");
    if ((want == 1 || budgeted) && a->npolicy > want)
        return usage_error(a->cmd, "takes one --policy");
    /* with a budget and no policy: sac, must_save softened (compile_graph) */
    int pareto = strcmp(a->cmd, "pareto") == 0;
    if (a->npolicy == 0 && !budgeted && !pareto)
        a->policy[0] = "none";
    int needs_out = strcmp(a->cmd, "compile") == 0 ||
                    strcmp(a->cmd, "build") == 0 || strcmp(a->cmd, "import") == 0;
    if (needs_out && !a->out)
        return usage_error(a->cmd, "needs -o OUTPUT");
    int may_out = pareto || strcmp(a->cmd, "memory") == 0;
    if (!needs_out && !may_out && a->out)
        return usage_error(a->cmd, "prints to standard output; it takes no -o");
    return 0;
}

/* The budget options (BUDGET_NONE without), and the rates; -1 on a bad
 * value. */
static int budget_of(Ctx *c, const Args *a, Budget *b, const Budget **out)
{
    memset(b, 0, sizeof *b);
    b->rates = a->rates;
    b->optim = a->optim;
    b->has_seed = a->has_seed;
    b->seed = a->seed;
    b->name = a->name;
    *out = b;
    BudgetKind k;
    if (a->max_ram && budget_parse(c, "--max-ram", a->max_ram, 0, &k,
                                   &b->max_ram))
        return -1;
    if (a->max_ram && b->max_ram < 1)
        return ctx_error(c, "--max-ram", 0, "'%s' leaves no RAM; give a "
                         "positive byte count", a->max_ram);
    if (a->conv_scratch && budget_parse(c, "--conv-scratch", a->conv_scratch,
                                        0, &k, &b->conv_scratch))
        return -1;
    if (!a->budget && !a->max_arena)
        return 0;
    if (a->budget && budget_parse(c, "--budget", a->budget, 1, &b->kind,
                                  &b->value))
        return -1;
    if (a->max_arena && budget_parse(c, "--max-arena", a->max_arena, 0, &k,
                                     &b->max_arena))
        return -1;
    *out = b;
    return 0;
}

/* Compiles the graph under policy i of the command line and its budget. */
static int compile_args(Ctx *c, const Args *a, int i, Compiled *m)
{
    Budget b;
    const Budget *bp;
    if (budget_of(c, a, &b, &bp) ||
        compile_graph(c, a->graph, a->policy[i], bp, a->freeze, m))
        return -1;
    return 0;
}

static const char *basename_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int cmd_compile(Ctx *c, const Args *a)
{
    size_t n = strlen(a->out);
    if (n < 3 || strcmp(a->out + n - 2, ".c") != 0) {
        fprintf(stderr, "remat: -o %s: the output must end in .c (the header "
                "goes beside it as .h)\n", a->out);
        return 2;
    }
    char *h = ctx_strdup(c, a->out);
    h[n - 1] = 'h';
    char *w = ctx_printf(c, "%.*s.weights", (int)(n - 2), a->out);
    Compiled m;
    Buf cf, hf, wf;
    buf_init(&cf, c);
    buf_init(&hf, c);
    /* the weights first: a good OUT.c never names values not yet there */
    if (compile_args(c, a, 0, &m) ||
        emit_c(c, &m, basename_of(h), &cf, &hf, &wf) ||
        (wf.len && buf_write_file(&wf, w)) ||
        write_pair_atomic(c, a->out, &cf, h, &hf))
        return 1;
    return 0;
}

static int cmd_schedule(Ctx *c, const Args *a)
{
    Compiled m;
    Buf b;
    buf_init(&b, c);
    if (compile_args(c, a, 0, &m))
        return 1;
    if (a->json)
        report_schedule_json(&b, &m);
    else
        report_schedule(&b, &m);
    fwrite(b.data, 1, b.len, stdout);
    return 0;
}

static int cmd_diff(Ctx *c, const Args *a)
{
    Compiled x, y;
    Buf b;
    buf_init(&b, c);
    /* with a budget and one policy: that policy without, then with it */
    int one = a->npolicy < 2;
    /* the side without the budget: the rates, the optimizer and
     * --conv-scratch alone */
    Budget rates;
    const Budget *bp;
    if (budget_of(c, a, &rates, &bp))
        return 1;
    rates.kind = BUDGET_NONE;
    rates.max_arena = 0;
    rates.max_ram = 0;
    if ((one ? compile_graph(c, a->graph, a->policy[0] ? a->policy[0] : "sac",
                             &rates, a->freeze, &x)
             : compile_args(c, a, 0, &x)) ||
        compile_args(c, a, one ? 0 : 1, &y))
        return 1;
    if (a->json)
        report_diff_json(&b, &x, &y);
    else
        report_diff(&b, &x, &y);
    fwrite(b.data, 1, b.len, stdout);
    return 0;
}

static int cmd_build(Ctx *c, const Args *a)
{
    Compiled m;
    const BuildOptions o = {a->no_blas, a->cflags, a->mpi, a->fma};
    progress(c, "remat build: compiling %s", a->graph);
    if (compile_args(c, a, 0, &m) ||
        build_trainer(c, &m, a->out, &o))
        return 1;
    return 0;
}

/* 1 (after a one-line message) when -o names no .svg file. */
static int not_svg(const char *out)
{
    size_t n = out ? strlen(out) : 0;
    if (out && (n < 5 || strcmp(out + n - 4, ".svg") != 0)) {
        fprintf(stderr, "remat: -o %s: the picture's name must end in .svg\n",
                out);
        return 1;
    }
    return 0;
}

static int cmd_pareto(Ctx *c, const Args *a)
{
    if (not_svg(a->out))
        return 2;
    Graph *g;
    Policy *p;
    Buf b;
    buf_init(&b, c);
    if (policy_load(c, a->policy[0] ? a->policy[0] : "sac", &p) ||
        load_graph(c, a->graph, &g) || freeze_params(c, g, a->freeze) ||
        fold_batch_norms(c, g))
        return 1;
    Budget opts;
    const Budget *bp;
    if (budget_of(c, a, &opts, &bp))
        return 1;
    g->conv_scratch = (long)opts.conv_scratch;
    g->has_seed = opts.has_seed;
    g->seed = opts.seed;
    if (!a->policy[0])
        p = policy_soften(c, p);
    if (report_pareto(c, g, p, a->rates, &a->optim, a->measure, a->json,
                      a->by_arena, a->out, &b))
        return 1;
    fwrite(b.data, 1, b.len, stdout);
    return 0;
}

static int cmd_memory(Ctx *c, const Args *a)
{
    Compiled m;
    Buf b;
    buf_init(&b, c);
    if (not_svg(a->out))
        return 2;
    if (compile_args(c, a, 0, &m) || report_memory(c, &m, a->out, a->json, &b))
        return 1;
    if (b.len)      /* with -o nothing is printed, but --json */
        fwrite(b.data, 1, b.len, stdout);
    return 0;
}

/* NAME.xml and NAME.weights/ beside it: the weights first, each file
 * written whole, then the XML, so a good XML never names a missing file. */
static int cmd_import(Ctx *c, const Args *a)
{
    size_t n = strlen(a->out);
    if (n < 5 || strcmp(a->out + n - 4, ".xml") != 0) {
        fprintf(stderr, "remat: -o %s: the output must end in .xml\n", a->out);
        return 2;
    }
    char *data;
    size_t len;
    Imported im;
    ImportOptions opt = {a->out, !a->blocks || strcmp(a->blocks, "none")};
    if (read_graph_file(c, a->graph, &data, &len))
        return 1;
    if (!onnx_is_model(data, len)) {
        fprintf(stderr, "%s: is XML already; remat import reads ONNX models\n",
                a->graph);
        return 1;
    }
    Graph *g;
    if (onnx_import(c, a->graph, data, len, &opt, &im) ||
        parse_graph_imported(c, a->graph, &im, &g) ||
        write_weights(c, a->out, &im) ||
        write_file_atomic(c, a->out, im.xml.data, im.xml.len))
        return 1;
    for (const char *w = im.warnings.data; w && *w; ) {
        const char *e = strchr(w, '\n');
        size_t n = e ? (size_t)(e - w) : strlen(w);
        fprintf(stderr, "remat import: %.*s\n", (int)n, w);
        w += n + (e != NULL);
    }
    fwrite(im.report.data, 1, im.report.len, stdout);
    printf("wrote %s and %d weight files\n", a->out, im.nweights);
    return 0;
}

/* remat calibrate: the rates measured, printed and stored. */
static int calibrate(int argc, char **argv)
{
    if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        fputs(usage_calibrate, stdout);
        return 0;
    }
    if (argc > 2)
        return usage_error("calibrate", "takes no argument "
                           "(%s)", argv[2]);
    Ctx c;
    ctx_init(&c);
    Rates rt;
    const char *path = rates_path(&c);
    int rc = 0;
    if (!path) {
        fprintf(stderr, "remat: nowhere to write the rates: REMAT_RATES is "
                "builtin (or HOME is unset); set REMAT_RATES=FILE\n");
        rc = 1;
    } else if (rates_calibrate(&c, &rt) || rates_write(&c, path, &rt)) {
        fprintf(stderr, "%s\n", c.err);
        rc = 1;
    } else {
        Buf b;
        buf_init(&b, &c);
        rates_text(&b, &rt);
        printf("%swrote %s\n", b.data, path);
    }
    ctx_free(&c);
    return rc;
}

/* remat ops: the op table and the importer's folds, as text or JSON. */
static int ops(int argc, char **argv)
{
    int json = 0;
    for (int i = 2; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(usage_ops, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error("ops", "unknown option %s", argv[i]);
        } else {
            return usage_error("ops", "takes no argument (%s)", argv[i]);
        }
    }
    const char *names[MAX_FOLDED_OPS], *notes[MAX_FOLDED_OPS];
    int n = onnx_folded_ops(names, notes, MAX_FOLDED_OPS);
    const char *lowered[MAX_FOLDED_OPS], *how[MAX_FOLDED_OPS];
    int nl = onnx_lowered_ops(lowered, how, MAX_FOLDED_OPS);
    Ctx c;
    ctx_init(&c);
    Buf b;
    buf_init(&b, &c);
    report_ops(&b, names, notes, n, lowered, how, nl, json);
    fwrite(b.data, 1, b.len, stdout);
    ctx_free(&c);
    return 0;
}

/* The command's rates: the file's, or built-in; 1 after the file's error. */
static int load_rates(Rates *rt)
{
    Ctx c;
    ctx_init(&c);
    const char *from;
    int rc = rates_load(&c, rt, &from);
    if (rc)
        fprintf(stderr, "%s\n", c.err);
    ctx_free(&c);
    return rc ? 1 : 0;
}

typedef struct {
    const char *name, *const *usage;
    int (*run)(Ctx *, const Args *);    /* a command that reads a graph */
    int (*alone)(int, char **);         /* else one that reads none */
} Command;

static const Command commands[] = {
    {"compile", &usage_compile, cmd_compile, NULL},
    {"schedule", &usage_schedule, cmd_schedule, NULL},
    {"diff", &usage_diff, cmd_diff, NULL},
    {"build", &usage_build, cmd_build, NULL},
    {"pareto", &usage_pareto, cmd_pareto, NULL},
    {"memory", &usage_memory, cmd_memory, NULL},
    {"import", &usage_import, cmd_import, NULL},
    {"calibrate", &usage_calibrate, NULL, calibrate},
    {"ops", &usage_ops, NULL, ops},
};

static const Command *command_named(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    return NULL;
}

/* An unknown command or option, with the name it most likely meant. */
static int unknown(const char *what, const char *name)
{
    const char *const names[] = {"compile", "schedule", "diff", "build",
                                 "pareto", "memory", "import", "calibrate",
                                 "ops", "help", "--help", "--version"};
    const char *near = closest_name(name, names, sizeof names / sizeof *names);
    if (near)
        return usage_error(NULL, "unknown %s '%s' (did you mean '%s'?)", what,
                           name, near);
    return usage_error(NULL, "unknown %s '%s'", what, name);
}

/* remat help [COMMAND]: the help `remat [COMMAND] --help` prints. */
static int help(int argc, char **argv)
{
    if (argc > 3)
        return usage_error(NULL, "help takes one command, not also '%s'",
                           argv[3]);
    if (argc < 3 || is_help(argv[2])) {
        fputs(usage_main, stdout);
        return 0;
    }
    const Command *cmd = command_named(argv[2]);
    if (!cmd)
        return unknown("command", argv[2]);
    fputs(*cmd->usage, stdout);
    return 0;
}

/* 1 with one line when OUT's folder does not exist: found before the
 * command compiles anything, and said as what it is, rather than as the
 * C compiler's or a temporary file's failure when the output is written. */
static int out_folder_missing(const char *out)
{
    const char *slash = out ? strrchr(out, '/') : NULL;
    if (!slash || slash == out)
        return 0;
    char dir[4096];
    int n = snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
    struct stat st;
    if (n < 0 || (size_t)n >= sizeof dir || (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
        return 0;
    fprintf(stderr, "remat: -o %s: the folder '%s' does not exist; create it "
            "first, or name an output in a folder that does\n", out, dir);
    return 1;
}

/* A command that compiles a graph: its arguments, the rates, the run. */
static int run_command(const Command *cmd, int argc, char **argv)
{
    Rates rates;
    Args a = {.cmd = cmd->name, .rates = &rates};
    const char **freeze = calloc((size_t)argc, sizeof *freeze);
    if (!freeze) {
        fputs("remat: out of memory\n", stderr);
        return 1;
    }
    a.freeze = freeze;
    int rc = parse_args(argc, argv, *cmd->usage, &a);
    if (!rc)
        rc = out_folder_missing(a.out);
    if (!rc && strcmp(a.cmd, "import") != 0)
        rc = load_rates(&rates);
    if (rc) {
        free(freeze);
        return rc;
    }
    Ctx c;
    ctx_init(&c);
    c.progress = isatty(STDERR_FILENO);
    rc = cmd->run(&c, &a);
    progress_clear(&c);
    if (rc == 1)
        fprintf(stderr, "%s\n", c.err);
    ctx_free(&c);
    free(freeze);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {     /* the synopsis, not a page of help: exit 2 */
        fputs("usage: remat COMMAND GRAPH [options]\n"
              "try 'remat --help'\n", stderr);
        return 2;
    }
    const char *first = argv[1];
    if (is_help(first)) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(first, "--version") == 0) {
        printf("remat %s\n", REMAT_VERSION);
        return 0;
    }
    if (strcmp(first, "help") == 0)
        return help(argc, argv);
    const Command *cmd = command_named(first);
    if (!cmd)
        return unknown(first[0] == '-' ? "option" : "command", first);
    return cmd->run ? run_command(cmd, argc, argv) : cmd->alone(argc, argv);
}
