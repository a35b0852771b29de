#!/usr/bin/env bash
# The source layout keeps its promises (issue 24; docs/layout.md):
#  - scripts/check_circles.py (which scripts/test.sh runs on the compiler:
#    no circle of files spans two families or holds more than six) catches
#    a circle across two families, made here from two small files that call
#    each other;
#  - an op family has one name: compiler/ops/ops_NAME.c, runtime/NAME.c and
#    tests/unit/test_kernels_NAME.c;
#  - no .c or .h file in compiler/ or runtime/ is over 1,500 lines;
#  - docs/layout.md names every source file (the examples' and install/'s
#    too), every path it names exists, and its picture of which family
#    uses which is the one the objects give.
. "$(dirname "$0")/lib.sh"

# --- one way ----------------------------------------------------------------------------------
# scripts/test.sh runs scripts/check_circles.py on the compiler itself and
# prints its largest circle; here, that the check catches what it must:
# two families, x.c in a/ and y.c in b/, each calling the other: one circle
mkdir -p "$work/src/a" "$work/src/b" "$work/obj/a" "$work/obj/b"
printf 'int y(int);\nint x(int v) { return v ? y(v - 1) : 0; }\n' >"$work/src/a/x.c"
printf 'int x(int);\nint y(int v) { return v ? x(v - 1) : 1; }\n' >"$work/src/b/y.c"
cc -c "$work/src/a/x.c" -o "$work/obj/a/x.o" && cc -c "$work/src/b/y.c" -o "$work/obj/b/y.o"
if scripts/check_circles.py "$work/obj" "$work/src" >"$work/out" 2>"$work/err"; then
    bad "check_circles passed a circle across families a and b"
elif grep -q 'spans the families a/, b/' "$work/err" && grep -q 'a/x.c -> b/y.c: y' "$work/err"; then ok
else bad "check_circles failed without naming the circle: $(cat "$work/err")"; fi

# the picture docs/layout.md draws is the one the objects give today
awk '/^<!-- families:/ { on = 1; next } on && /^```$/ { if (inside) exit; inside = 1; next }
     inside { print }' docs/layout.md >"$work/drawn"
scripts/check_circles.py --families build/obj compiler >"$work/now"
if [ -s "$work/drawn" ] && cmp -s "$work/drawn" "$work/now"; then ok
else bad "docs/layout.md's family picture is not the code's: $(diff "$work/drawn" "$work/now" | head -5)"; fi

# --- one family, one name ------------------------------------------------------------------
# every op family of the compiler has the runtime's file and the test file of
# that name, and every runtime family (all of runtime/ but the trainer and
# rt_impl.h) has its test file
names=""
for f in compiler/ops/ops_*.c; do
    fam=$(basename "$f" .c); fam=${fam#ops_}
    [ -f "runtime/$fam.c" ] || names="$names runtime/$fam.c"
done
for f in runtime/*.c; do
    fam=$(basename "$f" .c)
    case $fam in trainer*) continue ;; esac
    [ -f "tests/unit/test_kernels_$fam.c" ] || names="$names tests/unit/test_kernels_$fam.c"
done
for f in tests/unit/test_kernels_*.c; do
    fam=$(basename "$f" .c); fam=${fam#test_kernels_}
    [ -f "runtime/$fam.c" ] || names="$names runtime/$fam.c (for $f)"
done
[ -z "$names" ] && ok || bad "a family without its file of the same name:$names"

# --- file sizes ---------------------------------------------------------------------------------
big=$(find compiler runtime -name '*.[ch]' -exec wc -l {} + | awk '$2 != "total" && $1 > 1500')
[ -z "$big" ] && ok || bad "over 1,500 lines: $big"

# --- the map ----------------------------------------------------------------------------------
# Every file git tracks that holds code or drives the build and the tests,
# and the examples' and install/'s files (CMake, pkg-config, completion) and the Python module's.
sources=$(git ls-files compiler runtime dist scripts tests bench fuzz examples install python 2>/dev/null |
    grep -E '\.(c|h|py|sh|ld|supp|dict|cmake|in|bash|toml)$|CMakeLists\.txt$|^examples/.*\.xml$|^tests/bad/README.md$|^compiler/ADDING_AN_OP.md$' |
    grep -v '^tests/onnx/seeds/')
[ -n "$sources" ] || bad "git ls-files found no sources"
missing=""
for f in $sources; do
    grep -qF "\`$f\`" docs/layout.md || missing="$missing $f"
done
[ -z "$missing" ] && ok || bad "docs/layout.md does not name:$missing"
stale=""
for f in $(grep -oE '^- `[^`]+`' docs/layout.md | sed 's/^- `//; s/`$//'); do
    [ -e "$f" ] || stale="$stale $f"
done
[ -z "$stale" ] && ok || bad "docs/layout.md names files that do not exist:$stale"

finish test_layout
