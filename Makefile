# remat: `make` builds the compiler; `make demo` and `make test` are the
# README's two commands and install what is missing first (scripts/deps.sh).
CC = cc
XML_CFLAGS = $(shell pkg-config --cflags libxml-2.0)
XML_LIBS = $(shell pkg-config --libs libxml-2.0)
CHECK_LIBS = $(shell pkg-config --libs check)
# The ONNX front end reads ModelProto with protobuf-c, on the schema that
# Debian's libonnx-dev installs, turned into C at build time.
ONNX_PROTO = /usr/include/onnx/onnx.proto
PB_LIBS = -lprotobuf-c
WARN = -Wall -Wextra -pedantic -Wswitch-enum -Werror
CFLAGS = -std=c11 -O2 -g $(WARN) $(XML_CFLAGS) -Ibuild/gen -DREMAT_SOURCE_DIR='"$(CURDIR)"'
RT_CFLAGS = -std=c99 -O2 -g $(WARN) -Wcast-align=strict
# build/asan/remat: the compiler under AddressSanitizer and UBSan, for the tests.
SAN = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_CFLAGS = $(SAN) -O1 $(filter-out -O2,$(CFLAGS))

# compiler/: the command line, the driver and util at the top, the stages in
# one folder per family (docs/layout.md); objects mirror the folders.
SRCS = $(wildcard compiler/*.c compiler/*/*.c)
HDRS = compiler/remat.h $(wildcard compiler/*/*.h) runtime/remat_rt.h build/gen/onnx.pb-c.h
OBJS = $(SRCS:compiler/%.c=build/obj/%.o) build/rt_host/libremat_rt.a build/obj/onnx.pb-c.o
LIB_OBJS = $(filter-out build/obj/main.o,$(OBJS))
SAN_OBJS = $(OBJS:build/%=build/asan/%)
UNIT_TESTS = $(patsubst tests/unit/%.c,build/%,$(wildcard tests/unit/test_*.c))
# The runtime's tests (test_kernels*.c) run again on the portable GEMM loops.
RT_TESTS = $(patsubst tests/unit/%.c,build/%,$(wildcard tests/unit/test_kernels*.c))
NOBLAS_TESTS = $(RT_TESTS:%=%_noblas)
# The runtime: one file per kernel family plus npy.c (the trainer's and the
# compiler's .npy I/O), not the trainer's own files.
RT_SRCS = $(filter-out runtime/trainer%,$(wildcard runtime/*.c))
RT_HDRS = runtime/remat_rt.h runtime/rt_impl.h
rt_objs = $(RT_SRCS:runtime/%.c=$(1)/%.o)
GRAPHS = $(wildcard graphs/*.xml)
GEN_POLICIES = none full sac sac-aggressive

all: build/remat

build/gen/onnx.pb-c.c build/gen/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p build/gen
	protoc-c --proto_path=$(dir $(ONNX_PROTO)) --c_out=build/gen $(ONNX_PROTO)

# protoc-c's output is not ours to hold to -Werror -pedantic.
PB_CFLAGS = -std=c11 -O2 -g -Ibuild/gen
build/obj/onnx.pb-c.o: build/gen/onnx.pb-c.c
	@mkdir -p build/obj
	$(CC) $(PB_CFLAGS) -c $< -o $@

build/obj/%.o: compiler/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# The runtime, built once per flavour into an archive, from which each link
# takes the families it calls: build/rt (OpenBLAS) and build/rt_noblas for
# the kernel tests; build/rt_host for the compiler, which reads init="file"
# .npy files with it, times a few kernels (cost.c) and sizes conv and
# attention scratch (no BLAS, no thread pool).
build/rt/%.o: runtime/%.c $(RT_HDRS)
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -c $< -o $@
build/rt_noblas/%.o: runtime/%.c $(RT_HDRS)
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -DRT_NO_BLAS -c $< -o $@
build/rt_host/%.o: runtime/%.c $(RT_HDRS)
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -DRT_NO_BLAS -DRT_NO_THREADS -c $< -o $@
build/rt/libremat_rt.a: $(call rt_objs,build/rt)
	rm -f $@ && $(AR) rcs $@ $^
build/rt_noblas/libremat_rt.a: $(call rt_objs,build/rt_noblas)
	rm -f $@ && $(AR) rcs $@ $^
build/rt_host/libremat_rt.a: $(call rt_objs,build/rt_host)
	rm -f $@ && $(AR) rcs $@ $^

build/remat: $(OBJS)
	$(CC) $(OBJS) $(XML_LIBS) $(PB_LIBS) -lm -o $@

build/asan/obj/%.o: compiler/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(SAN_CFLAGS) -c $< -o $@
build/asan/obj/onnx.pb-c.o: build/gen/onnx.pb-c.c
	@mkdir -p build/asan/obj
	$(CC) $(SAN) -O1 -g -std=c11 -Ibuild/gen -c $< -o $@
build/asan/rt_host/%.o: runtime/%.c $(RT_HDRS)
	@mkdir -p $(@D)
	$(CC) $(SAN) -O1 $(filter-out -O2,$(RT_CFLAGS)) -DRT_NO_BLAS -DRT_NO_THREADS -c $< -o $@
build/asan/rt_host/libremat_rt.a: $(call rt_objs,build/asan/rt_host)
	rm -f $@ && $(AR) rcs $@ $^
build/asan/remat: $(SAN_OBJS)
	$(CC) $(SAN) $(SAN_OBJS) $(XML_LIBS) $(PB_LIBS) -lm -o $@

# Unit tests: test_kernels*.c link the runtime alone, the others the compiler.
build/test_kernel%_noblas: tests/unit/test_kernel%.c tests/unit/rt_testutil.h runtime/remat_rt.h build/rt_noblas/libremat_rt.a
	$(CC) $(RT_CFLAGS) -DRT_NO_BLAS -Iruntime $< build/rt_noblas/libremat_rt.a $(CHECK_LIBS) -pthread -lm -o $@
build/test_kernel%: tests/unit/test_kernel%.c tests/unit/rt_testutil.h runtime/remat_rt.h build/rt/libremat_rt.a
	$(CC) $(RT_CFLAGS) -Iruntime $< build/rt/libremat_rt.a $(CHECK_LIBS) -lopenblas -pthread -lm -o $@
build/test_%: tests/unit/test_%.c tests/unit/testutil.h $(LIB_OBJS)
	$(CC) $(CFLAGS) -Icompiler $< $(LIB_OBJS) $(XML_LIBS) $(PB_LIBS) $(CHECK_LIBS) -lm -o $@

deps:
	@scripts/deps.sh

# Fuzzing (make fuzz): libFuzzer targets in fuzz/ over the compiler and the
# runtime's .npy reader (the compiler runs it on init="file" paths), built
# with clang under ASan and UBSan; UB aborts rather than printing and going
# on, so that the fuzzer stops on it.
FUZZ_SECONDS = 300
FUZZ_CC = clang
FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=all
# clang warns where gcc does not (a table row that leaves its last fields to
# zero): the gcc build's -Werror guards the warnings, not the fuzz build.
FUZZ_WARN = $(filter-out -Werror,$(WARN))
FUZZ_CFLAGS = -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(FUZZ_WARN)
FUZZ_OBJS = $(filter-out build/fuzz/main.o,$(SRCS:compiler/%.c=build/fuzz/%.o)) \
	build/fuzz/rt_host/libremat_rt.a build/fuzz/onnx.pb-c.o

build/fuzz/onnx.pb-c.o: build/gen/onnx.pb-c.c
	@mkdir -p build/fuzz
	$(FUZZ_CC) -std=c11 -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link -Ibuild/gen -c $< -o $@
build/fuzz/%.o: compiler/%.c $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -std=c11 $(FUZZ_CFLAGS) $(XML_CFLAGS) -Ibuild/gen -DREMAT_SOURCE_DIR='"$(CURDIR)"' -c $< -o $@
build/fuzz/rt_host/%.o: runtime/%.c $(RT_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -std=c99 $(FUZZ_CFLAGS) -DRT_NO_BLAS -DRT_NO_THREADS -c $< -o $@
build/fuzz/rt_host/libremat_rt.a: $(call rt_objs,build/fuzz/rt_host)
	rm -f $@ && $(AR) rcs $@ $^
.SECONDARY: $(FUZZ_OBJS)
build/fuzz_%: fuzz/fuzz_%.c compiler/remat.h $(FUZZ_OBJS)
	$(FUZZ_CC) -std=c11 -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer $(FUZZ_WARN) -Icompiler $< $(FUZZ_OBJS) $(XML_LIBS) $(PB_LIBS) -lm -o $@
build/fuzz_npy: fuzz/fuzz_npy.c build/fuzz/rt_host/npy.o
	$(FUZZ_CC) -std=c11 -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer $(FUZZ_WARN) $< build/fuzz/rt_host/npy.o -lm -o $@

# generated/: the shipped graphs under the policies a reader compares, at
# the built-in cost rates whatever this machine's calibration.
generated: build/remat
	@for g in $(GRAPHS); do for p in $(GEN_POLICIES); do \
	  n=$$(basename $$g .xml); \
	  echo "remat compile $$g --policy $$p -o generated/$${n}_$$p.c"; \
	  REMAT_RATES=builtin build/remat compile $$g --policy $$p -o generated/$${n}_$$p.c || exit 1; \
	done; done

unit: $(UNIT_TESTS) $(NOBLAS_TESTS)
	@for t in $(UNIT_TESTS) $(NOBLAS_TESTS); do $$t || exit 1; done

# make test builds the unit tests (make unit also runs them) and leaves
# running every test to scripts/test.sh, TEST_JOBS at a time.
TEST_JOBS = $(shell nproc 2>/dev/null || echo 1)
test: deps
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) all build/asan/remat $(UNIT_TESTS) $(NOBLAS_TESTS)
	@TEST_JOBS=$(TEST_JOBS) scripts/test.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

# Runs each target for a bounded time; fails on any crash, leak, UB report,
# timeout or out-of-memory (scripts/fuzz.sh says where the input went).
fuzz: deps
	@$(MAKE) --no-print-directory build/fuzz_compile build/fuzz_policy build/fuzz_npy build/fuzz_onnx
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

# The portable GEMM: against OpenBLAS on this machine (one thread), and its
# instructions per multiply-add on a Cortex-M4 under qemu (docs/firmware.md).
build/gemm_blas: bench/gemm_blas.c dist/remat_rt.c dist/remat_rt.h
	@mkdir -p build
	$(CC) -std=c99 -O3 -march=native $(WARN) -DRT_NO_BLAS -Idist bench/gemm_blas.c dist/remat_rt.c -lopenblas -lm -o $@
M4_FLAGS = -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16
build/gemm_m4.elf: bench/gemm_m4.c dist/remat_rt.c dist/remat_rt.h examples/cortex-m/startup.c examples/cortex-m/mps2-an386.ld
	@mkdir -p build
	arm-none-eabi-gcc -std=c99 -O2 -ffp-contract=off $(WARN) $(M4_FLAGS) -DRT_NO_BLAS -DRT_NO_STDIO -Idist -Iexamples/cortex-m \
	  bench/gemm_m4.c examples/cortex-m/startup.c dist/remat_rt.c -ffunction-sections -fdata-sections \
	  -nostartfiles -T examples/cortex-m/mps2-an386.ld --specs=nosys.specs -Wl,--gc-sections -lm -o $@
bench-gemm: deps build/gemm_blas build/gemm_m4.elf
	@OPENBLAS_NUM_THREADS=1 build/gemm_blas
	@qemu-system-arm -M mps2-an386 -nographic -semihosting -icount shift=0 -kernel build/gemm_m4.elf 2>&1

# Not part of `make test`: timings belong in a report, not in a pass/fail.
bench: deps
	@$(MAKE) --no-print-directory all bench-gemm
	@/usr/bin/python3 bench/run.py

# ---- make install and make uninstall (docs/install.md) ----------------------
# GNU layout under PREFIX, staged under DESTDIR: bin/remat; lib/ the runtime
# as static and shared libraries (soname libremat_rt.so.SOVERSION), with
# OpenBLAS and without (libremat_rt_noblas), and a pkg-config file for each;
# include/remat/remat_rt.h; share/remat/ the single-file runtime to copy
# and runtime/, the flat copy `remat build` compiles; man1/remat.1 from the
# commands' help (help2man); the docs under share/doc/remat; bash
# completion (install/remat.bash) where bash-completion finds it; the
# CMake package (lib/cmake/remat: find_package, remat_add_model); the Python
# module (python/remat, in pythondir). The installed
# remat is linked apart (build/install/remat): its fallback runtime path is
# the installed share/remat, never this source tree.
PREFIX = /usr/local
bindir = $(PREFIX)/bin
libdir = $(PREFIX)/lib
includedir = $(PREFIX)/include
datadir = $(PREFIX)/share
mandir = $(datadir)/man
docdir = $(datadir)/doc/remat
completionsdir = $(datadir)/bash-completion/completions
cmakedir = $(libdir)/cmake/remat
# the Python module where Debian's python3 looks: /usr/lib/python3/dist-packages
# for PREFIX=/usr, PREFIX/lib/python3.X/dist-packages otherwise
PY_VERSION = $(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
pythondir = $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(PY_VERSION)/dist-packages)
PY_FILES = $(wildcard python/remat/*.py)
VERSION = $(shell sed -n 's/^\#define REMAT_VERSION "\(.*\)"$$/\1/p' compiler/remat.h)
SOVERSION = 0
RT_LIBS = libremat_rt libremat_rt_noblas
RT_FLAT = dist/remat_rt.c dist/remat_rt.h runtime/npy.c runtime/trainer.c \
	runtime/trainer_args.c runtime/trainer_io.c runtime/trainer_impl.h \
	runtime/trainer_mpi.c runtime/trainer_mpi.h

build/install/back/build.o: compiler/back/build.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(filter-out -DREMAT_SOURCE_DIR=%,$(CFLAGS)) -DREMAT_SOURCE_DIR='"$(datadir)/remat"' -c $< -o $@
# PREFIX is in the binary and the .pc files: remade when it changes
build/install/prefix: FORCE
	@mkdir -p $(@D)
	@echo '$(PREFIX) $(libdir) $(includedir) $(datadir)' | cmp -s - $@ || \
	    echo '$(PREFIX) $(libdir) $(includedir) $(datadir)' > $@
build/install/back/build.o: build/install/prefix
build/install/remat: $(filter-out build/obj/back/build.o,$(OBJS)) build/install/back/build.o
	$(CC) $^ $(XML_LIBS) $(PB_LIBS) -lm -o $@

# the runtime libraries: the single file and npy.c, position independent
build/lib/blas/remat_rt.o: dist/remat_rt.c dist/remat_rt.h
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -fPIC -c $< -o $@
build/lib/noblas/remat_rt.o: dist/remat_rt.c dist/remat_rt.h
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -fPIC -DRT_NO_BLAS -c $< -o $@
build/lib/blas/npy.o build/lib/noblas/npy.o: runtime/npy.c runtime/remat_rt.h
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -fPIC -c $< -o $@
build/lib/libremat_rt.a: build/lib/blas/remat_rt.o build/lib/blas/npy.o
	rm -f $@ && $(AR) rcs $@ $^
build/lib/libremat_rt_noblas.a: build/lib/noblas/remat_rt.o build/lib/noblas/npy.o
	rm -f $@ && $(AR) rcs $@ $^
build/lib/libremat_rt.so.$(SOVERSION): build/lib/blas/remat_rt.o build/lib/blas/npy.o
	$(CC) -shared -Wl,-soname,libremat_rt.so.$(SOVERSION) $^ -lopenblas -lpthread -lm -o $@
build/lib/libremat_rt_noblas.so.$(SOVERSION): build/lib/noblas/remat_rt.o build/lib/noblas/npy.o
	$(CC) -shared -Wl,-soname,libremat_rt_noblas.so.$(SOVERSION) $^ -lpthread -lm -o $@
build/lib/%.cmake: install/%.cmake.in compiler/remat.h
	@mkdir -p $(@D)
	sed -e 's|@VERSION@|$(VERSION)|' $< > $@
build/lib/%.pc: install/%.pc.in build/install/prefix
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(libdir)|' \
	    -e 's|@INCLUDEDIR@|$(includedir)|' -e 's|@VERSION@|$(VERSION)|' $< > $@
build/remat.1: build/remat
	@command -v help2man >/dev/null || { echo "make install: the man page needs help2man (apt-get install help2man)" >&2; exit 1; }
	help2man --no-info --name='compile a model graph into C training code with rematerialization' \
	    --output=$@ build/remat

INSTALLED = build/install/remat $(RT_LIBS:%=build/lib/%.a) \
	$(RT_LIBS:%=build/lib/%.so.$(SOVERSION)) build/lib/remat-rt.pc \
	build/lib/remat-rt-noblas.pc build/remat.1 build/lib/remat-config.cmake \
	build/lib/remat-config-version.cmake
install: $(INSTALLED)
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(libdir)/pkgconfig \
	    $(DESTDIR)$(includedir)/remat $(DESTDIR)$(datadir)/remat/runtime \
	    $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(docdir)/docs $(DESTDIR)$(completionsdir) \
	    $(DESTDIR)$(cmakedir) $(DESTDIR)$(pythondir)/remat
	install -m 755 build/install/remat $(DESTDIR)$(bindir)/remat
	install -m 644 $(RT_LIBS:%=build/lib/%.a) $(DESTDIR)$(libdir)
	install -m 755 $(RT_LIBS:%=build/lib/%.so.$(SOVERSION)) $(DESTDIR)$(libdir)
	for l in $(RT_LIBS); do ln -sf $$l.so.$(SOVERSION) $(DESTDIR)$(libdir)/$$l.so; done
	install -m 644 build/lib/remat-rt.pc build/lib/remat-rt-noblas.pc $(DESTDIR)$(libdir)/pkgconfig
	install -m 644 dist/remat_rt.h $(DESTDIR)$(includedir)/remat
	install -m 644 dist/remat_rt.c dist/remat_rt.h $(DESTDIR)$(datadir)/remat
	install -m 644 $(RT_FLAT) $(DESTDIR)$(datadir)/remat/runtime
	install -m 644 build/remat.1 $(DESTDIR)$(mandir)/man1
	install -m 644 README.md $(DESTDIR)$(docdir)
	install -m 644 docs/*.md $(DESTDIR)$(docdir)/docs
	install -m 644 install/remat.bash $(DESTDIR)$(completionsdir)/remat
	install -m 644 build/lib/remat-config.cmake build/lib/remat-config-version.cmake \
	    $(DESTDIR)$(cmakedir)
	install -m 644 $(PY_FILES) $(DESTDIR)$(pythondir)/remat

# install, then the program and the shared libraries without symbols and
# debug information (the GNU target of that name)
STRIP = strip
install-strip: install
	$(STRIP) $(DESTDIR)$(bindir)/remat
	$(STRIP) --strip-unneeded $(RT_LIBS:%=$(DESTDIR)$(libdir)/%.so.$(SOVERSION))

# every file install writes, then the folders only remat uses
uninstall:
	rm -f $(DESTDIR)$(bindir)/remat $(DESTDIR)$(mandir)/man1/remat.1
	rm -f $(DESTDIR)$(completionsdir)/remat
	rm -f $(DESTDIR)$(cmakedir)/remat-config.cmake $(DESTDIR)$(cmakedir)/remat-config-version.cmake
	for l in $(RT_LIBS); do rm -f $(DESTDIR)$(libdir)/$$l.a \
	    $(DESTDIR)$(libdir)/$$l.so $(DESTDIR)$(libdir)/$$l.so.$(SOVERSION); done
	rm -f $(DESTDIR)$(libdir)/pkgconfig/remat-rt.pc $(DESTDIR)$(libdir)/pkgconfig/remat-rt-noblas.pc
	rm -f $(DESTDIR)$(includedir)/remat/remat_rt.h
	rm -f $(DESTDIR)$(datadir)/remat/remat_rt.c $(DESTDIR)$(datadir)/remat/remat_rt.h
	rm -f $(addprefix $(DESTDIR)$(datadir)/remat/runtime/,$(notdir $(RT_FLAT)))
	rm -f $(addprefix $(DESTDIR)$(pythondir)/remat/,$(notdir $(PY_FILES)))
	rm -rf $(DESTDIR)$(pythondir)/remat/__pycache__
	rm -f $(DESTDIR)$(docdir)/README.md $(addprefix $(DESTDIR)$(docdir)/,$(wildcard docs/*.md))
	-rmdir $(DESTDIR)$(includedir)/remat $(DESTDIR)$(datadir)/remat/runtime \
	    $(DESTDIR)$(datadir)/remat $(DESTDIR)$(docdir)/docs $(DESTDIR)$(docdir) \
	    $(DESTDIR)$(cmakedir) $(DESTDIR)$(pythondir)/remat 2>/dev/null

# dist/: the single-file runtime that firmware and apps copy, made from
# runtime/'s family files (scripts/amalgamate.sh) and checked in; make test
# fails when it is not what they make.
dist:
	@scripts/amalgamate.sh

clean:
	rm -rf build

.PHONY: all deps generated unit test demo fuzz bench bench-gemm dist clean install install-strip uninstall FORCE
FORCE:
