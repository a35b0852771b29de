#!/usr/bin/env bash
# The error catalogue, tests/bad/ (its README says how a case is written):
# every malformed graph or policy file must give exactly the message in its
# .expect file, exit 1, print nothing on standard output, and leave an
# existing OUT.c and OUT.h byte-for-byte as they were, with no temporary
# file left beside them. A usage error (a .usage case) is the same but
# exits 2, and its message is two lines.
#
# REMAT=path runs another build of the compiler (the sanitizer build);
# REMAT_WRAP="valgrind ..." runs every case under a wrapper; a wrapper's
# own report goes to a file of its choosing, not to the compared stderr.
# BAD_SHARD=K/N runs only every Nth case from the Kth (K from 0), so that a
# slow wrapper can run the catalogue as N parts in parallel; the count of
# cases at the end is still of all of them.
. "$(dirname "$0")/lib.sh"
wrap=${REMAT_WRAP:-}
out=$work/out
mkdir -p "$out"
gen=$work/gen
mkdir -p "$gen"

# The command for case $1 (a path under tests/bad/ without extension), in
# $args. Shell builtins only where it is easy: a fork costs ~10 ms here, and
# the catalogue runs three times (plain, sanitizers, valgrind).
case_args() {
    local c=$1
    if [ -f "$c.args" ] || [ -f "$c.usage" ]; then
        [ -f "$c.args" ] && args=$(<"$c.args") || args=$(<"$c.usage")
        args=${args//OUT.c/$out/m.c}
    elif [ -f "$c.policy.xml" ]; then
        args="compile tests/bad/data/base.xml --policy $c.policy.xml -o $out/m.c"
    elif [ -f "$c.onnx" ]; then
        args="compile $c.onnx -o $out/m.c"
    elif [ -f "$c.gen" ]; then
        args="compile $gen/${c##*/}.xml -o $out/m.c"
    else
        args="compile $c.xml -o $out/m.c"
    fi
}

run_case() {
    local c=$1 name=${1##*/} args want got rc left status=1
    [ -f "$c.usage" ] && status=2
    if [ -f "$c.gen" ]; then
        /usr/bin/python3 "$c.gen" > "$gen/$name.xml" || { bad "$name: generator failed"; return; }
    fi
    printf 'sentinel c\n' > "$out/m.c"
    printf 'sentinel h\n' > "$out/m.h"
    case_args "$c"
    # shellcheck disable=SC2086  # the args are words
    $wrap "$remat" $args > "$work/stdout" 2> "$work/stderr"
    rc=$?
    want=$(<"$c.expect")
    got=$(<"$work/stderr")
    got=${got//"$gen/"/GEN/}
    if [ "$rc" -ne "$status" ]; then bad "$name: exit $rc, want $status ($got)"; return; fi
    if [ "$got" != "$want" ]; then
        bad "$name: message differs"
        echo "   want: $want"
        echo "   got:  $got"
        return
    fi
    if [ -s "$work/stdout" ]; then bad "$name: wrote to standard output"; return; fi
    if [ "$(<"$out/m.c")" != "sentinel c" ] || [ "$(<"$out/m.h")" != "sentinel h" ]; then
        bad "$name: an existing output was changed"; return
    fi
    left=("$out"/*)
    if [ "${#left[@]}" -ne 2 ]; then bad "$name: left files: ${left[*]##*/}"; return; fi
    ok
}

shard=${BAD_SHARD:-0/1}
n=0
for e in tests/bad/*.expect; do
    [ $((n % ${shard#*/})) -eq "${shard%/*}" ] && run_case "${e%.expect}"
    n=$((n + 1))
done
# The issue this catalogue answers asks for at least 60 cases.
[ "$n" -ge 60 ] && ok || bad "the catalogue has $n cases; it should have at least 60"
finish test_bad
