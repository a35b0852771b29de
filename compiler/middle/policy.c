/*
 * policy.c: the built-in policies and how a policy's rules decide a node.
 *
 * A policy is an ordered rule list, first match wins, ending in a default.
 * The built-ins are rule lists too, so a policy file can say anything they
 * say:
 *
 *   none            default prefer_save: everything needed is kept
 *   full            default prefer_recompute: with block inputs always saved
 *                   (remat.c), that is classic per-block checkpointing
 *   sac             matmul must_save, default prefer_recompute
 *   sac-aggressive  matmul, conv and attention must_save, default
 *                   prefer_recompute
 *
 * With a memory budget and no policy, the policy is sac softened: its
 * must_save rules become prefer_save, so that the budget may recompute
 * matmuls too (policy_soften; the name gets "-softened").
 *
 * A policy file without a <default> behaves as if it ended in
 * <default decision="prefer_save"/>: what no rule mentions is kept. The
 * XML parser reads policy files (parse_policy); the driver's policy_load
 * picks a built-in or a file.
 */
#include "middle.h"

#include <string.h>

const char *const builtin_policies[] = {"none", "full", "sac",
                                        "sac-aggressive", NULL};

/* In Decision's order: the XML's `remat` and `decision` values. */
const char *const decision_names[4] = {
    [MUST_SAVE] = "must_save", [PREFER_SAVE] = "prefer_save",
    [MUST_RECOMPUTE] = "must_recompute", [PREFER_RECOMPUTE] = "prefer_recompute",
};

static const char *decision_name(Decision d)
{
    return d == REMAT_UNSET ? "unset" : decision_names[d];
}

Policy *policy_builtin(Ctx *c, const char *name)
{
    static const Rule none[] = {{RULE_DEFAULT, NULL, PREFER_SAVE, 0}};
    static const Rule full[] = {{RULE_DEFAULT, NULL, PREFER_RECOMPUTE, 0}};
    static const Rule sac[] = {
        {RULE_CATEGORY, "matmul", MUST_SAVE, 0},
        {RULE_DEFAULT, NULL, PREFER_RECOMPUTE, 0},
    };
    static const Rule aggressive[] = {
        {RULE_CATEGORY, "matmul", MUST_SAVE, 0},
        {RULE_CATEGORY, "conv", MUST_SAVE, 0},
        {RULE_CATEGORY, "attention", MUST_SAVE, 0},
        {RULE_DEFAULT, NULL, PREFER_RECOMPUTE, 0},
    };
    static const struct {
        const char *name;
        const Rule *rules;
        int n;
    } table[] = {
        {"none", none, 1},
        {"full", full, 1},
        {"sac", sac, 2},
        {"sac-aggressive", aggressive, 4},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, name) == 0) {
            Policy *p = ctx_alloc(c, sizeof *p);
            p->name = table[i].name;
            p->rules = (Rule *)table[i].rules;
            p->nrules = table[i].n;
            return p;
        }
    return NULL;
}

Policy *policy_soften(Ctx *c, const Policy *p)
{
    Policy *q = ctx_alloc(c, sizeof *q);
    *q = *p;
    q->name = ctx_printf(c, "%s-softened", p->name);
    q->rules = ctx_alloc(c, ((size_t)p->nrules + 1) * sizeof *q->rules);
    for (int i = 0; i < p->nrules; i++) {
        q->rules[i] = p->rules[i];
        if (q->rules[i].decision == MUST_SAVE)
            q->rules[i].decision = PREFER_SAVE;
    }
    return q;
}

static int rule_matches(const Rule *r, const Node *n)
{
    const OpInfo *op = &op_table[n->op];
    switch (r->kind) {
    case RULE_OP: return strcmp(r->pattern, op->name) == 0;
    case RULE_CATEGORY: return strcmp(r->pattern, category_names[op->cat]) == 0;
    case RULE_NODE: return glob_match(r->pattern, n->name);
    default: return 1;
    }
}

static const char *rule_text(Ctx *c, const Policy *p, const Rule *r)
{
    static const char *const kinds[] = {"op", "category", "node"};
    const char *where = p->file ? ctx_printf(c, "%s:%d", p->file, r->line)
                                : ctx_printf(c, "policy %s", p->name);
    if (r->kind == RULE_DEFAULT)
        return ctx_printf(c, "%s default %s", where,
                          decision_name(r->decision));
    return ctx_printf(c, "%s %s=%s %s", where, kinds[r->kind], r->pattern,
                      decision_name(r->decision));
}

Decision policy_decide(Ctx *c, const Policy *p, const Node *n,
                       const char **why)
{
    if (n->remat != REMAT_UNSET) {
        *why = ctx_printf(c, "node remat=%s", decision_name(n->remat));
        return n->remat;
    }
    for (int i = 0; i < p->nrules; i++)
        if (rule_matches(&p->rules[i], n)) {
            *why = rule_text(c, p, &p->rules[i]);
            return p->rules[i].decision;
        }
    *why = ctx_printf(c, "policy %s: no rule matched, default prefer_save",
                      p->name);
    return PREFER_SAVE;
}
