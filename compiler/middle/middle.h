/*
 * middle.h: what the middle stages share and no other stage needs: how a
 * policy's rules decide a node (policy.c), which remat.c asks of every
 * node before it classifies the node's outputs.
 */
#ifndef MIDDLE_H
#define MIDDLE_H

#include "../remat.h"

/* The decision for a node's outputs: its own remat attribute, else the
 * first matching rule; *why says which. */
Decision policy_decide(Ctx *c, const Policy *p, const Node *n,
                       const char **why);

#endif
