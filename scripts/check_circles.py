#!/usr/bin/env python3
"""The compiler's files flow one way: a check on its objects.

Reads which global symbols each object in OBJDIR (build/obj) defines and
which it uses (nm), so that file A uses file B when A names something B
defines. A circle is a set of files each reaching every other that way (a
strongly connected component). Stages call down the pipeline, so a circle
may stay inside one family (one folder of compiler/: front, ops, middle,
solver, back; each file at the top is a family of its own) and no larger
than MAX_CIRCLE files. Prints the largest circle; exits 1, naming the
links, when a circle spans two families or is too large.

With --families it prints instead which family uses which, one line each
(the picture docs/layout.md keeps, and test_layout.sh compares).

usage: scripts/check_circles.py [--families] [OBJDIR [SRCDIR]]
"""
import os
import subprocess
import sys

MAX_CIRCLE = 6


def sources(srcdir):
    """Each compiler .c file by its path under srcdir without '.c'."""
    out = {}
    for root, _, files in os.walk(srcdir):
        for f in files:
            if f.endswith('.c'):
                rel = os.path.relpath(os.path.join(root, f), srcdir)
                out[rel[:-2]] = rel
    return out


def symbols(objdir, srcs):
    """defs: symbol -> file; uses: file -> symbols it needs from others."""
    defs, uses = {}, {}
    for stem in sorted(srcs):
        obj = os.path.join(objdir, stem + '.o')
        if not os.path.exists(obj):
            sys.exit(f'check_circles: {obj} is missing; build the compiler first')
        out = subprocess.run(['nm', obj], capture_output=True, text=True,
                             check=True).stdout
        uses[stem] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == 'U':
                uses[stem].add(parts[1])
            elif len(parts) == 3 and parts[1] in 'TDBRCGS':
                defs[parts[2]] = stem
    return defs, uses


def circles(edges):
    """Strongly connected components of more than one file (Tarjan's,
    iterative so that no recursion limit applies)."""
    index, low, on, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(edges[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def family(stem):
    """A folder of compiler/ ('ops/'), or a top-level file ('driver.c')."""
    return stem.split('/')[0] + '/' if '/' in stem else stem + '.c'


def print_families(srcs, links):
    uses = {family(s): set() for s in srcs}
    for a, b in links:
        fa, fb = family(a), family(b)
        if fa != fb:
            uses[fa].add(fb)
    width = max(len(f) for f in uses)
    for f in sorted(uses):
        print(f'{f.ljust(width)} -> ' + (' '.join(sorted(uses[f])) or '(nothing)'))


def main():
    args = sys.argv[1:]
    families = '--families' in args
    args = [a for a in args if a != '--families']
    objdir = args[0] if len(args) > 0 else 'build/obj'
    srcdir = args[1] if len(args) > 1 else 'compiler'
    srcs = sources(srcdir)
    defs, uses = symbols(objdir, srcs)
    links = {}
    for a in uses:
        for s in sorted(uses[a]):
            b = defs.get(s)
            if b and b != a:
                links.setdefault((a, b), []).append(s)
    if families:
        print_families(srcs, links)
        return 0
    edges = {a: sorted({b for (x, b) in links if x == a}) for a in uses}
    found = sorted(circles(edges), key=lambda c: (-len(c), c))
    if found:
        big = found[0]
        print(f'largest circle: {len(big)} files: ' +
              ' '.join(srcs[s] for s in big))
    else:
        print('largest circle: none (every file calls only files below it)')
    bad = 0
    for comp in found:
        fams = sorted({family(s) for s in comp})
        if len(fams) == 1 and len(comp) <= MAX_CIRCLE:
            continue
        bad = 1
        why = (f'spans the families {", ".join(fams)}' if len(fams) > 1
               else f'has {len(comp)} files, more than {MAX_CIRCLE}')
        print(f'check_circles: a circle {why}:', file=sys.stderr)
        for a in comp:
            for b in comp:
                if (a, b) in links:
                    print(f'  {srcs[a]} -> {srcs[b]}: ' +
                          ' '.join(links[(a, b)][:6]), file=sys.stderr)
    return bad


if __name__ == '__main__':
    sys.exit(main())
