/* grad.h — reverse-mode differentiation, the last part of the assignment stage (grad.c): the
 * assignments of a routine's `t.zero_grads` and `t.backprop` statements.  Internal to the stage:
 * routines.c calls it for a routine's statements, with the Builder of assign_build.h. */
#ifndef TSR_GRAD_H
#define TSR_GRAD_H

#include "ir/assign_build.h"

/* Appends `n.grad =: 0` to `out` for every tensor n of t's graph whose gradient is reached,
 * operands before users, and unmarks n in `written` (by tensor id: a seed the routine assigned
 * before it is gone for a later backprop); `span` is the statement's. */
void grad_zero(Builder *b, Tensor *t, Span span, AssignList *out, bool *written);

/* Appends to `out` the backward assignments of the graph of the BACKPROP statement's tensor t,
 * users before operands.  With `may_seed` (the routine has not assigned t.grad before this
 * statement), a t of one cell that needs a gradient is seeded first: `t.grad =: 1`; a larger t
 * is not, and gets a warning (its gradient is whatever it holds when the routine runs).  The
 * gradients of the graph's computed tensors start from 0 (parameters' accumulate), except those
 * marked in `written` (by tensor id; NULL: none), which the routine assigned before it. */
void grad_backprop(Builder *b, const CodeStep *step, bool may_seed, const bool *written, AssignList *out);

#endif
