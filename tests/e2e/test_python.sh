#!/usr/bin/env bash
# The Python module (python/remat, docs/python.md) from the source tree:
# tests/python/check_module.py checks its dicts against the compiler's
# --json, its training against torch.optim, its gradients against torch
# autograd and its save/resume/step/fit against one another; the worked
# example (examples/python/train_torch.py) trains, loads back into torch
# and agrees with torch's loss; `pip install --no-build-isolation`
# installs it offline, and the copy it installs imports and runs. The
# installed tree's module is tested by test_install.sh.
. "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
export REMAT=$remat REMAT_CACHE_DIR=$work/cache

# the checks print their failures and "N passed, M failed"
PYTHONPATH=$root/python $py tests/python/check_module.py "$work" > "$work/check.out" 2>&1
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/check.out")
if [ -n "$line" ]; then
    grep '^FAIL' "$work/check.out"
    pass=$((pass + ${line%% *}))
    f=${line#* passed, }
    fail=$((fail + ${f%% *}))
else
    tail -15 "$work/check.out"
    bad "check_module.py stopped before its summary"
fi

# the worked example, as docs/python.md runs it
PYTHONPATH=$root/python $py examples/python/train_torch.py "$work/example" > "$work/ex.out" 2>&1 &&
    grep -q 'relative difference' "$work/ex.out" && [ -s "$work/example/memory.svg" ] &&
    ok || { cat "$work/ex.out"; bad "examples/python/train_torch.py"; }

# pip, offline, into a folder: the package it makes is the source's
rm -rf "$work/pip"
cp -r python "$work/src"
$py -m pip install --no-build-isolation --no-index --no-deps --quiet \
    --target "$work/pip" "$work/src" > "$work/pip.log" 2>&1 &&
    (cd "$work" && W=$work/pip PYTHONPATH=$work/pip $py -c '
import remat, sys, os
sys.exit(not (remat.__file__.startswith(os.environ["W"]) and remat.version()))' ) &&
    ok || { tail -5 "$work/pip.log"; bad "pip install --no-build-isolation"; }
for f in python/remat/*.py; do
    cmp -s "$f" "$work/pip/remat/$(basename "$f")" || bad "pip installed another $f"
done
# the package's version is the compiler's
v=$(sed -n 's/^version = "\(.*\)"$/\1/p' python/pyproject.toml)
[ "$v" = "$("$remat" --version | awk '{print $NF}')" ] && ok ||
    bad "python/pyproject.toml's version $v is not remat's"
# without REMAT and outside the tree, it finds the compiler beside it or on
# PATH, and says so when there is none
(cd "$work" && env -u REMAT PATH=/usr/bin:/bin PYTHONPATH=$work/pip $py -c '
import remat
try:
    remat.compiler()
except remat.RematError as e:
    print(e)' | grep -q 'no remat program') && ok || bad "no compiler: no clear message"
finish test_python
