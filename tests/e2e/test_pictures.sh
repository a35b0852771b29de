#!/usr/bin/env bash
# The pictures read well (issue 16): `remat pareto -o` and `remat memory -o`
# on every shipped graph. Each SVG renders with librsvg (scripts/deps.sh
# installs librsvg2-bin) to a PNG of the size the SVG says; each axis has
# ticks on round values (0, then k times 1, 2 or 5 times a power of ten) and
# its unit in its title; a legend; in the Pareto curve every built-in policy
# labelled once; and no two texts overlap, judged by boxes from an estimated
# character width (0.6 of the font size, wider than most sans-serif text).
. "$(dirname "$0")/lib.sh"
check=$work/check.py
cat > "$check" <<'PY'
import math, re, struct, sys
import xml.etree.ElementTree as ET

NS = '{http://www.w3.org/2000/svg}'
path, kind = sys.argv[1], sys.argv[2]
root = ET.parse(path).getroot()
W, H = float(root.get('width')), float(root.get('height'))
errors = []
def fail(msg):
    errors.append(msg)

def text_of(e):
    return ''.join(e.itertext())

def nice(step):
    e = math.floor(math.log10(step))
    m = step / 10 ** e
    return any(abs(m - n) < 1e-6 for n in (1, 2, 5, 10))

def check_ticks(axis):
    g = root.find('.//%sg[@id="%s"]' % (NS, axis))
    if g is None:
        return fail('no ' + axis)
    labels = [text_of(t) for t in g.iter(NS + 'text') if t.get('class') == 'tick']
    values = []
    for s in labels:
        m = re.match(r'^(\d+(\.\d+)?)( (B|KiB|MiB|GiB))?$', s)
        if not m:
            return fail('%s: tick %r is not a plain number' % (axis, s))
        values.append(float(m.group(1)))
    if len(values) < 3 or values[0] != 0:
        return fail('%s: ticks %r' % (axis, labels))
    step = values[1]
    if not nice(step):
        fail('%s: tick step %g is not 1, 2 or 5 times a power of ten' % (axis, step))
    for k, v in enumerate(values):
        if abs(v - k * step) > 1e-9 * max(1, v):
            fail('%s: tick %d is %g, not %g' % (axis, k, v, k * step))
    titles = [text_of(t) for t in g.iter(NS + 'text') if t.get('class') == 'axis-title']
    units = {'x-axis': r'\((µs|ms|s), |statement', 'y-axis': r'\((B|KiB|MiB|GiB)\)'}
    if len(titles) != 1 or not re.search(units[axis], titles[0]):
        fail('%s: title %r lacks its unit' % (axis, titles))

def boxes():
    out = []
    for t in root.iter(NS + 'text'):
        if t.get('transform'):      # the rotated y title stands alone
            continue
        size = float(t.get('font-size', 12))
        x, y = float(t.get('x')), float(t.get('y'))
        pieces = [(t.text or '', x, y)]
        for sp in t.iter(NS + 'tspan'):
            y += float(sp.get('dy', 0))
            pieces.append((sp.text or '', float(sp.get('x', x)), y))
        for s, x, y in pieces:
            if not s.strip():
                continue
            w = len(s) * 0.6 * size
            x0 = {'middle': x - w / 2, 'end': x - w}.get(t.get('text-anchor'), x)
            out.append((s, x0, y - 0.8 * size, x0 + w, y + 0.2 * size))
    return out

check_ticks('x-axis')
check_ticks('y-axis')
legend = root.find('.//%sg[@id="legend"]' % NS)
if legend is None or len(list(legend.iter(NS + 'text'))) < 2:
    fail('no legend')
b = boxes()
if kind == 'pareto':
    labels = [text_of(t) for t in root.iter(NS + 'text') if t.get('class') == 'policy-label']
    names = sorted(n for l in labels for n in l.split(', '))
    if names != sorted(['none', 'full', 'sac', 'sac-aggressive']):
        fail('policy labels %r' % labels)
    # nor does a label cross the staircase
    line = root.find('.//%spolyline[@id="frontier"]' % NS)
    pts = [tuple(map(float, p.split(','))) for p in line.get('points').split()]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        for s, u0, v0, u1, v1 in b:
            if s in labels and min(x0, x1) - 1 < u1 and u0 < max(x0, x1) + 1 \
                    and min(y0, y1) - 1 < v1 and v0 < max(y0, y1) + 1:
                fail('label %r crosses the staircase' % s)
for i, (s, x0, y0, x1, y1) in enumerate(b):
    if x0 < 0 or y0 < 0 or x1 > W or y1 > H:
        fail('%r leaves the picture' % s)
    for t, u0, v0, u1, v1 in b[:i]:
        if x0 < u1 and u0 < x1 and y0 < v1 and v0 < y1:
            fail('%r overlaps %r' % (s, t))
# the rendering: a PNG of the SVG's size
png = open(sys.argv[3], 'rb').read()
if png[:8] != b'\x89PNG\r\n\x1a\n' or struct.unpack('>II', png[16:24]) != (int(W), int(H)):
    fail('the PNG is not %dx%d' % (W, H))
if errors:
    print('\n'.join(errors))
    sys.exit(1)
PY
if ! command -v rsvg-convert > /dev/null; then
    bad "no rsvg-convert: scripts/deps.sh installs librsvg2-bin"
    finish test_pictures
    exit
fi
picture() {   # kind name remat-args...
    local kind=$1 name=$2
    shift 2
    if "$remat" "$@" -o "$work/p.svg" > /dev/null && rsvg-convert "$work/p.svg" -o "$work/p.png" &&
        /usr/bin/python3 "$check" "$work/p.svg" "$kind" "$work/p.png" > "$work/why"; then ok
    else bad "$name: $(cat "$work/why")"; fi
}
for g in graphs/*.xml tests/graphs/blocks_skip.xml tests/graphs/attention_ops.xml tests/graphs/forward_only.xml; do
    n=$(basename "$g" .xml)
    picture pareto "pareto $n" pareto "$g"
    picture pareto "pareto $n --by arena" pareto "$g" --by arena
    picture memory "memory $n" memory "$g" --policy sac
done
finish test_pictures
