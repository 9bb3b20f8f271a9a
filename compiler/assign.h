/* assign.h — from the tensor graph to the assignment IR (ir.h, part 1).
 *
 * assign_build() makes one buffer per tensor node that computation needs and, for every
 * operation reachable from a named tensor, its forward assignments: an operator application
 * instantiates the operator's `forward` block with the slot names bound to the result and the
 * operands; a slice and a stack of computed tensors are built-in assignments.  A parameter's
 * initial value must be a number or a literal tensor: it becomes the buffer's initial contents.  Each operation's projections record comes from proj.c.  Literal tensors (and
 * stacks of them) become initialised buffers, not assignments.
 *
 * Requires closed shapes (elaborate() without errors). */
#ifndef TSR_ASSIGN_H
#define TSR_ASSIGN_H

#include "ir.h"

typedef struct AssignOptions {
    uint64_t seed; /* parameter initialisation */
} AssignOptions;

/* A list of assignments in execution order: a routine, or the implicit forward. */
typedef struct AssignList {
    const char *name;
    Assignment **items;
    uint32_t count, cap;
} AssignList;

/* The program's buffers and assignments: `forward` computes every named tensor; `routines`
 * are the program's routines (t.forward, t.backprop with the operators' backward blocks,
 * t.zero_grads, standalone pointwise assignments).  False after reporting errors. */
typedef struct AssignResult {
    IrProgram *ir;
    AssignList forward;
    AssignList *routines;
    uint32_t routine_count;
} AssignResult;

bool assign_build(Program *program, const AssignOptions *options, AssignResult *out);

/* The buffer of a tensor node (creating it on first use). */
uint32_t assign_buffer(IrProgram *ir, TNode node);

#endif
