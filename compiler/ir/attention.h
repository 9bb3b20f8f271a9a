/* attention.h — softmax attention as kernels of its own (lower_attention.c, docs/ir.md §3.1).
 *
 * `attend ~spec q k v` (stdlib/core.tsr) is the operation o = softmax(q·k / √d) v over an einsum
 * spec of three operands: each iterator of its record (slot 0 the result, 1 q, 2 k, 3 v) plays
 * one role, read off the slots whose maps mention it:
 *   ROW    the result's and q's or k's (batch axes, heads, the query position t): one softmax
 *          per row;
 *   SCORE  q's and k's only (d, the features of a head): summed into each score;
 *   KEY    k's and v's only (s, the key position): the axis the softmax runs over;
 *   VALUE  the result's and v's only (the value features): summed with the weights.
 * Lowering builds the nests of the forward (a row of scores at a time: no rows × keys buffer) and
 * of each operand's gradient (the weights recomputed from the forward's per-row log-sum-exp).
 * With dropout (`attend_dropout`, a fifth slot: the rate, one cell, fixed positions only) each
 * weight is dropped or scaled by a random number of its (row, key) cell, drawn again, the same,
 * by the gradients. */
#ifndef TSR_ATTENTION_H
#define TSR_ATTENTION_H

#include "ir/assign.h"

typedef enum AttentionRole { ROLE_ROW, ROLE_SCORE, ROLE_KEY, ROLE_VALUE } AttentionRole;

/* The role of each of p's iterators into roles[0 … p->iter_count).  False when some iterator
 * has none (or a map is not made of plain labels and fixed positions, or, with `causal`, the
 * query or key position is not one axis, or a fifth slot — dropout's rate — has a label), with
 * what is wrong in *why. */
bool attention_roles(Arena *arena, const Projections *p, bool causal, uint8_t *roles, const char **why);

/* The query position's iterator (the ROW iterator that only the result and q mention) and the
 * key position's (the KEY iterator), each UINT32_MAX where the axis has one position. */
void attention_positions(const Projections *p, const uint8_t *roles, uint32_t *query, uint32_t *key);

/* The iterators that number dropout's random draws, into its[0 … return value): the ROW
 * iterators in the result's axis order, then the KEY iterators in k's (at most 16). */
uint32_t attention_drop_iters(const Projections *p, const uint8_t *roles, uint32_t its[16]);

/* The nests of one attention kernel assignment (Assignment.kernel), appended to fn. */
void lower_attention(IrProgram *ir, IrFunction *fn, const Assignment *a);

#endif
