#!/usr/bin/env bash
# remat memory and --json: the JSON of schedule, diff, pareto and memory
# says what their text says, key by key and row by row, on every graph under every
# built-in policy; the memory picture of every graph and policy is XML with
# both axes, the five stacked kinds, the peak at schedule's peak_live_bytes
# and the tensors live there named; usage errors are short and leave no file.
. "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
policies="none full sac sac-aggressive"
check=$work/check.py

cat > "$check" <<'PY'
import json, re, sys, xml.etree.ElementTree as ET

def fail(msg):
    print(msg)
    sys.exit(1)

def summary_lines(lines):
    """`key: value` lines: integers as int, decimals as float, anything
    else as text."""
    out = {}
    for line in lines:
        m = re.match(r'^([a-z_]+): (.*)$', line)
        if m:
            v = m.group(2)
            out[m.group(1)] = int(v) if re.fullmatch(r'-?\d+', v) else \
                float(v) if re.fullmatch(r'-?\d+\.\d+', v) else v
    return out

def schedule(text, js):
    lines = open(text).read().splitlines()
    d = json.load(open(js))
    m = re.match(r'^# model (\S+), policy ([^,]+)(, forward only)?', lines[0])
    if not m:
        fail('header: ' + lines[0])
    if (m.group(1), m.group(2), bool(m.group(3))) != (d['graph'], d['policy'], d['forward_only']):
        fail('graph, policy or forward_only differ: %s' % lines[0])
    # '# input NAME DTYPE SHAPE FILE [values [LO, HI) [or IGNORE]]' lines,
    # then the table's head
    files = []
    for line in lines[1:]:
        f = re.match(r'^# (input|output) +(\S+) +(float32|int64) +(\S+) +(\S+)'
                     r'(?:  values \[(-?\d+), (-?\d+)\)(?: or (-?\d+))?)?$', line)
        if not f:
            break
        row = dict(zip(('role', 'name', 'dtype', 'shape', 'file'), f.groups()[:5]))
        if f.group(6) is not None:
            row['lo'], row['hi'] = int(f.group(6)), int(f.group(7))
        if f.group(8) is not None:
            row['ignore'] = int(f.group(8))
        files.append(row)
    if files != d['files'] or not any(f['role'] == 'output' for f in files):
        fail('file lines differ: text %r, json %r' % (files, d['files']))
    lines = lines[len(files):]
    head = lines[1]
    cols = [head.index(w) for w in ('node', ' op ', 'shape', 'decision', 'rule')]
    cols[1] += 1
    rows = []
    for line in lines[2:]:
        if re.match(r'^[a-z_]+: ', line):
            break
        bytes_ = line[cols[2]:cols[3]].split()
        rows.append({'name': line[:cols[0]].rstrip(), 'node': line[cols[0]:cols[1]].rstrip(),
                     'op': line[cols[1]:cols[2]].rstrip(), 'shape': bytes_[0],
                     'bytes': int(bytes_[1]), 'decision': line[cols[3]:cols[4]].rstrip(),
                     'rule': line[cols[4]:]})
    if rows != d['tensors']:
        for a, b in zip(rows, d['tensors']):
            if a != b:
                fail('row differs: text %r, json %r' % (a, b))
        fail('%d text rows, %d json rows' % (len(rows), len(d['tensors'])))
    # 'compact: TENSOR, FORM of NODE (OP), BYTES bytes[, rebuilt ...]'
    # lines, then the summary
    rest, compact = lines[2 + len(rows):], []
    while rest and rest[0].startswith('compact: '):
        line = rest.pop(0)
        c = re.match(r'^compact: (\S+), (.+) of (\S+) \((\S+)\), (\d+) bytes'
                     r'(, rebuilt in the backward, not kept)?$', line)
        if not c:
            fail('compact line: %r' % line)
        compact.append(dict(zip(('tensor', 'form', 'node', 'op'), c.groups()[:4]),
                            bytes=int(c.group(5)), rebuilt=c.group(6) is not None))
    if compact != [dict(x) for x in d['compact']]:
        fail('compact lines differ: text %r, json %r' % (compact, d['compact']))
    kept = [x for x in compact if not x['rebuilt']]
    if sum(x['bytes'] for x in kept) != d['summary']['compact_bytes'] or \
            len(kept) != d['summary']['compact_forms']:
        fail('compact lines do not add up to compact_bytes: %r' % compact)
    # 'fused: TENSOR, NODE (OP) recomputed inside READER's OP backward,
    # N floats at a time' lines, and 'fused: TENSOR, NODE (OP) remade by
    # its own backward, N floats written whole'
    # (the JSON's reader is then NODE itself)
    fused = []
    while rest and rest[0].startswith('fused: '):
        line = rest.pop(0)
        f = re.match(r"^fused: (\S+), (\S+) \((\S+)\) recomputed inside "
                     r"(\S+)'s \S+ backward, (\d+) floats at a time$", line)
        r = re.match(r"^fused: (\S+), (\S+) \((\S+)\) remade by its own "
                     r"backward, (\d+) floats written whole$", line)
        if f:
            fused.append(dict(zip(('tensor', 'node', 'op', 'reader'), f.groups()[:4]),
                              chunk_floats=int(f.group(5)), remade=False))
        elif r:
            fused.append(dict(zip(('tensor', 'node', 'op'), r.groups()[:3]),
                              reader=r.group(2), chunk_floats=int(r.group(4)),
                              remade=True))
        else:
            fail('fused line: %r' % line)
    if fused != [dict(x) for x in d['fused']]:
        fail('fused lines differ: text %r, json %r' % (fused, d['fused']))
    s = summary_lines(rest)
    if s != d['summary']:
        fail('summary differs: text %r, json %r' % (s, d['summary']))
    text_keys = ('proven_optimal', 'peak_does', 'peak_note', 'recompute_seconds',
                 'optimizer', 'rebuild')
    if not all(isinstance(v, int) for k, v in d['summary'].items() if k not in text_keys):
        fail('a summary figure is not an integer: %r' % d['summary'])
    peak(d['summary'])

KINDS = ['saved', 'forward', 'recomputed', 'gradient', 'scratch']

def peak(f):
    """The peak's lines: its kinds add up to peak_live_bytes, and a note
    says why the peak is there: the recomputed values live there when
    there are any, else in the backward the saved tensors still to be
    read, else (a forward statement) the saved and in-flight values."""
    if 'peak_statement' not in f:
        fail('no peak_statement: %r' % f)
    if sum(f['peak_%s_bytes' % k] for k in KINDS) != f['peak_live_bytes']:
        fail('the kinds at the peak do not add up to peak_live_bytes: %r' % f)
    note, does = f.get('peak_note', ''), f['peak_does']
    if f['peak_recomputed_bytes'] > 0:
        want = '%d bytes here are recomputed values' % f['peak_recomputed_bytes']
    elif note.startswith('the peak is in the forward'):
        want = '%d bytes saved so far and %d of values in flight' % (
            f['peak_saved_bytes'], f['peak_forward_bytes'])
        if does.split()[0] in ('backward', 'recompute', 'seed', 'zero', 'update'):
            fail('a forward note at %r' % does)
    else:
        want = 'no recomputed value is live here; %d bytes of saved tensors' % f['peak_saved_bytes']
        if does.split()[0] in ('forward', 'output'):
            fail('a backward note at %r' % does)
    if want not in note:
        fail('peak_note %r does not say %r' % (note, want))

def diff(text, js):
    lines = open(text).read().splitlines()
    d = json.load(open(js))
    m = re.match(r'^# model (\S+): policy (\S+) -> policy (\S+)$', lines[0])
    if not m or [m.group(1), [m.group(2), m.group(3)]] != [d['graph'], d['policies']]:
        fail('diff header: %s' % lines[0])
    rows, summary = [], {}
    for line in lines[1:]:
        r = re.match(r'^(\S+) +(SAVE|RECOMPUTE|COMPACT|-) +-> (SAVE|RECOMPUTE|COMPACT|-) +\((.*) -> (.*)\)$', line)
        f = re.match(r'^([a-z_]+): (-?\d+(?:\.\d+)?) -> (-?\d+(?:\.\d+)?) \(([-+]\d+(?:\.\d+)?)\)$', line)
        if r:
            rows.append(dict(zip(('name', 'from', 'to', 'rule_from', 'rule_to'), r.groups())))
        elif f:
            num = float if '.' in f.group(2) else int
            summary[f.group(1)] = {'from': num(f.group(2)), 'to': num(f.group(3)),
                                   'change': num(f.group(4))}
        elif line != "no tensor's decision differs":
            fail('diff line not understood: ' + line)
    if rows != d['changed']:
        fail('diff rows differ: text %r json %r' % (rows, d['changed']))
    if summary != d['summary']:
        fail('diff figures differ: text %r json %r' % (summary, d['summary']))

def pareto(text, js, *schedules):
    lines = open(text).read().splitlines()
    d = json.load(open(js))
    m = re.match(r'^# model (\S+), policy (\S+): (\d+) optimal plans(, proven)?', lines[0])
    if not m or (m.group(1), m.group(2), int(m.group(3)), bool(m.group(4))) != \
            (d['graph'], d['policy'], len(d['plans']), d['proven']):
        fail('pareto header: %s' % lines[0])
    for line, p in zip(lines[2:], d['plans']):
        want = '%8.4f  %12d  %12d  %16d  %18.12f  %12d' % (
            p['budget'], p['saved_bytes'], p['arena_bytes'], p['recompute_flops'],
            p['recompute_seconds'], p['ram_bytes'])
        if line != want:
            fail('pareto row: text %r, json %r' % (line, want))
    if len(lines) - 2 != len(d['plans']):
        fail('pareto: %d rows, %d plans' % (len(lines) - 2, len(d['plans'])))
    # the policies marked: where schedule puts them
    names = [p['name'] for p in d['policies']]
    if names != ['none', 'full', 'sac', 'sac-aggressive']:
        fail('pareto policies: %r' % names)
    for p, s in zip(d['policies'], schedules):
        s = json.load(open(s))['summary']
        keys = ('saved_bytes', 'recompute_flops', 'recompute_seconds')
        if [p[k] for k in keys] != [s[k] for k in keys]:
            fail('pareto: policy %s at %r, schedule says %r' % (p['name'], p, s))
        # the staircase's recompute axis is the solver's: estimated time
        beaten = any(q['saved_bytes'] <= p['saved_bytes'] and
                     q['recompute_seconds'] < p['recompute_seconds'] for q in d['plans'])
        if p['on_frontier'] == beaten:
            fail('pareto: policy %s on_frontier is %r' % (p['name'], p['on_frontier']))

NS = '{http://www.w3.org/2000/svg}'
UNIT = re.compile(r'^\d+(\.\d+)? (B|KiB|MiB|GiB)$')

def text_of(e):
    return ''.join(e.itertext())

def svg(path, sched, memtext):
    root = ET.parse(path).getroot()
    s = json.load(open(sched))
    by_id = {e.get('id'): e for e in root.iter() if e.get('id')}
    title = text_of(by_id['title'])
    want = '%s, policy %s: arena_bytes %d, peak_live_bytes %d' % (
        s['graph'], s['policy'], s['summary']['arena_bytes'], s['summary']['peak_live_bytes'])
    if title != want:
        fail('title %r, wanted %r' % (title, want))
    for axis, pat in (('x-axis', re.compile(r'^\d+$')), ('y-axis', UNIT)):
        g = by_id.get(axis)
        if g is None:
            fail('no ' + axis)
        ticks = [text_of(t) for t in g.iter(NS + 'text') if t.get('class') == 'tick']
        if len(ticks) < 2 or not all(pat.match(t) for t in ticks):
            fail('%s ticks: %r' % (axis, ticks))
        titles = [text_of(t) for t in g.iter(NS + 'text') if t.get('class') == 'axis-title']
        unit = 'statement' if axis == 'x-axis' else ticks[0].split()[1]
        if len(titles) != 1 or unit not in titles[0]:
            fail('%s title %r lacks its unit %s' % (axis, titles, unit))
    kinds = ['saved', 'forward', 'recomputed', 'gradient', 'scratch']
    series = [e.get('id') for e in root.iter(NS + 'polygon') if e.get('class') == 'series']
    if series != ['series-' + k for k in kinds]:
        fail('series: %r' % series)
    peak = by_id.get('peak')
    if peak is None:
        fail('no peak marker')
    total = int(peak.get('data-bytes'))
    if total != s['summary']['peak_live_bytes']:
        fail('peak marker %d, schedule peak_live_bytes %d' % (total, s['summary']['peak_live_bytes']))
    if sum(int(peak.get('data-' + k)) for k in kinds) != total:
        fail('the kinds at the peak do not add up to %d' % total)
    if ('boundary' in by_id) == s['forward_only']:
        fail('forward/backward boundary marked %s' % ('boundary' in by_id))
    if 'boundary' in by_id:
        # where the backward starts, every saved value is live and nothing
        # else from the forward: remat's saved bytes, each rounded up to 64
        # (each compact form a buffer of its own too)
        saved, lo = int(by_id['boundary'].get('data-saved')), s['summary']['saved_bytes']
        bufs = s['summary']['saved_tensors'] + s['summary']['compact_forms']
        if not lo <= saved <= lo + 63 * bufs:
            fail('saved bytes where the backward starts: %d, schedule %d' % (saved, lo))
    named = [(t.get('data-name'), int(t.get('data-bytes')), t.get('data-kind'))
             for t in by_id['peak-tensors'].iter(NS + 'text') if t.get('class') == 'peak-tensor']
    if not named or sum(b for _, b, _ in named) > total or \
            any(not n or k not in kinds or not text_of_name(by_id['peak-tensors'], n) for n, _, k in named):
        fail('peak tensors: %r' % named)
    if [b for _, b, _ in named] != sorted((b for _, b, _ in named), reverse=True):
        fail('peak tensors not largest first: %r' % named)
    # the text summary: the same peak, kinds and tensors
    t = open(memtext).read().splitlines()
    f = summary_lines(t)
    if f['peak_live_bytes'] != total or str(f['peak_statement']) != peak.get('data-statement') \
            or any(f['peak_%s_bytes' % k] != int(peak.get('data-' + k)) for k in kinds):
        fail('memory text and picture differ: %r' % f)
    # and schedule's: the same peak, where its arena is the train step's
    # (always, on these graphs: the forward's is never larger, and a tie,
    # as on int_shape_ops, is the train step's)
    keys = ['peak_statement', 'peak_does', 'peak_note'] + ['peak_%s_bytes' % k for k in kinds]
    if {k: f.get(k) for k in keys} != {k: s['summary'].get(k) for k in keys}:
        fail('memory text and schedule differ at the peak: %r, %r' % (f, s['summary']))
    # and on what the device holds (docs/memory.md's ram_bytes, flash_bytes)
    if [f.get(k) for k in ('ram_bytes', 'flash_bytes')] != \
            [s['summary'][k] for k in ('ram_bytes', 'flash_bytes')]:
        fail('memory text and schedule differ on RAM: %r, %r' % (f, s['summary']))
    listed = [tuple(l.split(None, 2)) for l in t[t.index('largest at the peak:') + 1:]]
    if listed != [(str(b), k, n) for n, b, k in named]:
        fail('memory text lists %r, picture %r' % (listed, named))

def memjson(js, memtext):
    """memory --json: the text's figures, and per kind the bytes live at
    each statement, whose totals peak at peak_live_bytes where the text
    says, with the text's bytes by kind there."""
    d = json.load(open(js))
    t = open(memtext).read().splitlines()
    f = summary_lines(t)
    for k in ('arena_bytes', 'peak_live_bytes', 'ram_bytes', 'flash_bytes'):
        if d[k] != f[k]:
            fail('memory --json %s %r, text %r' % (k, d[k], f[k]))
    kinds = ['saved', 'forward', 'recomputed', 'gradient', 'scratch']
    if list(d['live']) != kinds or any(len(v) != d['statements'] for v in d['live'].values()):
        fail('memory --json live: %r' % {k: len(v) for k, v in d['live'].items()})
    totals = [sum(d['live'][k][i] for k in kinds) for i in range(d['statements'])]
    if not totals:
        return
    peak = totals.index(max(totals))
    if max(totals) != f['peak_live_bytes'] or peak != f['peak_statement'] != d['peak']['statement']:
        fail('memory --json peaks at %d with %d, text at %d with %d' % (
            peak, max(totals), f['peak_statement'], f['peak_live_bytes']))
    for k in kinds:
        if not d['live'][k][peak] == d['peak'][k + '_bytes'] == f['peak_%s_bytes' % k]:
            fail('memory --json %s at the peak' % k)
    if d['peak']['does'] != f['peak_does'] or d['peak']['note'] != f.get('peak_note'):
        fail('memory --json peak: %r' % d['peak'])
    listed = [tuple(l.split(None, 2)) for l in t[t.index('largest at the peak:') + 1:]]
    if listed != [(str(x['bytes']), x['kind'], x['name']) for x in d['largest']]:
        fail('memory --json largest %r, text %r' % (d['largest'], listed))
    if (d['backward_from'] is None) != d['forward_only']:
        fail('memory --json backward_from %r' % d['backward_from'])

def text_of_name(group, name):
    return any(text_of(t).startswith(name) for t in group.iter(NS + 'text'))

globals()[sys.argv[1]](*sys.argv[2:])
PY

# --- schedule --json against its text, every graph and policy ------------------
for g in graphs/*.xml tests/graphs/*.xml; do
    n=$(basename "$g" .xml)
    for p in $policies; do
        "$remat" schedule "$g" --policy "$p" > "$work/$n.$p.txt" &&
            "$remat" schedule "$g" --policy "$p" --json > "$work/$n.$p.json" &&
            $py "$check" schedule "$work/$n.$p.txt" "$work/$n.$p.json" \
            && ok || bad "schedule --json $g --policy $p"
    done
done
# with a budget: its four lines too; a policy file whose path (in every
# rule) has a quote, a backslash and a tab
"$remat" schedule graphs/mlp12.xml --budget 0.5 > "$work/b.txt" &&
    "$remat" schedule graphs/mlp12.xml --budget 0.5 --json > "$work/b.json" &&
    $py "$check" schedule "$work/b.txt" "$work/b.json" && grep -q '"proven_optimal": "yes"' "$work/b.json" \
    && ok || bad "schedule --budget --json"
odd=$work/$'q"\\<&\t.xml'
cp tests/policies/keep_gelu.xml "$odd"
"$remat" schedule graphs/mlp12.xml --policy "$odd" > "$work/o.txt" &&
    "$remat" schedule graphs/mlp12.xml --policy "$odd" --json > "$work/o.json" &&
    $py "$check" schedule "$work/o.txt" "$work/o.json" && grep -qF '\"\\<&\u0009.xml:' "$work/o.json" \
    && ok || bad "schedule --json: a rule naming an odd path"

# --- diff --json ---------------------------------------------------------------
for g in graphs/*.xml tests/graphs/forward_only.xml; do
    for pair in "none sac" "full sac-aggressive"; do
        set -- $pair
        "$remat" diff "$g" --policy "$1" --policy "$2" > "$work/d.txt" &&
            "$remat" diff "$g" --policy "$1" --policy "$2" --json > "$work/d.json" &&
            $py "$check" diff "$work/d.txt" "$work/d.json" && ok || bad "diff --json $g $pair"
    done
done
"$remat" diff graphs/mlp12.xml --budget 0.3 > "$work/d.txt" &&
    "$remat" diff graphs/mlp12.xml --budget 0.3 --json > "$work/d.json" &&
    $py "$check" diff "$work/d.txt" "$work/d.json" && ok || bad "diff --budget --json"

# --- pareto --json ---------------------------------------------------------------
for g in graphs/*.xml tests/graphs/forward_only.xml; do
    n=$(basename "$g" .xml)
    "$remat" pareto "$g" > "$work/p.txt" && "$remat" pareto "$g" --json > "$work/p.json" &&
        $py "$check" pareto "$work/p.txt" "$work/p.json" \
            "$work/$n.none.json" "$work/$n.full.json" "$work/$n.sac.json" "$work/$n.sac-aggressive.json" \
        && ok || bad "pareto --json $g"
done
# --json and -o together: the same picture as without --json
"$remat" pareto graphs/mlp12.xml -o "$work/a.svg" > /dev/null &&
    "$remat" pareto graphs/mlp12.xml --json -o "$work/b.svg" > /dev/null &&
    cmp -s "$work/a.svg" "$work/b.svg" && ok || bad "pareto --json -o"

# --- the memory picture ----------------------------------------------------------
have_rsvg=$(command -v rsvg-convert || true)
for g in graphs/*.xml tests/graphs/*.xml; do
    n=$(basename "$g" .xml)
    for p in $policies; do
        svgf=$work/$n.$p.svg
        "$remat" memory "$g" --policy "$p" -o "$svgf" > "$work/m.out" && [ ! -s "$work/m.out" ] &&
            "$remat" memory "$g" --policy "$p" > "$work/$n.$p.mem" &&
            $py "$check" svg "$svgf" "$work/$n.$p.json" "$work/$n.$p.mem" \
            && ok || bad "memory $g --policy $p"
        "$remat" memory "$g" --policy "$p" --json > "$work/$n.$p.mjson" &&
            $py "$check" memjson "$work/$n.$p.mjson" "$work/$n.$p.mem" \
            && ok || bad "memory --json $g --policy $p"
        if [ -n "$have_rsvg" ]; then
            rsvg-convert "$svgf" -o "$work/render.png" && ok || bad "rsvg-convert $svgf"
        fi
    done
done
[ -n "$have_rsvg" ] || echo "note: no rsvg-convert here; the pictures were not rendered"
# a budget: the picture of that plan
"$remat" memory graphs/gpt.xml --budget 0.3 -o "$work/gb.svg" &&
    "$remat" schedule graphs/gpt.xml --budget 0.3 --json > "$work/gb.json" &&
    "$remat" memory graphs/gpt.xml --budget 0.3 > "$work/gb.mem" &&
    $py "$check" svg "$work/gb.svg" "$work/gb.json" "$work/gb.mem" && ok || bad "memory --budget"
# a step longer than the plot is wide: columns show their fullest
# statement, so the peak is still drawn, in a picture of reasonable size
/usr/bin/python3 scripts/make_chain.py 2000 > "$work/chain.xml"
"$remat" memory "$work/chain.xml" --policy sac -o "$work/chain.svg" &&
    "$remat" schedule "$work/chain.xml" --policy sac --json > "$work/chain.json" &&
    "$remat" memory "$work/chain.xml" --policy sac > "$work/chain.mem" &&
    $py "$check" svg "$work/chain.svg" "$work/chain.json" "$work/chain.mem" &&
    [ "$(wc -c < "$work/chain.svg")" -lt 400000 ] && ok || bad "memory of a 2,000-node chain"
# the same input, the same bytes
"$remat" memory graphs/cnn.xml --policy sac -o "$work/again.svg" &&
    cmp -s "$work/cnn.sac.svg" "$work/again.svg" && ok || bad "memory is not reproducible"
# mlp12 under none, by hand: the peak is where d(d) is zeroed, early in the
# backward: all 36 saved activations (1179648 bytes, see test_cli.sh) are
# still live, with two 32x256 gradients, d(sq) and d(d)
"$remat" memory graphs/mlp12.xml --policy none > "$work/m.txt"
grep -qx 'peak_saved_bytes: 1179648' "$work/m.txt" && grep -qx 'peak_gradient_bytes: 65536' "$work/m.txt" &&
    grep -qx 'peak_statement: 55' "$work/m.txt" && grep -qx 'peak_does: zero d(d)' "$work/m.txt" && ok || bad "mlp12 none at the peak: $(cat "$work/m.txt")"

# --- outputs and errors -------------------------------------------------------------
# a failed compile leaves an existing picture as it was, and no temporary file
cp "$work/cnn.sac.svg" "$work/keep.svg"
printf '<model name="m" format="1"><graph>\n<input name="x" shape="4 0"/>\n</graph></model>\n' > "$work/bad.xml"
run 1 "$remat" memory "$work/bad.xml" -o "$work/keep.svg" && [ "$(wc -l < "$work/err")" -eq 1 ] \
    && cmp -s "$work/keep.svg" "$work/cnn.sac.svg" && ok || bad "a failed memory changed its output"
run 1 "$remat" memory graphs/mlp12.xml -o "$work/no/such/dir/m.svg" && [ "$(wc -l < "$work/err")" -eq 1 ] \
    && ok || bad "an unwritable -o: one line, exit 1"
[ -z "$(ls "$work" | grep '\.tmp\.')" ] && ok || bad "a temporary file was left: $(ls "$work" | grep tmp)"
usage() {   # description, then the command: exit 2, at most two lines
    local what=$1
    shift
    run 2 "$@" && [ "$(wc -l < "$work/err")" -le 2 ] && [ ! -s "$work/out" ] \
        && ok || bad "$what: $(head -3 "$work/err")"
}
usage "memory without a graph" "$remat" memory
usage "memory --frob" "$remat" memory graphs/mlp12.xml --frob
usage "memory -o x.png" "$remat" memory graphs/mlp12.xml -o "$work/x.png"
[ ! -e "$work/x.png" ] && ok || bad "memory -o x.png wrote x.png"
# --json with -o: the same picture, and the JSON printed
"$remat" memory graphs/cnn.xml --policy sac --json -o "$work/j.svg" > "$work/j.json" &&
    cmp -s "$work/cnn.sac.svg" "$work/j.svg" && cmp -s "$work/j.json" "$work/cnn.sac.mjson" \
    && ok || bad "memory --json -o"
usage "memory with two policies" "$remat" memory graphs/mlp12.xml --policy none --policy sac
usage "compile --json" "$remat" compile graphs/mlp12.xml --json -o "$work/x.c"
"$remat" memory --help | grep -q '^usage: remat memory' && ok || bad "memory --help"

finish test_memory
