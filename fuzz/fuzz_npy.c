/*
 * fuzz_npy.c: a libFuzzer target for the .npy reader the compiler runs on
 * init="file" paths (rt_npy_read, from the runtime built for the host).
 *
 * The input is the file. The reader takes a path, so the input is written
 * to an in-memory file (memfd) and read back through /proc/self/fd. The
 * shape the reader expects comes from the input's size: rank size % 4 with
 * dimensions 2, 3, 4, so that a matching header is one libFuzzer can find.
 * A successful read must fill exactly that many floats (the buffer has no
 * slack: AddressSanitizer catches a write past it); a failed one must say
 * why. (The reason may quote the header, newlines and all: the compiler's
 * ctx_error escapes them, and the trainer prints it as it is.)
 */
#define _GNU_SOURCE
#include "../runtime/remat_rt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];

static void open_memfd(void)
{
    fd = memfd_create("fuzz.npy", 0);
    if (fd < 0)
        abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int dims[3] = {2, 3, 4};
    if (fd < 0)
        open_memfd();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    int rank = (int)(size % 4);
    size_t count = 1;
    for (int d = 0; d < rank; d++)
        count *= (size_t)dims[d];
    float *values = malloc(count * sizeof *values);
    char why[256] = "";
    int rc = rt_npy_read(path, values, rank, dims, why, sizeof why);
    if (rc != 0 && why[0] == '\0')
        abort();
    free(values);
    return 0;
}
