/*
 * build.c: a trainer executable from a compiled model.
 *
 * Writes NAME.c, NAME.h and a two-line shim that points the generic trainer
 * main (runtime/trainer.c) at NAME_model into a fresh temporary folder, then
 * runs the C compiler ($CC, else cc) on them, linking the runtime and the
 * trainer main and OpenBLAS unless asked not to. The caller's --cflags come
 * after the built-in flags; -march=native only when building for this
 * machine (cc_flags says when that is). The executable is linked to
 * a temporary name beside the target and renamed over it only when the
 * compiler succeeded.
 *
 * The runtime and the trainer main are the same for every model, and most
 * of a build's time: they are compiled once into a cache and reused. An
 * object's name is a hash of everything that goes into it: the C compiler
 * command ($CC's words, and the size and time of the executable they name,
 * so that an upgraded compiler misses), the flags, and the bytes of every
 * file in runtime_files below (the single-file runtime and its header, the
 * trainer's files; with --mpi, trainer_mpi.c and trainer_mpi.h). An object
 * is compiled to a temporary
 * name in the cache and renamed into place, so concurrent builds never see
 * half a file; two that miss together both compile and the last rename wins
 * with identical contents. The cache is $REMAT_CACHE_DIR, else
 * $XDG_CACHE_HOME/remat, else ~/.cache/remat; when none can be made, the
 * runtime is compiled into the temporary folder as part of each build.
 * Nothing removes old objects: delete the folder to reclaim the space.
 *
 * --mpi builds the data-parallel trainer: the same objects compiled with
 * -DRT_MPI, plus runtime/trainer_mpi.c, all by mpicc ($CC when set), which
 * knows where its MPI lives.
 *
 * The runtime is the single-file one that firmware copies, dist/remat_rt.c
 * and dist/remat_rt.h (scripts/amalgamate.sh makes them from runtime/'s
 * kernel families), so that the trainer runs exactly that code; the
 * trainer's own files and npy.c, host-only, come from runtime/. Both are
 * found from the compiler's own location (build/remat -> runtime/ and
 * dist/; an installed bin/remat -> share/remat/runtime/, the flat copy
 * `make install` writes), so `remat build` works from any working
 * directory and from a DESTDIR-staged or moved installation. Last comes
 * REMAT_SOURCE_DIR/runtime, which the Makefile sets to the source tree
 * for build/remat and to the installed share/remat for the installed one,
 * which so never reads the source tree. REMAT_RUNTIME_DIR names the
 * runtime/ folder instead: its ../dist holds the single file, unless the
 * folder has a remat_rt.c of its own (a flat copy of every file the build
 * compiles, as an installed runtime is).
 */
#define _DEFAULT_SOURCE
#include "../remat.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef REMAT_SOURCE_DIR
#define REMAT_SOURCE_DIR "."
#endif

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *runtime_dir(Ctx *c)
{
    const char *env = getenv("REMAT_RUNTIME_DIR");
    if (env && *env)
        return env;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            const char *d = ctx_printf(c, "%s/../runtime", self);
            if (is_file(ctx_printf(c, "%s/remat_rt.h", d)))
                return d;
            d = ctx_printf(c, "%s/../share/remat/runtime", self);
            if (is_file(ctx_printf(c, "%s/remat_rt.h", d)))
                return d;
        }
    }
    return REMAT_SOURCE_DIR "/runtime";
}

/* Runs argv, waiting; returns its exit status, or -1 if it could not run. */
static int run(char *const *argv)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "remat: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* $CC split on spaces ("ccache gcc" works) into argv[0..n). */
static int cc_words(Ctx *c, char **argv, int mpi)
{
    const char *cc = getenv("CC");
    char *words = ctx_strdup(c, cc && *cc ? cc : mpi ? "mpicc" : "cc");
    int n = 0;
    for (char *w = strtok(words, " "); w && n < 32; w = strtok(NULL, " "))
        argv[n++] = w;
    return n;
}

/* The flags of every compilation of a build, NULL-terminated: C99, -O3,
 * floating-point contraction off (clang's default would fuse a * b + c into
 * an FMA, whose bits differ from the two roundings: the results would then
 * differ between machines and from firmware) unless --fma asks for it, the
 * GEMM switch, -march=native when the build is for this machine, then the
 * caller's --cflags words (last, so that they override: -O2 after -O3). A
 * build is for this machine unless $CC is set or --cflags names a target
 * (-march=, -mcpu= or --target=): a cross compiler rejects -march=native or,
 * worse, tunes for the build machine. */
static const char *const *cc_flags(Ctx *c, const BuildOptions *o)
{
    const char *cc = getenv("CC");
    int host = !(cc && *cc);
    const char **flags = ctx_alloc(c, 72 * sizeof *flags);
    int n = 0;
    char *words = ctx_strdup(c, o->cflags ? o->cflags : "");
    char *extra[64];
    int ne = 0;
    for (char *w = strtok(words, " \t"); w && ne < 64; w = strtok(NULL, " \t")) {
        extra[ne++] = w;
        if (strncmp(w, "-march=", 7) == 0 || strncmp(w, "-mcpu=", 6) == 0 ||
            strncmp(w, "--target=", 9) == 0)
            host = 0;
    }
    flags[n++] = "-std=c99";
    flags[n++] = "-O3";
    flags[n++] = o->fma ? "-ffp-contract=fast" : "-ffp-contract=off";
    if (host)
        flags[n++] = "-march=native";
    flags[n++] = o->no_blas ? "-DRT_NO_BLAS" : "-DRT_BLAS";
    if (o->mpi)
        flags[n++] = "-DRT_MPI";
    for (int i = 0; i < ne; i++)
        flags[n++] = extra[i];
    flags[n] = NULL;
    return flags;
}

/* Runs words[0..nw) followed by the NULL-terminated rest; -1 with ctx error
 * naming what was being built when the compiler fails. */
static int run_cc(Ctx *c, char **words, int nw, const char *const *rest,
                  const char *out, const char *what)
{
    char *argv[160];
    int n = 0;
    for (int i = 0; i < nw; i++)
        argv[n++] = words[i];
    for (int i = 0; rest[i] && n < 159; i++)
        argv[n++] = (char *)rest[i];
    argv[n] = NULL;
    int rc = run(argv);
    if (rc != 0)
        return ctx_error(c, out, 0, "the C compiler (%s) failed with status "
                         "%d building %s", argv[0], rc, what);
    return 0;
}

/* ---- the runtime cache -------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211u;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s, strlen(s) + 1);   /* the NUL separates fields */
}

/* The file's bytes into the hash; -1 when it cannot be read. */
static int fnv_file(uint64_t *h, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        *h = fnv(*h, buf, n);
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : 0;
}

/* What identifies the compiler an argv[0] names: the size and time of the
 * executable PATH finds for it ("" when none is found). */
static const char *cc_identity(Ctx *c, const char *cmd)
{
    struct stat st;
    const char *path = getenv("PATH");
    if (strchr(cmd, '/'))
        return stat(cmd, &st) == 0 ? ctx_printf(c, "%lld:%lld",
                                                (long long)st.st_size,
                                                (long long)st.st_mtime) : "";
    char *dirs = ctx_strdup(c, path ? path : "/usr/bin:/bin");
    for (char *d = strtok(dirs, ":"); d; d = strtok(NULL, ":"))
        if (stat(ctx_printf(c, "%s/%s", d, cmd), &st) == 0 &&
            S_ISREG(st.st_mode))
            return ctx_printf(c, "%lld:%lld", (long long)st.st_size,
                              (long long)st.st_mtime);
    return "";
}

/* mkdir -p; 0 when dir is a folder at the end. */
static int make_dirs(Ctx *c, const char *dir)
{
    char *p = ctx_strdup(c, dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0777);
            *s = '/';
        }
    mkdir(p, 0777);
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* The cache folder, made if missing, or NULL when none can be. */
static const char *cache_dir(Ctx *c)
{
    const char *env = getenv("REMAT_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    const char *dir = env && *env ? env
                      : xdg && *xdg ? ctx_printf(c, "%s/remat", xdg)
                      : home && *home ? ctx_printf(c, "%s/.cache/remat", home)
                                      : NULL;
    return dir && make_dirs(c, dir) == 0 ? dir : NULL;
}

/* Every file a build reads besides the model: `single` ones from the
 * single-file runtime's folder, the others from runtime/; the .c files are
 * compiled, one object each; `mpi` ones only in --mpi builds, which alone
 * compile them. The hash covers them all. */
static const struct {
    const char *name;
    int single, mpi;
} runtime_files[] = {
    {"remat_rt.c", 1, 0},
    {"remat_rt.h", 1, 0},
    {"remat_rt.h", 0, 0},   /* what the trainer's files include */
    {"npy.c", 0, 0},
    {"trainer.c", 0, 0},
    {"trainer_args.c", 0, 0},
    {"trainer_io.c", 0, 0},
    {"trainer_impl.h", 0, 0},
    {"trainer_mpi.c", 0, 1},
    {"trainer_mpi.h", 0, 1},
};
#define N_RUNTIME_FILES (sizeof runtime_files / sizeof runtime_files[0])

/* The folder of the single-file runtime: rt itself when it holds
 * remat_rt.c (a flat copy), else ../dist beside it (the source tree). */
static const char *single_dir(Ctx *c, const char *rt)
{
    if (is_file(ctx_printf(c, "%s/remat_rt.c", rt)))
        return rt;
    return ctx_printf(c, "%s/../dist", rt);
}

/* runtime_files[i]'s path. */
static const char *runtime_path(Ctx *c, const char *rt, size_t i)
{
    return ctx_printf(c, "%s/%s", runtime_files[i].single ? single_dir(c, rt)
                                                         : rt,
                      runtime_files[i].name);
}

/* Whether runtime_files[i] is compiled into an object in this build. */
static int compiled(size_t i, const BuildOptions *o)
{
    const char *name = runtime_files[i].name;
    return (o->mpi || !runtime_files[i].mpi) &&
           strcmp(name + strlen(name) - 2, ".c") == 0;
}

/* The runtime's object files for this compiler and these flags, from the
 * cache or compiled into it (or into the build folder `dir` when there is
 * no cache); obj[i] is runtime_files[i]'s object, NULL for the files that
 * are not compiled. */
static int runtime_objects(Ctx *c, const char *rt, const char *dir,
                           char **words, int nw, const BuildOptions *o,
                           const char **obj)
{
    const char *const *flags = cc_flags(c, o);
    uint64_t h = fnv_str(14695981039346656037u, "remat runtime objects 2");
    for (int i = 0; i < nw; i++)
        h = fnv_str(h, words[i]);
    h = fnv_str(h, cc_identity(c, words[0]));
    for (int i = 0; flags[i]; i++)
        h = fnv_str(h, flags[i]);
    for (size_t i = 0; i < N_RUNTIME_FILES; i++) {
        const char *path = runtime_path(c, rt, i);
        if (runtime_files[i].mpi && !o->mpi)
            continue;
        h = fnv_str(h, runtime_files[i].name);
        if (fnv_file(&h, path))
            return ctx_error(c, path, 0, "cannot read the runtime: %s",
                             strerror(errno));
    }
    const char *cache = cache_dir(c);
    for (size_t i = 0; i < N_RUNTIME_FILES; i++) {
        const char *src = runtime_files[i].name;
        obj[i] = NULL;
        if (!compiled(i, o))
            continue;
        const char *base = ctx_printf(c, "%.*s", (int)strlen(src) - 2, src);
        obj[i] = cache ? ctx_printf(c, "%s/%s-%016llx.o", cache, base,
                                    (unsigned long long)h)
                       : ctx_printf(c, "%s/%s.o", dir, base);
        if (cache && is_file(obj[i]))
            continue;
        progress(c, "remat build: compiling the runtime's %s (%s)", src,
                 cache ? "cached for later builds" : "no cache folder");
        const char *tmp = ctx_printf(c, "%s.tmp.%ld", obj[i], (long)getpid());
        const char *path = runtime_path(c, rt, i);
        const char *rest[80];
        int n = 0;
        for (int k = 0; flags[k]; k++)
            rest[n++] = flags[k];
        rest[n++] = ctx_printf(c, "-I%.*s", (int)(strrchr(path, '/') - path),
                               path);
        rest[n++] = "-c";
        rest[n++] = path;
        rest[n++] = "-o";
        rest[n++] = tmp;
        rest[n] = NULL;
        int rc = run_cc(c, words, nw, rest, obj[i],
                        ctx_printf(c, "the runtime's %s", src));
        if (!rc && rename(tmp, obj[i]) != 0)
            rc = ctx_error(c, obj[i], 0, "cannot write: %s", strerror(errno));
        if (rc) {
            remove(tmp);
            return -1;
        }
    }
    return 0;
}

/* The model and its shim, linked with the runtime's objects; the model
 * includes the single-file runtime's header, as it does in firmware. */
static int compile_trainer(Ctx *c, const char *dir, const char *rt,
                           const char *name, const BuildOptions *o,
                           const char *out)
{
    char *words[40];
    int nw = cc_words(c, words, o->mpi);
    const char *obj[N_RUNTIME_FILES];
    if (runtime_objects(c, rt, dir, words, nw, o, obj))
        return -1;
    const char *const *flags = cc_flags(c, o);
    progress(c, "remat build: compiling %s.c and linking the trainer", name);
    const char *rest[96];
    int n = 0;
    for (int k = 0; flags[k]; k++)
        rest[n++] = flags[k];
    rest[n++] = ctx_printf(c, "-I%s", dir);
    rest[n++] = ctx_printf(c, "-I%s", single_dir(c, rt));
    rest[n++] = ctx_printf(c, "%s/%s.c", dir, name);
    rest[n++] = ctx_printf(c, "%s/main.c", dir);
    for (size_t i = 0; i < N_RUNTIME_FILES; i++)
        if (obj[i])
            rest[n++] = obj[i];
    rest[n++] = "-o";
    rest[n++] = out;
    rest[n++] = o->no_blas ? "-lm" : "-lopenblas";
    rest[n++] = "-pthread";
    rest[n++] = "-lm";
    rest[n] = NULL;
    return run_cc(c, words, nw, rest, out, "the trainer");
}

static void remove_dir(Ctx *c, const char *dir, const char *name)
{
    remove(ctx_printf(c, "%s/%s.c", dir, name));
    remove(ctx_printf(c, "%s/%s.h", dir, name));
    remove(ctx_printf(c, "%s/main.c", dir));
    for (size_t i = 0; i < N_RUNTIME_FILES; i++) {  /* when there is no cache */
        const char *src = runtime_files[i].name;
        remove(ctx_printf(c, "%s/%.*s.o", dir, (int)strlen(src) - 2, src));
    }
    rmdir(dir);
}

/* --mpi's compiler, when PATH has no such command: NULL when it has. */
static const char *missing_mpicc(Ctx *c)
{
    char *words[40];
    cc_words(c, words, 1);
    return !strchr(words[0], '/') && !*cc_identity(c, words[0]) ? words[0]
                                                                 : NULL;
}

int build_trainer(Ctx *c, const Compiled *m, const char *exe,
                  const BuildOptions *o)
{
    const char *rt = runtime_dir(c);
    const char *mpicc = o->mpi ? missing_mpicc(c) : NULL;
    if (mpicc)
        return ctx_error(c, exe, 0, "--mpi needs the MPI compiler wrapper "
                         "%s, which is not on PATH (Debian: apt-get install "
                         "mpich libmpich-dev, or scripts/deps.sh)", mpicc);
    if (!is_file(ctx_printf(c, "%s/trainer.c", rt)))
        return ctx_error(c, rt, 0, "runtime not found (no trainer.c there); "
                         "set REMAT_RUNTIME_DIR to the runtime/ folder");
    const char *tmpl = getenv("TMPDIR");
    char *dir = ctx_printf(c, "%s/remat-build-XXXXXX",
                           tmpl && *tmpl ? tmpl : "/tmp");
    if (!mkdtemp(dir))
        return ctx_error(c, dir, 0, "cannot make a build folder: %s",
                         strerror(errno));
    const char *name = m->g->name;
    Buf cf, hf, shim;
    buf_init(&cf, c);
    buf_init(&hf, c);
    buf_init(&shim, c);
    buf_printf(&shim, "#include \"%s.h\"\n", name);
    buf_printf(&shim, "const rt_model *const rt_trainer_model = &%s_model;\n",
               name);
    const char *tmp_exe = ctx_printf(c, "%s.tmp.%ld", exe, (long)getpid());
    Buf wf;
    int rc = emit_c(c, m, ctx_printf(c, "%s.h", name), &cf, &hf, &wf);
    /* the trainer reads EXE.weights when the values are not in its code */
    rc = rc || (wf.len && buf_write_file(&wf, ctx_printf(c, "%s.weights", exe)));
    rc = rc || buf_write_file(&cf, ctx_printf(c, "%s/%s.c", dir, name)) ||
         buf_write_file(&hf, ctx_printf(c, "%s/%s.h", dir, name)) ||
         buf_write_file(&shim, ctx_printf(c, "%s/main.c", dir)) ||
         compile_trainer(c, dir, rt, name, o, tmp_exe);
    if (!rc && rename(tmp_exe, exe) != 0)
        rc = ctx_error(c, exe, 0, "cannot write: %s", strerror(errno));
    if (rc)
        remove(tmp_exe);
    remove_dir(c, dir, name);
    return rc ? -1 : 0;
}
