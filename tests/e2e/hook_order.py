"""Where a generated train step hands each gradient to its hook.

Reads NAME.c (remat compile) and checks, in NAME_train_schedule, that every
trainable parameter's rt_grad_ready call stands in the statement that last
writes its gradient (the statement's block: statements are separated by
blank lines), i.e. no later statement writes it (not too early) and it is
not left for a later statement (not too late); a gradient nothing writes
is handed on right after the seed. Prints how many calls come before the
last backward statement: those buckets' all-reduces can start while the
backward still runs. Exit 1 on any failure.

usage: hook_order.py NAME.c
"""
import re
import sys


def schedule_body(src):
    start = src.index("_train_schedule(")
    open_brace = src.index("\n{\n", start)
    return src[open_brace + 3:src.index("\n}\n", open_brace)]


def main(path):
    body = schedule_body(open(path).read())
    blocks = body.split("\n\n")
    offset = {}   # gradient pointer name -> its offset in grads
    for m in re.finditer(r"float \*(d_\w+) = grads \+ (\d+);", blocks[0]):
        offset[m.group(1)] = int(m.group(2))
    for b in blocks[1:]:   # d(view) named as d(parameter)
        for m in re.finditer(r"float \*(d_\w+) = (d_\w+);", b):
            if m.group(2) in offset:
                offset[m.group(1)] = offset[m.group(2)]
    ready = [(i, int(m.group(1)), m.group(3))
             for i, b in enumerate(blocks)
             for m in re.finditer(r"rt_grad_ready\(hook, grads, (\d+), (\d+)\);"
                                  r" /\* d\((.*)\) is final \*/", b)]

    def writes(b, off):
        text = re.sub(r"rt_grad_ready\(.*", "", b)
        return any(re.search(r"\b%s\b" % n, text)
                   for n, o in offset.items() if o == off)

    backward = [i for i, b in enumerate(blocks) if "backward */" in b]
    seed = next(i for i, b in enumerate(blocks) if "backward: d(" in b)
    bad = 0
    for i, off, name in ready:
        later = [j for j in range(i + 1, len(blocks)) if writes(blocks[j], off)]
        if later:
            print(f"FAIL d({name}) handed on in statement {i}, written again "
                  f"in {later[0]}")
            bad += 1
        elif not writes(blocks[i], off) and i != seed:
            print(f"FAIL d({name}) handed on in statement {i}, which does "
                  f"not write it: later than its last writer")
            bad += 1
    handed = [off for _, off, _ in ready]
    if len(set(handed)) != len(handed) or not set(offset.values()) <= set(handed):
        print("FAIL not every gradient has exactly one rt_grad_ready")
        bad += 1
    early = sum(1 for i, _, _ in ready if i < backward[-1])
    print(f"{path}: {len(ready)} gradients, each handed on in the statement "
          f"that last writes it; {early} before the last of "
          f"{len(backward)} backward statements")
    return 1 if bad or not ready else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
