/*
 * svg.c: what the two pictures (pareto.c's curve, memory.c's arena) share:
 * the document's head, text escaped for XML, round tick steps, and the
 * units of bytes and times. Numbers are printed with fixed formats, so a picture is byte for
 * byte the same for the same input.
 */
#include "../remat.h"

#include <math.h>

void svg_begin(Buf *s, int w, int h)
{
    buf_printf(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n",
               w, h);
    buf_printf(s, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", w, h);
}

/* Names come from the graph file: <, & and quotes must not end the text or
 * the attribute they are printed in. */
void svg_escape(Buf *s, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '<': buf_printf(s, "&lt;"); break;
        case '>': buf_printf(s, "&gt;"); break;
        case '&': buf_printf(s, "&amp;"); break;
        case '"': buf_printf(s, "&quot;"); break;
        case '\'': buf_printf(s, "&apos;"); break;
        default:
            /* XML 1.0 has no control characters but tab and newline */
            if ((unsigned char)*p < 0x20)
                buf_printf(s, "?");
            else
                buf_printf(s, "%c", *p);
        }
    }
}

/* 1, 2 or 5 times a power of ten: about `ticks` steps over span. */
double nice_step(double span, int ticks)
{
    if (!(span > 0))
        return 1;
    double raw = span / ticks, p = pow(10, floor(log10(raw)));
    double f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* The unit a byte count up to max reads best in: B, KiB, MiB or GiB. */
const char *byte_unit(double max, double *scale)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    *scale = 1;
    while (u < 3 && max >= *scale * 1024) {
        *scale *= 1024;
        u++;
    }
    return units[u];
}

/* The unit a time up to max picoseconds reads best in: µs, ms or s. */
const char *time_unit(double max, double *scale)
{
    *scale = max >= 1e12 ? 1e12 : max >= 1e9 ? 1e9 : 1e6;
    return max >= 1e12 ? "s" : max >= 1e9 ? "ms" : "\xc2\xb5s";     /* UTF-8 µ */
}
