/*
 * build.c: a trainer executable from a compiled model.
 *
 * Writes NAME.c, NAME.h and a two-line shim that points the generic trainer
 * main (runtime/trainer.c) at NAME_model into a fresh temporary folder, then
 * runs the C compiler ($CC, else cc) on them with the runtime, linking
 * OpenBLAS unless asked not to. The executable is linked to a temporary name
 * beside the target and renamed over it only when the compiler succeeded.
 *
 * The runtime is found from the compiler's own location (build/remat ->
 * runtime/), so `remat build` works from any working directory;
 * REMAT_RUNTIME_DIR overrides it.
 */
#define _DEFAULT_SOURCE
#include "remat.h"

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

/* $CC split on spaces ("ccache gcc" works), then the rest. */
static int compile_trainer(Ctx *c, const char *dir, const char *rt,
                           const char *name, int no_blas, const char *out)
{
    const char *cc = getenv("CC");
    char *words = ctx_strdup(c, cc && *cc ? cc : "cc");
    char *argv[64];
    int n = 0;
    for (char *w = strtok(words, " "); w && n < 32; w = strtok(NULL, " "))
        argv[n++] = w;
    const char *rest[] = {
        "-std=c99", "-O3", "-march=native",
        no_blas ? "-DRT_NO_BLAS" : "-DRT_BLAS",
        ctx_printf(c, "-I%s", dir), ctx_printf(c, "-I%s", rt),
        ctx_printf(c, "%s/%s.c", dir, name), ctx_printf(c, "%s/main.c", dir),
        ctx_printf(c, "%s/remat_rt.c", rt), ctx_printf(c, "%s/trainer.c", rt),
        "-o", out, no_blas ? "-lm" : "-lopenblas", "-lm", NULL};
    for (int i = 0; rest[i]; i++)
        argv[n++] = (char *)rest[i];
    argv[n] = NULL;
    int rc = run(argv);
    if (rc != 0)
        return ctx_error(c, out, 0, "the C compiler (%s) failed with status "
                         "%d building the trainer", argv[0], rc);
    return 0;
}

static void remove_dir(Ctx *c, const char *dir, const char *name)
{
    remove(ctx_printf(c, "%s/%s.c", dir, name));
    remove(ctx_printf(c, "%s/%s.h", dir, name));
    remove(ctx_printf(c, "%s/main.c", dir));
    rmdir(dir);
}

int build_trainer(Ctx *c, const Compiled *m, const char *exe, int no_blas)
{
    const char *rt = runtime_dir(c);
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
    int rc = emit_c(c, m, ctx_printf(c, "%s.h", name), &cf, &hf);
    rc = rc || buf_write_file(&cf, ctx_printf(c, "%s/%s.c", dir, name)) ||
         buf_write_file(&hf, ctx_printf(c, "%s/%s.h", dir, name)) ||
         buf_write_file(&shim, ctx_printf(c, "%s/main.c", dir)) ||
         compile_trainer(c, dir, rt, name, no_blas, tmp_exe);
    if (!rc && rename(tmp_exe, exe) != 0)
        rc = ctx_error(c, exe, 0, "cannot write: %s", strerror(errno));
    if (rc)
        remove(tmp_exe);
    remove_dir(c, dir, name);
    return rc ? -1 : 0;
}
