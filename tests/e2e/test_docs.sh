#!/usr/bin/env bash
# Documentation that cannot go stale (issue 16; docs/testing.md, "Documentation
# that runs"). Every command in a fenced block whose info string is `sh run`
# in README.md and docs/*.md runs from the root of a scratch copy of the
# repository (the files git tracks, as they are in the working tree, with
# links to the built build/remat and build/asan/remat), one copy per page,
# commands in page order; one that exits non-zero fails, named by its page,
# line and text. Also: README.md at most 260 lines, every docs/ page linked
# from README.md, and every relative link in README.md and docs/*.md naming
# a file that exists (and a heading, when it has a #fragment into a page).
. "$(dirname "$0")/lib.sh"

pages=(README.md docs/*.md)

# --- the runnable commands --------------------------------------------------------------------
# extract PAGE: one record per command, "LINE<TAB>COMMAND", continuation lines
# (ending in a backslash) joined, blank and comment lines left out.
extract() {
    awk '
        /^```/ {
            if (inblock) { inblock = 0; next }
            info = substr($0, 4); gsub(/^[ \t]+|[ \t]+$/, "", info)
            if (info == "sh run") inblock = 1
            next
        }
        !inblock { next }
        {
            line = $0
            if (cmd == "") { if (line ~ /^[ \t]*(#|$)/) next; start = NR }
            if (line ~ /\\$/) { cmd = cmd substr(line, 1, length(line) - 1) " "; next }
            cmd = cmd line
            printf "%d\t%s\n", start, cmd
            cmd = ""
        }' "$1"
}

# a scratch copy of the repository (6 MB), made once; each page gets its own
# copy of that
base=$work/base
mkdir -p "$base/build/asan"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$base" \
    || { bad "cannot copy the repository (git ls-files | tar)"; finish test_docs; exit; }
ln -s "$remat" "$base/build/remat"
[ -x "$root/build/asan/remat" ] && ln -s "$root/build/asan/remat" "$base/build/asan/remat"

ncmd=0
for page in "${pages[@]}"; do
    cmds=$(extract "$page")
    [ -n "$cmds" ] || continue
    scratch=$work/run/$(echo "$page" | tr / _)
    mkdir -p "$work/run"
    cp -a "$base" "$scratch"
    while IFS=$'\t' read -r line cmd; do
        ncmd=$((ncmd + 1))
        # Debian's python3 (with numpy and torch, scripts/deps.sh) first, as on
        # the machine the pages describe
        if (cd "$scratch" && PATH=/usr/bin:$PATH timeout 120 bash -c "set -eo pipefail; $cmd") </dev/null >"$work/out" 2>&1; then ok
        else
            rc=$?
            bad "$page:$line: exit $rc: $cmd"
            tail -n 8 "$work/out" | sed 's/^/     /'
        fi
    done <<< "$cmds"
done
[ "$ncmd" -ge 20 ] && ok || bad "only $ncmd runnable commands found in README.md and docs/ (the sh run blocks)"

# --- README's size and its links to every page ------------------------------------------------
n=$(wc -l < README.md)
[ "$n" -le 260 ] && ok || bad "README.md has $n lines, more than 260: move a section to docs/"
for f in docs/*.md; do
    grep -q "](${f})\|](${f}#" README.md && ok || bad "README.md does not link $f"
done

# --- every relative link names a file that exists (and a heading there) -----------------------
/usr/bin/python3 - "${pages[@]}" > "$work/links" <<'PY'
import os, re, sys

def slug(heading):
    # GitHub's anchors: lower case, punctuation other than - and _ dropped,
    # spaces to hyphens
    s = re.sub(r'[`*]', '', heading.strip().lower())
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')

def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
        elif not fence and line.startswith('#'):
            out.add(slug(line.lstrip('#')))
    return out

for page in sys.argv[1:]:
    fence = False
    for no, line in enumerate(open(page, encoding='utf-8'), 1):
        if line.startswith('```'):
            fence = not fence
            continue
        if fence:
            continue
        for target in re.findall(r'\]\(([^)\s]+)\)', line):
            if re.match(r'^[a-z]+:', target):
                continue      # http:, https:, mailto:
            path, _, frag = target.partition('#')
            full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(full):
                print(f'{page}:{no}: link to {target}: {full} does not exist')
            elif frag and full.endswith('.md') and frag not in anchors(full):
                print(f'{page}:{no}: link to {target}: {full} has no heading #{frag}')
            else:
                print('ok')
PY
nlinks=0
while read -r l; do
    nlinks=$((nlinks + 1))
    [ "$l" = ok ] && ok || bad "$l"
done < "$work/links"
[ "$nlinks" -ge 30 ] && ok || bad "only $nlinks relative links found: is the link check reading the pages?"

finish test_docs
