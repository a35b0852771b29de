#!/usr/bin/env bash
# `make install` and `make uninstall` (docs/install.md), staged under a
# temporary DESTDIR with PREFIX=/usr: every file in its GNU place; the
# shared runtime with its soname; the single file the same as dist/; the
# man page naming every command; no path into this source tree in the
# installed remat (its debug info aside), pkg-config and CMake files,
# Python module or stripped shared libraries; the bash completion of
# commands, flags, values and files. Then, from a folder outside the
# tree, as an application would: the installed remat compiles a model, a
# program (tests/install/train_steps.c) builds against it with `pkg-config
# --cflags --libs remat-rt` (and remat-rt-noblas) and the shared library,
# and trains 5 steps with losses equal, bit for bit, to those of the
# trainer the installed `remat build` makes from its own copy of the
# runtime. Last `make uninstall` leaves no file behind.
# The installed Python module imports, finds the installed remat and runs
# the worked example (examples/python/train_torch.py).
# Then examples/host, a CMake project of find_package(remat) and
# remat_add_model, configures against the staged tree, builds and trains,
# and reruns remat when the model or an option changes (POLICY, BUDGET,
# MAX_ARENA, FREEZE, each taking effect; BUDGET with MAX_ARENA refused),
# and links the runtime compiled in its own build with SOURCE_RUNTIME; and
# examples/cortex-m, cross-compiled with its toolchain file against the
# same tree, trains under qemu with the host trainer's losses, bit for bit.
# Needs help2man, pkg-config, cmake and OpenBLAS, gcc-arm-none-eabi,
# libnewlib-arm-none-eabi and qemu-system-arm (scripts/deps.sh).
. "$(dirname "$0")/lib.sh"

dest=$work/root
if ! command -v help2man >/dev/null || ! command -v pkg-config >/dev/null; then
    bad "missing tools; run: sudo apt-get install -y help2man pkg-config"
    finish test_install
    exit
fi
if make --no-print-directory install DESTDIR="$dest" PREFIX=/usr >"$work/install.log" 2>&1; then ok
else tail -20 "$work/install.log"; bad "make install"; finish test_install; exit; fi

u=$dest/usr
for f in bin/remat include/remat/remat_rt.h share/man/man1/remat.1 \
         lib/libremat_rt.a lib/libremat_rt.so.0 lib/libremat_rt.so \
         lib/libremat_rt_noblas.a lib/libremat_rt_noblas.so.0 lib/libremat_rt_noblas.so \
         lib/pkgconfig/remat-rt.pc lib/pkgconfig/remat-rt-noblas.pc \
         share/remat/remat_rt.c share/remat/remat_rt.h \
         share/remat/runtime/trainer.c share/remat/runtime/remat_rt.c \
         share/doc/remat/README.md share/doc/remat/docs/install.md \
         share/bash-completion/completions/remat lib/cmake/remat/remat-config.cmake \
         lib/cmake/remat/remat-config-version.cmake; do
    [ -e "$u/$f" ] && ok || bad "make install: no $f"
done
# install-strip: the same files, the program and shared libraries without
# debug information, and they still work
s=$work/stripped/usr
if make --no-print-directory install-strip DESTDIR="$work/stripped" PREFIX=/usr >"$work/strip.log" 2>&1 &&
    readelf -S "$u/bin/remat" | grep -q debug_info && ! readelf -S "$s/bin/remat" | grep -q debug_info &&
    ! readelf -S "$s/lib/libremat_rt.so.0" | grep -q debug_info &&
    "$s/bin/remat" --version >/dev/null &&
    [ "$(cd "$u" && find . | sort)" = "$(cd "$s" && find . | sort)" ]; then ok
else tail -5 "$work/strip.log"; bad "make install-strip"; fi
# nothing else installed names this source tree either: the pkg-config and
# CMake files, the Python module, the stripped shared libraries (grep's 1:
# every file read, no match; 2, a file missing, fails too)
grep -rlF -- "$root" "$s"/lib/pkgconfig/remat-rt.pc "$s"/lib/pkgconfig/remat-rt-noblas.pc \
    "$s"/lib/cmake/remat/remat-config.cmake "$s"/lib/cmake/remat/remat-config-version.cmake \
    "$s"/lib/python3/dist-packages/remat "$s"/lib/libremat_rt.so.0 "$s"/lib/libremat_rt_noblas.so.0 \
    >"$work/tree-paths" 2>&1
[ $? = 1 ] && ok || bad "installed files name this source tree ($root) or are missing: $(cat "$work/tree-paths")"
rm -rf "$work/stripped"
readelf -d "$u/lib/libremat_rt.so.0" | grep -q 'SONAME.*\[libremat_rt\.so\.0\]' && ok ||
    bad "libremat_rt.so.0: no soname libremat_rt.so.0"
cmp -s dist/remat_rt.c "$u/share/remat/remat_rt.c" && cmp -s dist/remat_rt.h "$u/include/remat/remat_rt.h" &&
    ok || bad "the installed single-file runtime is not dist/'s"
strip -o "$work/remat.stripped" "$u/bin/remat" &&
    ! strings "$work/remat.stripped" | grep -qF "$root" && ok ||
    bad "the installed remat names this source tree ($root)"
for c in compile schedule diff build pareto memory import calibrate ops; do
    grep -q "^$c\$" "$u/share/man/man1/remat.1" || bad "remat.1 does not list the command $c"
done
ok
# the completion: a command, a flag read from `remat help`, a policy name,
# an --optimizer value (what each line completes -> what it must offer)
completes() {
    bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _remat
             printf "%s\n" "${COMPREPLY[@]}"' _ "$u/share/bash-completion/completions/remat" "$@"
}
[ "$(completes "$u/bin/remat" sch)" = schedule ] &&
    completes "$u/bin/remat" build g.xml --max- | grep -qx -- --max-ram &&
    [ "$(completes "$u/bin/remat" schedule g.xml --policy sac-)" = sac-aggressive ] &&
    [ "$(completes "$u/bin/remat" compile g.xml --optimizer a)" = adamw ] && ok ||
    bad "the installed bash completion"
# files: a graph path's prefix offers its .xml file; after --policy, a
# folder's .xml files and nothing else in it; --by, its two values
mkdir -p "$work/pol"
cp tests/policies/keep_gelu.xml "$work/pol/"
touch "$work/pol/notes.txt"
completes "$u/bin/remat" compile graphs/mlp | grep -qx 'graphs/mlp12\.xml' && ok ||
    bad "the installed bash completion: compile graphs/mlp does not offer graphs/mlp12.xml"
[ "$(completes "$u/bin/remat" compile g.xml --policy "$work/pol/")" = "$work/pol/keep_gelu.xml" ] && ok ||
    bad "the installed bash completion: --policy DIR/ offers $(completes "$u/bin/remat" compile g.xml --policy "$work/pol/" | tr '\n' ' '), not DIR/keep_gelu.xml alone"
[ "$(completes "$u/bin/remat" pareto g.xml --by '' | sort | tr '\n' ' ')" = "arena saved " ] && ok ||
    bad "the installed bash completion: --by does not offer saved and arena"

# ---- an application outside the tree ----------------------------------------
app=$work/app
mkdir -p "$app"
cp tests/graphs/mlp_tiny.xml "$app/model.xml"
cp tests/install/train_steps.c "$app/"
(
    cd "$app" || exit 1
    export PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$u/lib/pkgconfig
    export REMAT_CACHE_DIR=$work/cache LD_LIBRARY_PATH=$u/lib
    "$u/bin/remat" compile model.xml -o model.c || exit 1
    for pc in remat-rt remat-rt-noblas; do
        # shellcheck disable=SC2046
        cc -std=c99 -O2 -Wall -Wextra -pedantic -Werror -DM_UPPER=MLP_TINY -DM_LOWER=mlp_tiny \
            train_steps.c model.c $(pkg-config --cflags --libs $pc) -o "app-$pc" || exit 2
        ./"app-$pc" > "$pc.out" || exit 3
        ldd "app-$pc" | grep -q "lib${pc//-/_}.so.0 => $u/lib/" || exit 4
    done
    "$u/bin/remat" build model.xml -o trainer > build.log 2>&1 || exit 5
    "$u/bin/remat" build model.xml --no-blas -o trainer-noblas > build.log 2>&1 || exit 5
    for t in trainer trainer-noblas; do
        ./$t --seed 3 --steps 5 --bits |
            sed -n 's/^step \([0-9]*\) loss .* bits \(0x[0-9a-f]*\)$/step \1 bits \2/p' > "$t.out"
    done
) && ok || bad "the application outside the tree: step $? (compile, cc, run, ldd, build)"
[ -s "$app/trainer.out" ] && cmp -s "$app/remat-rt.out" "$app/trainer.out" && ok ||
    bad "pkg-config remat-rt: losses differ from the installed trainer's: $(paste "$app/remat-rt.out" "$app/trainer.out" | head -3)"
[ -s "$app/trainer-noblas.out" ] && cmp -s "$app/remat-rt-noblas.out" "$app/trainer-noblas.out" && ok ||
    bad "pkg-config remat-rt-noblas: losses differ from the installed --no-blas trainer's"
[ "$(wc -l < "$app/remat-rt.out")" = 5 ] && ok || bad "the application printed $(wc -l < "$app/remat-rt.out") losses, not 5"

# ---- CMake: examples/host against the installed package -----------------------
# three lines, remat_add_model and the executable: it configures, builds
# (remat runs at build time), and trains (the loss falls to a fifth);
# a changed POLICY and a touched model file each rerun remat, a build
# with nothing changed does not; the generated header is on the
# target's include path and the runtime linked.
if command -v cmake >/dev/null; then
    host=$work/host
    cp -r examples/host "$host"
    if cmake -S "$host" -B "$host/b" -DCMAKE_PREFIX_PATH="$u" >"$work/cmake.log" 2>&1 &&
        cmake --build "$host/b" >"$work/cmake-build.log" 2>&1 &&
        "$host/b/train" >"$work/host.out"; then ok
    else tail -15 "$work/cmake.log" "$work/cmake-build.log" "$work/host.out" 2>/dev/null
        bad "examples/host: cmake configure, build or train"; fi
    grep -q 'remat: mlp from mlp.xml' "$work/cmake-build.log" && ok ||
        bad "examples/host: the build did not run remat"
    # rebuilt: nothing changed, then the policy, then the model
    reruns() { cmake --build "$host/b" 2>&1 | grep -c 'remat: mlp from'; }
    [ "$(reruns)" = 0 ] && ok || bad "examples/host: remat reran with nothing changed"
    sed -i 's/POLICY sac/POLICY none/' "$host/CMakeLists.txt"
    [ "$(reruns)" = 1 ] && grep -q -- '--policy;none' "$host/b/remat/mlp/options" && ok ||
        bad "examples/host: a changed POLICY did not rerun remat"
    touch "$host/mlp.xml"
    [ "$(reruns)" = 1 ] && "$host/b/train" >/dev/null && ok ||
        bad "examples/host: a touched model did not rerun remat"
    # NO_BLAS links the portable runtime
    sed -i 's/POLICY none)/POLICY none NO_BLAS)/' "$host/CMakeLists.txt"
    cmake --build "$host/b" >/dev/null 2>&1 && "$host/b/train" >/dev/null &&
        ! ldd "$host/b/train" | grep -q openblas && ok ||
        bad "examples/host: NO_BLAS"
    # SOURCE_RUNTIME: the installed single file compiled in this build,
    # linked instead of the prebuilt library
    sed -i 's/NO_BLAS)/NO_BLAS SOURCE_RUNTIME)/' "$host/CMakeLists.txt"
    cmake --build "$host/b" -v >"$work/source-rt.log" 2>&1 && "$host/b/train" >/dev/null &&
        grep -q 'libremat_rt_source\.a' "$work/source-rt.log" &&
        ! grep -q 'libremat_rt_noblas\.a' "$work/source-rt.log" && ok ||
        bad "examples/host: SOURCE_RUNTIME"
    # BUDGET, MAX_ARENA, FREEZE: each, set, reruns remat once with its flag
    # (and no other change) in the options file and takes effect in what
    # remat writes; the model still builds and trains. mlp.xml's arena is
    # at least 6144 bytes: MAX_ARENA 4096 fails the build with remat's reason.
    opts() { sed -i "s/^remat_add_model(.*/remat_add_model(mlp MODEL mlp.xml POLICY none $1)/" "$host/CMakeLists.txt"; }
    rebuild() { opts "$1" && cmake --build "$host/b" >"$work/opt.log" 2>&1; }
    once() {   # one remat run in the last build, with the options --policy none $1
        [ "$(grep -c 'remat: mlp from' "$work/opt.log")" = 1 ] &&
            [ "$(cat "$host/b/remat/mlp/options")" = "compile;$host/mlp.xml;--name;mlp;--policy;none;$1" ]
    }
    saved() { sed -n 's/^ \* saved bytes: *\([0-9]*\).*/\1/p' "$host/b/remat/mlp/mlp.c"; }
    hdr() { sed -n "s/^#define MLP_$1 \([0-9]*\)\$/\1/p" "$host/b/remat/mlp/mlp.h"; }
    none_saved=$(saved) all_params=$(hdr PARAM_FLOATS)   # POLICY none: every activation saved
    rebuild "BUDGET 0.5 NO_BLAS" && once '--budget;0.5' && b=$(saved) && [ -n "$b" ] &&
        [ "${none_saved:-0}" -gt 0 ] && [ $((b * 2)) -le "$none_saved" ] && "$host/b/train" >/dev/null && ok ||
        { tail -5 "$work/opt.log"; bad "examples/host: BUDGET 0.5 (saved bytes $(saved), none's $none_saved)"; }
    ! rebuild "MAX_ARENA 4096 NO_BLAS" && once '--max-arena;4096' &&
        grep -q 'max-arena 4096 bytes cannot be met' "$work/opt.log" && ok ||
        { tail -5 "$work/opt.log"; bad "examples/host: MAX_ARENA 4096 did not fail the build with remat's reason"; }
    rebuild "MAX_ARENA 6144 NO_BLAS" && once '--max-arena;6144' && [ "$(hdr ARENA_BYTES)" -le 6144 ] &&
        "$host/b/train" >/dev/null && ok ||
        { tail -5 "$work/opt.log"; bad "examples/host: MAX_ARENA 6144 (arena $(hdr ARENA_BYTES) bytes)"; }
    # fc2's weight and bias and out's bias frozen: no gradient slot for them
    rebuild "FREEZE fc2.* out.bias NO_BLAS" && once '--freeze;fc2.*;--freeze;out.bias' &&
        [ -n "$all_params" ] && [ "$(hdr GRAD_FLOATS)" = $((all_params - 32 * 32 - 32 - 1)) ] &&
        "$host/b/train" >/dev/null && ok ||
        { tail -5 "$work/opt.log"; bad "examples/host: FREEZE (gradient floats $(hdr GRAD_FLOATS) of $all_params)"; }
    # both bounds: refused when configured, naming the two
    opts "BUDGET 0.5 MAX_ARENA 6144 NO_BLAS"
    ! cmake -S "$host" -B "$host/b" >"$work/opt.log" 2>&1 &&
        grep -q 'remat_add_model(mlp): BUDGET or MAX_ARENA, not both' "$work/opt.log" && ok ||
        { tail -5 "$work/opt.log"; bad "examples/host: BUDGET with MAX_ARENA not refused at configure time"; }
else
    bad "no cmake; run: sudo apt-get install -y cmake"
fi

# ---- Python: the installed module, outside the tree ------------------------------
# it imports from where Debian's python3 looks under PREFIX=/usr, finds the
# installed remat beside it (not this tree's), and the worked example trains,
# loads the checkpoint back into torch and agrees with torch's loss
pydir=$u/lib/python3/dist-packages
[ -f "$pydir/remat/__init__.py" ] && [ -f "$pydir/remat/trainer.py" ] && ok ||
    bad "make install: no Python module in $pydir"
(cd "$app" && env -u REMAT PYTHONPATH=$pydir /usr/bin/python3 -c 'import remat; print(remat.compiler())') \
    > "$work/py.out" 2>&1 && [ "$(cat "$work/py.out")" = "$u/bin/remat" ] && ok ||
    bad "import remat from the installed tree: $(cat "$work/py.out")"
cp examples/python/train_torch.py "$app/"
(cd "$app" && env -u REMAT PYTHONPATH=$pydir REMAT_CACHE_DIR=$work/cache \
    /usr/bin/python3 train_torch.py "$app/py") > "$work/py.out" 2>&1 &&
    grep -q 'relative difference' "$work/py.out" && ok ||
    { cat "$work/py.out"; bad "the Python round trip against the installed tree"; }

# ---- CMake: examples/cortex-m, cross-compiled against the installed package --
# The toolchain file (arm-none-eabi-gcc, newlib) and the three lines of
# remat_add_model and the executable: remat runs on this machine, the model
# links remat::rt_source (the installed single file, compiled by the cross
# compiler), warning-free; firmware.elf runs under qemu (mps2-an386, output
# through semihosting) and its 5 losses equal, bit for bit, those of the
# host trainer the installed `remat build --no-blas --cflags
# -ffp-contract=off` makes of the same model (--seed 3 --steps 5). A
# missing tool fails the check, naming the packages.
ARM="-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"
need=""
command -v cmake >/dev/null || need="$need cmake"
command -v arm-none-eabi-gcc >/dev/null || need="$need gcc-arm-none-eabi"
command -v arm-none-eabi-gcc >/dev/null &&
    [ ! -f "$(arm-none-eabi-gcc $ARM -print-file-name=libc.a)" ] && need="$need libnewlib-arm-none-eabi"
command -v qemu-system-arm >/dev/null || need="$need qemu-system-arm"
if [ -n "$need" ]; then
    bad "examples/cortex-m: missing tools; run: sudo apt-get install -y$need"
else
    m4=$work/cortex-m
    cp -r examples/cortex-m "$m4"
    if CFLAGS="-Wall -Wextra -pedantic -Werror" cmake -S "$m4" -B "$m4/b" \
            -DCMAKE_TOOLCHAIN_FILE="$m4/arm-none-eabi.cmake" -DCMAKE_PREFIX_PATH="$u" \
            >"$work/m4-cmake.log" 2>&1 &&
        cmake --build "$m4/b" >"$work/m4-build.log" 2>&1 &&
        timeout 60 qemu-system-arm -M mps2-an386 -nographic -semihosting \
            -kernel "$m4/b/firmware.elf" </dev/null >"$m4/qemu.log" 2>&1; then ok
    else tail -15 "$work/m4-cmake.log" "$work/m4-build.log" "$m4/qemu.log" 2>/dev/null
        bad "examples/cortex-m: cmake configure, build or qemu run"; fi
    grep -q 'Linking C static library libremat_rt_source.a' "$work/m4-build.log" && ok ||
        bad "examples/cortex-m: the runtime was not compiled in the build"
    if arm-none-eabi-nm "$m4/b/firmware.elf" 2>/dev/null | grep -qwE 'malloc|_malloc_r'; then
        bad "examples/cortex-m: the firmware links an allocator"; else ok; fi
    sed -n 's/^step \([0-9]*\) .* bits \(0x[0-9a-f]*\)$/step \1 \2/p' "$m4/qemu.log" >"$m4/fw"
    if REMAT_CACHE_DIR=$work/cache "$u/bin/remat" build "$m4/mlp_tiny.xml" --policy sac \
            --no-blas --cflags -ffp-contract=off -o "$m4/trainer" >"$m4/build.log" 2>&1; then
        "$m4/trainer" --seed 3 --steps 5 --bits |
            sed -n 's/^step \([0-9]*\) loss .* bits \(0x[0-9a-f]*\)$/step \1 \2/p' >"$m4/host"
        [ "$(wc -l <"$m4/fw")" = 5 ] && cmp -s "$m4/fw" "$m4/host" && ok ||
            { bad "examples/cortex-m: firmware losses differ from the host trainer's (firmware | host):"
              paste "$m4/fw" "$m4/host"; }
    else
        cat "$m4/build.log"; bad "examples/cortex-m: remat build of the host trainer"
    fi
fi

# ---- make uninstall ---------------------------------------------------------------
if make --no-print-directory uninstall DESTDIR="$dest" PREFIX=/usr >"$work/uninstall.log" 2>&1; then ok
else tail -5 "$work/uninstall.log"; bad "make uninstall"; fi
left=$(find "$dest" ! -type d | sed "s|^$dest||")
[ -z "$left" ] && ok || bad "make uninstall left: $left"
finish test_install
