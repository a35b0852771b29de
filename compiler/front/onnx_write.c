/*
 * onnx_write.c: the imported IR as the format's XML, with blocks derived
 * from what repeats (see onnx_lower.c's essay), and the table of initial
 * values the XML's init="file" paths name.
 */
#include "onnx_impl.h"

#include <stdio.h>
#include <string.h>

/* ---- blocks --------------------------------------------------------------------------------- */

/* The NAME.N key in s, the first of the form IDENT.DIGITS (or IDENT.tDIGITS,
 * an unrolled recurrent layer's time step, onnx_rnn.c) ending at a '/' or
 * '.'; NULL if none. stem_len: the length of NAME. */
static const char *block_key(Ctx *c, const char *s, size_t *stem_len)
{
    for (const char *p = s; *p; p++) {
        int step = p[1] == 't' && p[2] >= '0' && p[2] <= '9';
        if (*p != '.' || p == s || !(step || (p[1] >= '0' && p[1] <= '9')))
            continue;
        const char *e = p + 1 + step;
        while (*e >= '0' && *e <= '9')
            e++;
        if (*e && *e != '/' && *e != '.')
            continue;
        const char *b = p;
        while (b > s && b[-1] != '/')
            b--;
        if (b == p)
            continue;
        *stem_len = (size_t)(p - b);
        char *k = ctx_alloc(c, (size_t)(e - b) + 1);
        memcpy(k, b, (size_t)(e - b));
        return k;
    }
    return NULL;
}

static const char *node_key(Im *m, const Node *n, size_t *stem)
{
    const char *k = block_key(m->c, n->name, stem);
    for (int i = 0; !k && i < n->nin; i++) {
        const Tensor *t = &m->g->tensors[n->in[i]];
        if (t->kind == T_PARAM && t->trainable)
            k = block_key(m->c, t->name, stem);
    }
    return k;
}

/* Block b takes in every node outside all blocks that lies on a path
 * between two of its nodes: one that reads, directly or not, a value of
 * the block and is read, directly or not, by the block. Such a node (a
 * GELU between two Gemms of a block whose scopes carry no index) would
 * otherwise cut the block in three, and its input and output, crossing
 * block edges, would be saved under every policy. Nodes are in ONNX's
 * topological order, so one sweep each way finds them; joining adds no
 * new path, so one round is the closure. */
static void make_convex(Im *m, int b)
{
    Graph *g = m->g;
    char *from = ctx_alloc(m->c, (size_t)g->ntensors + 1);  /* reads the block */
    char *to = ctx_alloc(m->c, (size_t)g->ntensors + 1);    /* the block reads */
    char *after = ctx_alloc(m->c, (size_t)g->nnodes + 1);
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        int reads = n->block == b;
        for (int i = 0; i < n->nin && !reads; i++)
            reads = from[n->in[i]];
        after[k] = reads && n->block != b;
        for (int o = 0; o < n->nout && reads; o++)
            from[n->out[o]] = 1;
    }
    for (int k = g->nnodes - 1; k >= 0; k--) {
        Node *n = &g->nodes[k];
        int feeds = n->block == b;
        for (int o = 0; o < n->nout && !feeds; o++)
            feeds = to[n->out[o]];
        for (int i = 0; i < n->nin && feeds; i++)
            to[n->in[i]] = 1;
        if (feeds && after[k] && n->block < 0)
            n->block = b;
    }
}

static void find_blocks(Im *m)
{
    Graph *g = m->g;
    const char **key = ctx_alloc(m->c, ((size_t)g->nnodes + 1) * sizeof(char *));
    size_t *stem = ctx_alloc(m->c, ((size_t)g->nnodes + 1) * sizeof(size_t));
    for (int k = 0; k < g->nnodes; k++)
        key[k] = node_key(m, &g->nodes[k], &stem[k]);
    g->blocks = ctx_alloc(m->c, ((size_t)g->nnodes + 1) * sizeof(Block));
    for (int k = 0; k < g->nnodes; k++) {
        if (!key[k])
            continue;
        /* a stem with at least two indices repeats */
        int repeats = 0;
        for (int j = 0; j < g->nnodes && !repeats; j++)
            repeats = key[j] && stem[j] == stem[k] &&
                      !strncmp(key[j], key[k], stem[k]) && strcmp(key[j], key[k]);
        if (!repeats)
            continue;
        int b = -1;
        for (int j = 0; j < g->nblocks; j++)
            if (!strcmp(g->blocks[j].name, key[k]))
                b = j;
        if (b < 0) {
            b = g->nblocks++;
            g->blocks[b].name = key[k];
        }
        g->nodes[k].block = b;
    }
    for (int b = 0; b < g->nblocks; b++)
        make_convex(m, b);
}

/* ---- the XML ------------------------------------------------------------------------------------ */

static const char *shape_attr(Ctx *c, const Tensor *t)
{
    Buf b;
    buf_init(&b, c);
    buf_printf(&b, "%s", "");
    for (int d = 0; d < t->rank; d++)
        buf_printf(&b, "%s%ld", d ? " " : "", t->dims[d]);
    return b.data;
}

static void write_node(Buf *b, Ctx *c, const Graph *g, const Node *n,
                       const char *indent)
{
    const OpInfo *info = &op_table[n->op];
    buf_printf(b, "%s<node name=\"%s\" op=\"%s\" in=\"", indent, n->name,
               info->name);
    for (int i = 0; i < n->nin; i++)
        buf_printf(b, "%s%s", i ? " " : "", g->tensors[n->in[i]].name);
    buf_printf(b, "\" out=\"");
    for (int i = 0; i < n->nout; i++)
        buf_printf(b, "%s%s", i ? " " : "", g->tensors[n->out[i]].name);
    buf_printf(b, "\"");
    for (int k = 0; info->attrs[k].name; k++) {
        const Attr *a = &n->attrs[k];
        if (!a->set)
            continue;
        buf_printf(b, " %s=\"", info->attrs[k].name);
        switch (info->attrs[k].type) {
        case ATTR_INT: buf_printf(b, "%ld", a->i); break;
        case ATTR_FLOAT: buf_printf(b, "%.9g", (double)a->f); break;
        case ATTR_STRING: buf_printf(b, "%s", a->s); break;
        case ATTR_INTS:
            for (int j = 0; j < a->nints; j++)
                buf_printf(b, "%s%ld", j ? " " : "", a->ints[j]);
            break;
        }
        buf_printf(b, "\"");
    }
    buf_printf(b, "/>\n");
    (void)c;
}

/* A C identifier from the file's stem, clear of the generated tables'
 * prefixes (parse.c's check_model_name). */
static const char *model_name(Ctx *c, const char *stem)
{
    char *s = ctx_printf(c, "%s%s", (stem[0] >= '0' && stem[0] <= '9') ||
                         !stem[0] ? "m_" : "", stem);
    for (char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9') || *p == '_'))
            *p = '_';
    if (strlen(s) > 48)
        s[48] = '\0';
    if (model_name_clash(s))
        return ctx_printf(c, "model_%s", s);
    return s;
}

/* NAME.npy with '/' and ':' as '_' (a file name), and a clash between
 * two names that map alike (c/k and c_k) made unique with _2, _3, ... */
static const char *weight_path(Im *m, const Tensor *t)
{
    char *s = ctx_strdup(m->c, t->name);
    for (char *p = s; *p; p++)
        if (*p == '/' || *p == ':')
            *p = '_';
    const char *f = s;
    for (int k = 2; nameset_has(&m->weight_files, f); k++)
        f = ctx_printf(m->c, "%s_%d", s, k);
    nameset_add(m->c, &m->weight_files, f);
    return ctx_printf(m->c, "%s/%s.npy", m->weights_dir, f);
}

static void write_summary(Im *m, Buf *b)
{
    buf_printf(b, "<!-- imported by remat import from an ONNX model (opset "
               "%ld):\n", m->opset);
    buf_printf(b, "  folded %d constant nodes at compile time", m->nfolded);
    for (int k = 0; k < m->nfold_ops; k++)
        buf_printf(b, "%s%s %d", k ? ", " : " (", m->fold_ops[k],
                   m->fold_counts[k]);
    buf_printf(b, "%s\n", m->nfold_ops ? ")" : "");
    buf_printf(b, "%s", m->log.data ? m->log.data : "");
    buf_printf(b, "  blocks:");
    for (int k = 0; k < m->g->nblocks; k++)
        buf_printf(b, " %s", m->g->blocks[k].name);
    buf_printf(b, "%s (from repeated NAME.N scopes and parameter names) -->\n",
               m->g->nblocks ? "" : " none");
}

int onnx_write(Im *m, const char *stem, Imported *out)
{
    Graph *g = m->g;
    Ctx *c = m->c;
    if (!m->opt || m->opt->blocks)
        find_blocks(m);
    memset(out, 0, sizeof *out);
    buf_init(&out->xml, c);
    buf_init(&out->report, c);
    Buf *b = &out->xml;
    buf_printf(b, "<?xml version=\"1.0\"?>\n");
    write_summary(m, b);
    write_summary(m, &out->report);
    buf_printf(b, "<model name=\"%s\" format=\"1\">\n  <graph>\n",
               model_name(c, stem));
    out->weights = ctx_alloc(c, ((size_t)g->ntensors + 1) * sizeof(Weight));
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind == T_INPUT)
            buf_printf(b, "    <input name=\"%s\" shape=\"%s\"%s/>\n", x->name,
                       shape_attr(c, x), x->is_int ? " dtype=\"int64\"" : "");
    }
    for (int t = 0; t < g->ntensors; t++) {
        const Tensor *x = &g->tensors[t];
        if (x->kind != T_PARAM)
            continue;
        const char *path = weight_path(m, x);
        buf_printf(b, "    <initializer name=\"%s\" shape=\"%s\"%s init=\"file\" "
                   "path=\"%s\"%s/>\n", x->name, shape_attr(c, x),
                   x->is_int ? " dtype=\"int64\"" : "", path,
                   x->trainable ? "" : " trainable=\"false\"");
        Weight *w = &out->weights[out->nweights++];
        w->path = path;
        w->name = x->name;
        w->data = x->data;
        w->idata = x->idata;
        w->numel = x->numel;
        w->rank = x->rank;
        for (int d = 0; d < x->rank; d++)
            w->dims[d] = x->dims[d];
    }
    char *written = ctx_alloc(c, (size_t)g->nblocks + 1);
    for (int k = 0; k < g->nnodes; k++) {
        const Node *n = &g->nodes[k];
        if (n->block < 0) {
            write_node(b, c, g, n, "    ");
            continue;
        }
        if (written[n->block])
            continue;
        written[n->block] = 1;
        buf_printf(b, "    <block name=\"%s\">\n", g->blocks[n->block].name);
        for (int j = k; j < g->nnodes; j++)
            if (g->nodes[j].block == n->block)
                write_node(b, c, g, &g->nodes[j], "      ");
        buf_printf(b, "    </block>\n");
    }
    for (int k = 0; k < m->noutputs; k++) {
        const Val *x = &m->v[m->outputs[k]];
        buf_printf(b, "    <output name=\"%s\"%s/>\n",
                   g->tensors[x->tensor].name,
                   m->outputs[k] == m->loss ? " loss=\"true\""
                                            : " loss=\"false\"");
    }
    buf_printf(b, "  </graph>\n</model>\n");
    return 0;
}

