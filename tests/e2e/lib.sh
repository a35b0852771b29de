# Sourced by the end-to-end scripts: run from the repository root with a
# scratch folder removed on exit, count checks, and close with the line
# scripts/test.sh reads ("NAME: N passed, M failed") and a matching status.
set -u
cd "$(dirname "$0")/../.."
root=$PWD
remat=${REMAT:-$root/build/remat}   # REMAT: another build of the compiler
# the built-in cost rates, not this machine's calibration: the same plans
# everywhere (test_calibrate.sh sets its own)
export REMAT_RATES=builtin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
finish() {   # name
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}

# run RC CMD ARGS...: stdout to $work/out, stderr to $work/err, exit RC;
# otherwise says what it got (a script may define its own run instead).
run() {
    local want=$1 rc=0
    shift
    "$@" </dev/null >"$work/out" 2>"$work/err" || rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "     $*: exit $rc, wanted $want" >&2
        sed 's/^/     stderr: /' "$work/err" >&2
        return 1
    fi
}

# same_dirs A B: the same file names, every file byte-identical
same_dirs() {
    [ "$(cd "$1" && ls)" = "$(cd "$2" && ls)" ] || { echo "     $1 and $2 list different files" >&2; return 1; }
    local f
    for f in "$1"/*; do
        cmp -s "$f" "$2/$(basename "$f")" || { echo "     $(basename "$f") differs" >&2; return 1; }
    done
}
