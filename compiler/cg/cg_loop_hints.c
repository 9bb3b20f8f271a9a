/* cg_loop_hints.c — what LLVM's loop passes are told about a loop of the IR (cg_llvm.h).
 *
 * What it does: decides, for a plain loop that cg_llvm.c emits (plain_loop), whether LLVM's loop
 * vectoriser should interleave several vectors an iteration, and attaches that as the loop's
 * metadata (`llvm.loop.interleave.count` on the branch back to its start).  A hint changes how
 * LLVM schedules the loop, never what it computes: the vectoriser keeps each cell's operations
 * in the loop's order (no fast-math flags, cg_llvm.c), so the values are the same bits.
 *
 * Requires: the CgLlvm of a CPU module (vector_floats set by cg_cpu.c; 0 on the GPU: no hint). */
#include "cg/cg_llvm.h"

#include <llvm-c/DebugInfo.h>

#include "base/size.h"

/* How an f32 expression's operations compute, for cgl_interleave_count: 0 without any of tsrc's
 * own transcendentals (cg_approx.c), 1 with one and no libm call, 2 with a libm call. */
enum { CALLS_NONE, CALLS_APPROX, CALLS_LIBM };

static unsigned expr_calls(const IrProgram *ir, const IrExpr *e) {
    if (e->kind != IR_OP) return CALLS_NONE;
    unsigned calls = CALLS_NONE;
    switch (e->op) {
    case SOP_EXP:
    case SOP_LOG:
    case SOP_TANH:
    case SOP_SIGMOID: calls = ir_expr_type(ir, e) == DTYPE_F64 ? CALLS_LIBM : CALLS_APPROX; break;
    case SOP_POW:
    case SOP_MOD:
    case SOP_SIN:
    case SOP_COS:
    case SOP_LOG2:
    case SOP_EXP2: calls = CALLS_LIBM; break;
    default: break;
    }
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++) {
        unsigned inner = expr_calls(ir, e->args[i]);
        if (inner > calls) calls = inner;
    }
    return calls;
}

/* The interleave count to ask of LLVM's loop vectorizer for plain loop `s` (0: leave it to
 * LLVM).  A cell of exp, log, tanh or sigmoid is a chain of some 40 dependent vector operations
 * (cg_approx.c); with one vector of cells an iteration, the out-of-order window holds about
 * two iterations' chains, so the loop waits on their latency, and LLVM's cost model, seeing
 * the registers they take, interleaves none.  Four vectors an iteration keep four chains
 * side by side: a GELU over 512 × 1024 cells, bias add and bf16 rounding fused in, 634 → 464 µs
 * on a Zen 4 (f32: 343 → 289; two an iteration: 493 and 325).  Only an innermost loop of CPU
 * code whose cells are computed in f32 by those chains alone (a libm call ends the
 * vectorization anyway), with at least two iterations of four vectors each. */
unsigned cgl_interleave_count(const CgLlvm *g, const IrStmt *s) {
    enum { CHAINS = 4 };
    if (!g->vector_floats || size_is_runtime(s->extent) || s->extent < 2 * CHAINS * g->vector_floats) return 0;
    unsigned calls = CALLS_NONE;
    for (uint32_t i = 0; i < s->body.count; i++) {
        const IrStmt *st = s->body.items[i];
        if (st->kind != IR_STORE && st->kind != IR_SET_LOCAL) return 0;
        if (st->kind == IR_STORE && g->ir->buffers[st->buffer].dtype == DTYPE_F64) return 0;
        unsigned c = expr_calls(g->ir, st->value);
        if (c > calls) calls = c;
    }
    return calls == CALLS_APPROX ? CHAINS : 0;
}

/* Loop metadata asking LLVM's loop vectorizer for `count` interleaved vectors an iteration,
 * on the branch back to the loop's start: !{self, !{"llvm.loop.interleave.count", count}}. */
void cgl_hint_interleave(CgLlvm *g, LLVMValueRef back_branch, unsigned count) {
    LLVMMetadataRef key = LLVMMDStringInContext2(g->ctx, "llvm.loop.interleave.count", 26);
    LLVMMetadataRef value = LLVMValueAsMetadata(LLVMConstInt(g->i32, count, 0));
    LLVMMetadataRef hint_ops[2] = {key, value};
    LLVMMetadataRef self = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(g->ctx, hint_ops, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(g->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(self, id); /* the first operand: the node itself, as LLVM wants */
    LLVMSetMetadata(back_branch, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", 9), LLVMMetadataAsValue(g->ctx, id));
}
