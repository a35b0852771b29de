# Sourced by the end-to-end scripts: run from the repository root with a
# scratch folder removed on exit, count checks, and close with the line
# scripts/test.sh reads ("NAME: N passed, M failed") and a matching status.
set -u
cd "$(dirname "$0")/../.."
root=$PWD
remat=${REMAT:-$root/build/remat}   # REMAT: another build of the compiler
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
