/* cg_tensor.c — the tensor cores' statements of a block's kernel (ir.h IR_MMA, IR_LDMATRIX,
 * IR_WGMMA), emitted for NVPTX: mma.sync and ldmatrix through LLVM's intrinsics, wgmma.mma_async
 * (for which LLVM has none) as inline PTX.
 *
 * What it does: each statement as one thread of its warp (or warpgroup) carries it out, on the
 * thread's registers (per-thread buffers: stack arrays of thread_cells, which the unrolled
 * nests address at constant offsets, so they live in registers) and the block's shared panels
 * (cg_ptx.c).  The schedule that builds these statements is sched_mma.c.
 *
 * Requires: a CgLlvm emitting a GPU kernel (cg_ptx.c), whose buffers cgl_kernel_body set up. */
#include "cg/cg_llvm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"

/* The address of cell `at` (an i64) of shared panel `panel`, of 2- or 4-byte cells. */
static LLVMValueRef panel_cell(CgLlvm *g, uint32_t panel, LLVMValueRef at) {
    LLVMValueRef bytes[1] = {LLVMBuildNSWMul(g->b, at, cgl_iconst(g, ir_dtype_bytes(g->ir->buffers[panel].dtype)), "")};
    return LLVMBuildInBoundsGEP2(g->b, LLVMInt8TypeInContext(g->ctx), g->buffer[panel], bytes, 1, "");
}


/* Registers at, at+1 of `buffer` as the pair of bf16 or f16 values that one 32-bit operand
 * register of mma.sync holds (the first in the low half).  The registers are of that type (the
 * schedule copied them from its panels' bits; sched_mma.c, rewrite 6t). */
static LLVMValueRef half_pair(CgLlvm *g, DType in, uint32_t buffer, uint32_t at) {
    LLVMTypeRef bits = LLVMInt16TypeInContext(g->ctx), v2 = LLVMVectorType(bits, 2);
    LLVMValueRef pair = LLVMGetUndef(v2);
    for (unsigned k = 0; k < 2; k++)
        pair = LLVMBuildInsertElement(g->b, pair, LLVMBuildLoad2(g->b, bits, cgl_thread_register(g, bits, buffer, at + k), ""),
                                      LLVMConstInt(g->i32, k, 0), "");
    if (in == DTYPE_BF16) return LLVMBuildBitCast(g->b, pair, g->i32, "");
    return LLVMBuildBitCast(g->b, pair, LLVMVectorType(LLVMHalfTypeInContext(g->ctx), 2), "");
}

/* Operand register r of mma.sync from `buffer`'s registers starting at `first`: a pair of bf16
 * or f16 values, or for tf32 one value as its f32 bits (rounded already: the low 13 bits are 0). */
static LLVMValueRef operand_register(CgLlvm *g, DType in, uint32_t buffer, uint32_t first, unsigned r) {
    if (in != DTYPE_F32) return half_pair(g, in, buffer, first + 2 * r);
    return LLVMBuildBitCast(g->b, LLVMBuildLoad2(g->b, g->f32, cgl_thread_register(g, g->f32, buffer, first + r), ""), g->i32, "");
}

/* IR_MMA (ir.h): this thread's part of its warp's mma.sync.m16n8k16 (tf32: m16n8k8), on its
 * registers. */
void cgl_tensor_product(CgLlvm *g, const IrMma *m) {
    LLVMValueRef args[10];
    LLVMTypeRef params[10];
    bool tf32 = m->in == DTYPE_F32;
    for (unsigned r = 0; r < 4; r++) args[r] = operand_register(g, m->in, m->a, m->a_at, r);
    for (unsigned r = 0; r < 2; r++) args[4 + r] = operand_register(g, m->in, m->b, m->b_at, r);
    for (unsigned r = 0; r < 4; r++) args[6 + r] = LLVMBuildLoad2(g->b, g->f32, cgl_thread_register(g, g->f32, m->c, m->c_at + r), "");
    for (unsigned r = 0; r < 10; r++) params[r] = LLVMTypeOf(args[r]);
    LLVMTypeRef four[4] = {g->f32, g->f32, g->f32, g->f32};
    LLVMTypeRef result = LLVMStructTypeInContext(g->ctx, four, 4, 0);
    const char *name = tf32 ? "llvm.nvvm.mma.m16n8k8.row.col.tf32"
                       : m->in == DTYPE_BF16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
    LLVMValueRef d = cgl_call(g, name, result, params, 10, args);
    for (unsigned r = 0; r < 4; r++)
        LLVMBuildStore(g->b, LLVMBuildExtractValue(g->b, d, r, ""), cgl_thread_register(g, g->f32, m->c, m->c_at + r));
}

/* IR_LDMATRIX (ir.h): this thread names its lane's row of a matrix, and receives its 4 bytes of
 * each matrix into its registers.  Its lane and warp come from its linear thread index, as the
 * GPU forms warps. */
void cgl_load_matrices(CgLlvm *g, const IrLdmatrix *l) {
    LLVMValueRef t = cgl_special_register(g, "tid.z");
    t = LLVMBuildNUWAdd(g->b, LLVMBuildNUWMul(g->b, t, cgl_iconst(g, g->block_dim[1]), ""), cgl_special_register(g, "tid.y"), "");
    t = LLVMBuildNUWAdd(g->b, LLVMBuildNUWMul(g->b, t, cgl_iconst(g, g->block_dim[0]), ""), cgl_special_register(g, "tid.x"), "");
    LLVMValueRef lane = LLVMBuildURem(g->b, t, cgl_iconst(g, 32), ""), warp = LLVMBuildUDiv(g->b, t, cgl_iconst(g, 32), "");
    LLVMValueRef matrix = LLVMBuildUDiv(g->b, lane, cgl_iconst(g, 8), "");
    const LLVMValueRef factor[5] = {
        LLVMBuildUDiv(g->b, warp, cgl_iconst(g, l->warps_j), ""), LLVMBuildURem(g->b, warp, cgl_iconst(g, l->warps_j), ""),
        LLVMBuildURem(g->b, lane, cgl_iconst(g, 8), ""), LLVMBuildAnd(g->b, matrix, cgl_iconst(g, 1), ""),
        LLVMBuildLShr(g->b, matrix, cgl_iconst(g, 1), "")};
    const int64_t coef[5] = {l->warp_row, l->warp_col, l->row, l->matrix[0], l->matrix[1]};
    LLVMValueRef at = cgl_iconst(g, l->at);
    for (int k = 0; k < 5; k++)
        if (coef[k]) at = LLVMBuildNSWAdd(g->b, at, LLVMBuildNSWMul(g->b, factor[k], cgl_iconst(g, coef[k]), ""), "");
    LLVMValueRef address = panel_cell(g, l->panel, at);
    LLVMTypeRef params[1] = {LLVMTypeOf(address)}, words[4] = {g->i32, g->i32, g->i32, g->i32};
    LLVMValueRef args[1] = {address};
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%u%s.b16.p3", l->matrices, l->trans ? ".trans" : "");
    LLVMValueRef got = cgl_call(g, name, l->matrices == 1 ? g->i32 : LLVMStructTypeInContext(g->ctx, words, l->matrices, 0), params, 1, args);
    /* Each 32-bit word is a register's bits, or two 16-bit registers', the first in the low half. */
    bool half = ir_dtype_bytes(g->ir->buffers[l->panel].dtype) == 2;
    for (unsigned i = 0; i < l->matrices; i++) {
        LLVMValueRef word = l->matrices == 1 ? got : LLVMBuildExtractValue(g->b, got, i, "");
        LLVMValueRef to = cgl_thread_register(g, half ? LLVMInt16TypeInContext(g->ctx) : g->f32, l->regs, l->regs_at + (half ? 2 : 1) * i);
        LLVMBuildStore(g->b, word, to);
    }
}

/* The 64-bit shared-memory descriptor of a wgmma operand whose core matrices start at cell `at`
 * (plus `more`, a value, unless NULL) of panel `panel` (PTX: the start address, `leading` and
 * `stride` in bytes, each shifted right by 4, at bits 0, 16 and 32; the swizzling mode at bits
 * 62 and 63: 1 for 128 bytes, 2 for 64, 3 for 32, 0 none).  The address is the cell's before
 * the swizzle (ir.h IrCoreLayout): the tensor cores swizzle what they read as the stores did,
 * the panel starting on the swizzle's period (cg_ptx.c), so the base offset at bits 49–51 is 0. */
static LLVMValueRef core_descriptor(CgLlvm *g, uint32_t panel, const IrCoreLayout *l, int64_t at, LLVMValueRef more) {
    /* The panel's start (16-byte aligned, in the 228 KiB of a block's shared memory) in the
     * descriptor, the cell's 16-byte units added to it: the panel's own descriptor is then one
     * value for the kernel, each instruction's that value plus a constant. */
    LLVMValueRef start = LLVMBuildPtrToInt(g->b, panel_cell(g, panel, cgl_iconst(g, 0)), g->i64, "");
    LLVMValueRef d = LLVMBuildLShr(g->b, LLVMBuildAnd(g->b, start, cgl_iconst(g, 0x3ffff), ""), cgl_iconst(g, 4), "");
    int64_t leading, stride, cell = ir_dtype_bytes(g->ir->buffers[panel].dtype);
    int mode;
    ir_core_descriptor(l, &leading, &stride, &mode);
    uint64_t fields = (uint64_t)(leading >> 4 & 0x3fff) << 16 | (uint64_t)(stride >> 4 & 0x3fff) << 32 | (uint64_t)mode << 62;
    d = LLVMBuildOr(g->b, d, LLVMConstInt(g->i64, fields, 0), "");
    if (more) d = LLVMBuildNUWAdd(g->b, d, LLVMBuildLShr(g->b, LLVMBuildNUWMul(g->b, more, cgl_iconst(g, cell), ""), cgl_iconst(g, 4), ""), "");
    return LLVMBuildNUWAdd(g->b, d, cgl_iconst(g, at * cell >> 4), "desc");
}

/* IR_WGMMA (ir.h): for each 64 rows of the thread's warpgroup and each 16 steps (8 of tf32, whose
 * K-major operands take no transposition flags), one
 * wgmma.mma_async on this thread's accumulators (inline PTX: LLVM has no intrinsic for it), the
 * first fenced, the last committed and awaited down to the statement's groups in flight; of
 * two warpgroups, the second's A descriptors start R = rows/2 rows further (its number is
 * threadIdx.z / 4, the block's warps numbered t = x + 4y + 32z).  Before the first, a proxy
 * fence: the panels were written by cp.async (the generic proxy, landed by the barrier
 * before), and wgmma reads them through the async proxy.  A group left in flight keeps its
 * accumulators: the next statement's instructions take the same registers, untouched between
 * (ptxas serialises the products, and says so, where anything else touches them). */
void cgl_warpgroup_product(CgLlvm *g, const IrWgmma *w) {
    unsigned regs = w->n / 2, group_rows = w->rows / w->warpgroups, halves = group_rows / 64, kstep = ir_wgmma_k(w->in),
             chunks = w->steps / kstep;
    bool tf32 = w->in == DTYPE_F32; /* (K-major operands alone: no transposition flags) */
    LLVMValueRef group_at = NULL; /* the warpgroup's first row of A, in cells of its panel */
    if (w->warpgroups > 1)
        group_at = LLVMBuildNUWMul(g->b, LLVMBuildUDiv(g->b, cgl_special_register(g, "tid.z"), cgl_iconst(g, 4), ""),
                                   cgl_iconst(g, ir_core_cell(&w->a_layout, group_rows, 0) - w->a_layout.at), "");
    const char *type = tf32 ? "tf32" : ir_dtype_word(w->in);
    LLVMTypeRef *fields = malloc(regs * sizeof *fields), *params = malloc((regs + 2) * sizeof *params);
    LLVMValueRef *args = malloc((regs + 2) * sizeof *args);
    char *text = malloc(64 * (size_t)regs + 512), *constraints = malloc(8 * (size_t)regs + 16), wait[96];
    sprintf(wait, "\nwgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned %u;", w->in_flight);
    if (!fields || !params || !args || !text || !constraints) diag_fatal_oom();
    for (unsigned r = 0; r < regs; r++) fields[r] = params[r] = g->f32;
    params[regs] = params[regs + 1] = g->i64;
    LLVMTypeRef result = LLVMStructTypeInContext(g->ctx, fields, regs, 0), fn = LLVMFunctionType(result, params, regs + 2, 0);
    size_t n = 0;
    for (unsigned r = 0; r < regs; r++) n += (size_t)sprintf(constraints + n, "=f,");
    for (unsigned r = 0; r < regs; r++) n += (size_t)sprintf(constraints + n, "%u,", r);
    sprintf(constraints + n, "l,l");
    for (unsigned h = 0; h < halves; h++)
        for (unsigned k = 0; k < chunks; k++) {
            bool first = h == 0 && k == 0, last = h + 1 == halves && k + 1 == chunks;
            n = (size_t)sprintf(text, "%s{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n%uk%u.f32.%s.%s {",
                                first ? "fence.proxy.async.shared::cta;\nwgmma.fence.sync.aligned;\n" : "", w->n, kstep, type, type);
            for (unsigned r = 0; r < regs; r++) n += (size_t)sprintf(text + n, "%s$%u", r ? "," : "", r);
            n += (size_t)sprintf(text + n, "}, $%u, $%u, p, 1, 1", 2 * regs, 2 * regs + 1);
            if (!tf32) n += (size_t)sprintf(text + n, ", %d, %d", w->a_layout.mn_major, w->b_layout.mn_major);
            n += (size_t)sprintf(text + n, ";\n}%s", last ? wait : "");
            unsigned first_reg = w->c_at + h * regs;
            for (unsigned r = 0; r < regs; r++)
                args[r] = LLVMBuildLoad2(g->b, g->f32, cgl_thread_register(g, g->f32, w->c, first_reg + r), "");
            /* Steps K·k … K·k + K − 1 (K = kstep) of half h's rows (from row 64h of A) start at their first cell. */
            const IrCoreLayout *a = &w->a_layout, *b = &w->b_layout;
            int64_t first_step = (int64_t)kstep * k;
            args[regs] = core_descriptor(g, w->a, a, ir_core_cell(a, 64 * (int64_t)h, first_step), group_at);
            args[regs + 1] = core_descriptor(g, w->b, b, ir_core_cell(b, 0, first_step), NULL);
            LLVMValueRef asm_fn = LLVMGetInlineAsm(fn, text, strlen(text), constraints, strlen(constraints), 1, 0,
                                                   LLVMInlineAsmDialectATT, 0);
            LLVMValueRef d = LLVMBuildCall2(g->b, fn, asm_fn, args, regs + 2, "");
            for (unsigned r = 0; r < regs; r++)
                LLVMBuildStore(g->b, LLVMBuildExtractValue(g->b, d, r, ""), cgl_thread_register(g, g->f32, w->c, first_reg + r));
        }
    free(fields);
    free(params);
    free(args);
    free(text);
    free(constraints);
}
