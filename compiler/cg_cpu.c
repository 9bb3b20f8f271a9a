/* cg_cpu.c — the loop IR to native code for the CPU, through the LLVM 19 C API.
 *
 * What it does.  Every routine becomes a function `int MODULE_ROUTINE(tsr_state *s)` that checks
 * the index symbols, reads the state's buffer and symbol arrays, and runs its top-level
 * statements in order.  Each top-level loop nest (with the statements that share its locals) is
 * an internal function whose buffers are `noalias` parameters; when the nest's outer loop is
 * parallel (it spans only cells of the left side, docs/ir.md) and the nest is big enough, the
 * routine hands the outer range to the runtime's thread pool (tsr_parallel_for) through a small
 * trampoline; otherwise it calls the nest directly and LLVM inlines it.  Scalar operations are
 * emitted exactly as ir.c's scalar_op_eval() computes them — no fast-math flags, so no
 * reassociation or contraction: a reduction adds in the order of its loop, like the reference
 * executor, and results match it bit for bit.  The transcendental functions call libm (expf,
 * logf, tanhf, powf); sqrt is the correctly rounded instruction.
 *
 * The model image (image.c) is a constant array `MODULE__image`; generated headers and `main`
 * pass it to tsr_state_create().  `main`, for executables, follows the program plan (plan.c):
 * loops binding index symbols, routine calls, prints through tsr_state_print().
 *
 * The module is verified, optimised with the `default<On>` pipeline (loop vectorisation on, the
 * SLP vectorizer off: LLVM 19's miscompiles unrolled nests, docs/notes/llvm19-slp-miscompile.md)
 * for the target machine — the host CPU and its features unless --cpu/--target say
 * otherwise — and written as an object, assembly or LLVM IR.
 *
 * Requires: a verified IrProgram with its plan; image from image_build(). */
#include "cg_cpu.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "diag.h"

/* A nest at least this big (cells × loop iterations) is split over the thread pool, in chunks
 * of at least GRAIN_WORK. */
enum { PARALLEL_WORK = 1 << 16, GRAIN_WORK = 1 << 14 };

typedef struct Cg {
    const IrProgram *ir;
    const CgOptions *opt;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef i32, i64, f32, ptr, void_t, state_t;
    LLVMValueRef image, image_size;
    /* The nest being emitted. */
    LLVMValueRef fn;
    LLVMValueRef *buffer;   /* per buffer: its pointer in this nest, or NULL */
    LLVMValueRef *symbol;   /* per symbol: its value (i64), loaded on entry */
    LLVMValueRef *iter;     /* per iterator: its current value */
    LLVMValueRef *local;    /* per local: an alloca */
    LLVMValueRef syms_arg;
} Cg;

const char *cg_c_name(Arena *arena, const char *name) {
    size_t n = strlen(name);
    char *s = arena_alloc(arena, n + 2);
    size_t k = 0;
    if (n == 0 || isdigit((unsigned char)name[0])) s[k++] = '_';
    for (size_t i = 0; i < n; i++) s[k++] = isalnum((unsigned char)name[i]) ? name[i] : '_';
    s[k] = 0;
    return s;
}

/* ---- Declarations of runtime and libm functions ------------------------------------------------ */

static LLVMValueRef declare(Cg *g, const char *name, LLVMTypeRef type) {
    LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
    return f ? f : LLVMAddFunction(g->mod, name, type);
}

static LLVMValueRef call(Cg *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, unsigned n,
                         LLVMValueRef *args) {
    LLVMTypeRef type = LLVMFunctionType(ret, params, n, 0);
    LLVMValueRef f = declare(g, name, type);
    return LLVMBuildCall2(g->b, type, f, args, n, "");
}

static LLVMValueRef libm1(Cg *g, const char *name, LLVMValueRef x) {
    LLVMTypeRef p[1] = {g->f32};
    return call(g, name, g->f32, p, 1, &x);
}

static LLVMValueRef libm2(Cg *g, const char *name, LLVMValueRef x, LLVMValueRef y) {
    LLVMTypeRef p[2] = {g->f32, g->f32};
    LLVMValueRef a[2] = {x, y};
    return call(g, name, g->f32, p, 2, a);
}

static LLVMValueRef fconst(Cg *g, double v) { return LLVMConstReal(g->f32, (float)v); }
static LLVMValueRef iconst(Cg *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }

/* ---- Scalar expressions --------------------------------------------------------------------------- */

static LLVMValueRef flag(Cg *g, LLVMValueRef cond) { return LLVMBuildSelect(g->b, cond, fconst(g, 1), fconst(g, 0), ""); }

static LLVMValueRef scalar_op(Cg *g, ScalarOp op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMBuilderRef B = g->b;
    LLVMValueRef zero = fconst(g, 0);
    switch (op) {
    case SOP_ADD: return LLVMBuildFAdd(B, a, b, "");
    case SOP_SUB: return LLVMBuildFSub(B, a, b, "");
    case SOP_MUL: return LLVMBuildFMul(B, a, b, "");
    case SOP_DIV: return LLVMBuildFDiv(B, a, b, "");
    case SOP_POW: return libm2(g, "powf", a, b);
    case SOP_LT: return flag(g, LLVMBuildFCmp(B, LLVMRealOLT, a, b, ""));
    case SOP_EQ: return flag(g, LLVMBuildFCmp(B, LLVMRealOEQ, a, b, ""));
    case SOP_MAX: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, a, b, ""), a, b, "");
    case SOP_MIN: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, a, b, ""), a, b, "");
    case SOP_RELU_GATE: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, a, zero, ""), b, zero, "");
    case SOP_SAT01_GATE: {
        LLVMValueRef in = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOGT, a, zero, ""),
                                       LLVMBuildFCmp(B, LLVMRealOLT, a, fconst(g, 1), ""), "");
        return LLVMBuildSelect(B, in, b, zero, "");
    }
    case SOP_OR:
        return flag(g, LLVMBuildOr(B, LLVMBuildFCmp(B, LLVMRealUNE, a, zero, ""),
                                   LLVMBuildFCmp(B, LLVMRealUNE, b, zero, ""), ""));
    case SOP_AND:
        return flag(g, LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealUNE, a, zero, ""),
                                    LLVMBuildFCmp(B, LLVMRealUNE, b, zero, ""), ""));
    case SOP_NEG: return LLVMBuildFNeg(B, a, "");
    case SOP_RELU: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, a, zero, ""), a, zero, "");
    case SOP_EXP: return libm1(g, "expf", a);
    case SOP_LOG: return libm1(g, "logf", a);
    case SOP_SQRT: {
        LLVMTypeRef p[1] = {g->f32};
        return call(g, "llvm.sqrt.f32", g->f32, p, 1, &a);
    }
    case SOP_TANH: return libm1(g, "tanhf", a);
    case SOP_SIGMOID:
        return LLVMBuildFDiv(B, fconst(g, 1), LLVMBuildFAdd(B, fconst(g, 1), libm1(g, "expf", LLVMBuildFNeg(B, a, "")), ""),
                             "");
    case SOP_WHERE: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNE, a, zero, ""), b, c, "");
    case SOP_COUNT: break;
    }
    return zero;
}

/* The address of buffer[index…] (row-major over the buffer's memory-order dims). */
static LLVMValueRef address(Cg *g, uint32_t buffer, const IrIndex *index) {
    const IrBuffer *buf = &g->ir->buffers[buffer];
    LLVMValueRef flat = iconst(g, 0);
    for (uint32_t a = 0; a < buf->rank; a++) {
        LLVMValueRef i = iconst(g, index[a].offset);
        for (uint32_t t = 0; t < index[a].term_count; t++)
            i = LLVMBuildNSWAdd(g->b, i, LLVMBuildNSWMul(g->b, iconst(g, index[a].terms[t].coef),
                                                         g->iter[index[a].terms[t].iter], ""), "");
        if (index[a].symbol) i = LLVMBuildNSWAdd(g->b, i, g->symbol[ir_symbol(g->ir, index[a].symbol)], "");
        flat = LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, flat, iconst(g, (int64_t)buf->dims[a]), ""), i, "");
    }
    LLVMValueRef idx[1] = {flat};
    return LLVMBuildInBoundsGEP2(g->b, g->f32, g->buffer[buffer], idx, 1, "");
}

static LLVMValueRef expr(Cg *g, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST: return fconst(g, e->value);
    case IR_LOCAL: return LLVMBuildLoad2(g->b, g->f32, g->local[e->local], "");
    case IR_SYMBOL: return LLVMBuildSIToFP(g->b, g->symbol[ir_symbol(g->ir, e->symbol)], g->f32, "");
    case IR_LOAD: {
        LLVMValueRef v = LLVMBuildLoad2(g->b, g->f32, address(g, e->buffer, e->index), "");
        LLVMSetAlignment(v, 4);
        return v;
    }
    case IR_OP: {
        LLVMValueRef x[3] = {NULL, NULL, NULL};
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) x[i] = expr(g, e->args[i]);
        return scalar_op(g, e->op, x[0], x[1], x[2]);
    }
    }
    return fconst(g, 0);
}

/* ---- Statements and loops -------------------------------------------------------------------------- */

static void block(Cg *g, const IrBlock *blk);

/* for iter in [lo, hi): body — rotated: a guard, then a do-while. */
static void loop(Cg *g, const IrStmt *s, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBasicBlockRef entry = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "loop");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, lo, hi, ""), body, done);
    LLVMPositionBuilderAtEnd(g->b, body);
    LLVMValueRef i = LLVMBuildPhi(g->b, g->i64, "i");
    g->iter[s->iter] = i;
    block(g, &s->body);
    LLVMValueRef next = LLVMBuildNSWAdd(g->b, i, iconst(g, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, next, hi, ""), body, done);
    LLVMValueRef in_values[2] = {lo, next};
    LLVMBasicBlockRef in_blocks[2] = {entry, latch};
    LLVMAddIncoming(i, in_values, in_blocks, 2);
    LLVMPositionBuilderAtEnd(g->b, done);
}

static void stmt(Cg *g, const IrStmt *s) {
    switch (s->kind) {
    case IR_LOOP: loop(g, s, iconst(g, 0), iconst(g, (int64_t)s->extent)); break;
    case IR_STORE: {
        LLVMValueRef v = expr(g, s->value);
        LLVMValueRef st = LLVMBuildStore(g->b, v, address(g, s->buffer, s->index));
        LLVMSetAlignment(st, 4);
        break;
    }
    case IR_SET_LOCAL: LLVMBuildStore(g->b, expr(g, s->value), g->local[s->local]); break;
    }
}

static void block(Cg *g, const IrBlock *blk) {
    for (uint32_t i = 0; i < blk->count; i++) stmt(g, blk->items[i]);
}

/* ---- What a nest touches ----------------------------------------------------------------------------- */

typedef struct Uses {
    bool *buffer;   /* per buffer */
    bool *symbol;   /* per symbol */
    bool *local;    /* per local */
} Uses;

static void uses_index(const IrProgram *ir, Uses *u, uint32_t buffer, const IrIndex *index) {
    u->buffer[buffer] = true;
    for (uint32_t a = 0; a < ir->buffers[buffer].rank; a++)
        if (index[a].symbol) u->symbol[ir_symbol(ir, index[a].symbol)] = true;
}

static void uses_expr(const IrProgram *ir, Uses *u, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST: break;
    case IR_LOCAL: u->local[e->local] = true; break;
    case IR_SYMBOL: u->symbol[ir_symbol(ir, e->symbol)] = true; break;
    case IR_LOAD: uses_index(ir, u, e->buffer, e->index); break;
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) uses_expr(ir, u, e->args[i]);
        break;
    }
}

static void uses_stmt(const IrProgram *ir, Uses *u, const IrStmt *s) {
    switch (s->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++) uses_stmt(ir, u, s->body.items[i]);
        break;
    case IR_STORE:
        uses_index(ir, u, s->buffer, s->index);
        uses_expr(ir, u, s->value);
        break;
    case IR_SET_LOCAL:
        u->local[s->local] = true;
        uses_expr(ir, u, s->value);
        break;
    }
}

/* Cells × iterations of a statement. */
static double work(const IrStmt *s) {
    if (s->kind != IR_LOOP) return 1;
    double w = 0;
    for (uint32_t i = 0; i < s->body.count; i++) w += work(s->body.items[i]);
    return (double)s->extent * (w > 0 ? w : 1);
}

/* ---- Nests and routines ---------------------------------------------------------------------------- */

/* Top-level statements [first, first+count) of a function, grouped because they share locals
 * (a full reduction: set the local, loop, store). */
typedef struct Nest {
    const IrFunction *fn;
    uint32_t first, count;
    uint32_t *buffers;      /* the buffers it touches, in id order */
    uint32_t buffer_count;
    bool parallel;          /* one parallel loop, big enough for the pool */
    int64_t extent, grain;
    LLVMValueRef body;      /* void (i64 lo, i64 hi, ptr syms, ptr noalias buffers…) */
    LLVMValueRef range;     /* void (ptr ctx, i64 lo, i64 hi), when parallel */
} Nest;

static LLVMTypeRef body_type(Cg *g, uint32_t buffers) {
    LLVMTypeRef *p = calloc(buffers + 3, sizeof *p);
    if (!p) diag_fatal_oom();
    p[0] = g->i64;
    p[1] = g->i64;
    for (uint32_t i = 0; i < buffers + 1; i++) p[2 + i] = g->ptr;
    LLVMTypeRef t = LLVMFunctionType(g->void_t, p, buffers + 3, 0);
    free(p);
    return t;
}

static void set_attr(Cg *g, LLVMValueRef fn, unsigned index, const char *name) {
    LLVMAttributeRef a = LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName(name, strlen(name)), 0);
    LLVMAddAttributeAtIndex(fn, index, a);
}

static void emit_nest_body(Cg *g, Nest *n, const char *name) {
    const IrProgram *ir = g->ir;
    n->body = LLVMAddFunction(g->mod, name, body_type(g, n->buffer_count));
    LLVMSetLinkage(n->body, LLVMInternalLinkage);
    set_attr(g, n->body, LLVMAttributeFunctionIndex, "nounwind");
    for (uint32_t i = 0; i < n->buffer_count; i++) set_attr(g, n->body, 4 + i, "noalias"); /* params are 1-based */
    g->fn = n->body;
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, n->body, "entry");
    LLVMPositionBuilderAtEnd(g->b, entry);
    memset(g->buffer, 0, (ir->buffer_count + 1) * sizeof *g->buffer);
    for (uint32_t i = 0; i < n->buffer_count; i++) g->buffer[n->buffers[i]] = LLVMGetParam(n->body, 3 + i);
    g->syms_arg = LLVMGetParam(n->body, 2);
    for (uint32_t s = 0; s < ir->symbol_count; s++) {
        LLVMValueRef idx[1] = {iconst(g, s)};
        g->symbol[s] = LLVMBuildLoad2(g->b, g->i64, LLVMBuildInBoundsGEP2(g->b, g->i64, g->syms_arg, idx, 1, ""), "");
    }
    for (uint32_t l = 0; l < n->fn->local_count; l++) g->local[l] = LLVMBuildAlloca(g->b, g->f32, "acc");
    const IrStmt *first = n->fn->body.items[n->first];
    if (n->count == 1 && first->kind == IR_LOOP) {
        loop(g, first, LLVMGetParam(n->body, 0), LLVMGetParam(n->body, 1));
    } else {
        for (uint32_t i = 0; i < n->count; i++) stmt(g, n->fn->body.items[n->first + i]);
    }
    LLVMBuildRetVoid(g->b);
}

/* void range(ctx, lo, hi): ctx = {buffers, symbols} of the state; calls the body. */
static void emit_nest_range(Cg *g, Nest *n, const char *name) {
    LLVMTypeRef p[3] = {g->ptr, g->i64, g->i64};
    n->range = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->void_t, p, 3, 0));
    LLVMSetLinkage(n->range, LLVMInternalLinkage);
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, n->range, "entry"));
    LLVMValueRef ctx = LLVMGetParam(n->range, 0);
    LLVMValueRef bufs = LLVMBuildLoad2(g->b, g->ptr, ctx, "");
    LLVMValueRef one[1] = {iconst(g, 1)};
    LLVMValueRef syms = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildInBoundsGEP2(g->b, g->ptr, ctx, one, 1, ""), "");
    LLVMValueRef *args = calloc(n->buffer_count + 3, sizeof *args);
    if (!args) diag_fatal_oom();
    args[0] = LLVMGetParam(n->range, 1);
    args[1] = LLVMGetParam(n->range, 2);
    args[2] = syms;
    for (uint32_t i = 0; i < n->buffer_count; i++) {
        LLVMValueRef idx[1] = {iconst(g, n->buffers[i])};
        args[3 + i] = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildInBoundsGEP2(g->b, g->ptr, bufs, idx, 1, ""), "");
    }
    LLVMBuildCall2(g->b, body_type(g, n->buffer_count), n->body, args, n->buffer_count + 3, "");
    LLVMBuildRetVoid(g->b);
    free(args);
}

/* Split a function's top-level statements into nests (statements sharing a local stay
 * together) and emit each. */
static Nest *make_nests(Cg *g, const IrFunction *fn, const char *base, uint32_t *count_out) {
    const IrProgram *ir = g->ir;
    uint32_t count = 0, locals = fn->local_count + 1;
    Nest *nests = calloc(fn->body.count + 1, sizeof *nests);
    Uses u = {calloc(ir->buffer_count + 1, 1), calloc(ir->symbol_count + 1, 1), calloc(locals, 1)};
    bool *nest_locals = calloc(locals, 1);
    if (!nests || !u.buffer || !u.symbol || !u.local || !nest_locals) diag_fatal_oom();
    /* Group: a statement that touches a local of the current nest belongs to it. */
    for (uint32_t i = 0; i < fn->body.count; i++) {
        memset(u.local, 0, locals);
        uses_stmt(ir, &u, fn->body.items[i]);
        bool shared = false;
        for (uint32_t l = 0; l < fn->local_count && count && !shared; l++) shared = u.local[l] && nest_locals[l];
        if (!shared) {
            nests[count++] = (Nest){.fn = fn, .first = i};
            memset(nest_locals, 0, locals);
        }
        nests[count - 1].count++;
        for (uint32_t l = 0; l < fn->local_count; l++) nest_locals[l] |= u.local[l];
    }
    /* Emit each nest with the buffers its statements touch. */
    for (uint32_t k = 0; k < count; k++) {
        Nest *n = &nests[k];
        memset(u.buffer, 0, ir->buffer_count + 1);
        for (uint32_t i = 0; i < n->count; i++) uses_stmt(ir, &u, fn->body.items[n->first + i]);
        n->buffers = calloc(ir->buffer_count + 1, sizeof *n->buffers);
        if (!n->buffers) diag_fatal_oom();
        for (uint32_t b = 0; b < ir->buffer_count; b++)
            if (u.buffer[b]) n->buffers[n->buffer_count++] = b;
        const IrStmt *s = fn->body.items[n->first];
        n->extent = s->kind == IR_LOOP ? (int64_t)s->extent : 1;
        double w = work(s);
        n->parallel = n->count == 1 && s->kind == IR_LOOP && s->parallel && s->extent >= 2 && w >= PARALLEL_WORK;
        if (n->parallel) n->grain = (int64_t)(GRAIN_WORK / (w / (double)s->extent)) + 1;
        emit_nest_body(g, n, arena_printf(ir->arena, "%s.nest%u", base, k));
        if (n->parallel) emit_nest_range(g, n, arena_printf(ir->arena, "%s.range%u", base, k));
    }
    free(u.buffer);
    free(u.symbol);
    free(u.local);
    free(nest_locals);
    *count_out = count;
    return nests;
}

static void free_nests(Nest *nests, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) free(nests[i].buffers);
    free(nests);
}

/* int NAME(tsr_state *s): check symbols, then run the nests in order. */
static LLVMValueRef emit_routine(Cg *g, uint32_t f) {
    const IrFunction *fn = &g->ir->functions[f];
    bool exported = g->ir->exported[f];
    const char *cname = cg_c_name(g->ir->arena, fn->name);
    const char *name = arena_printf(g->ir->arena, exported ? "%s_%s" : "%s__%s", g->opt->module, cname);
    uint32_t nest_count;
    Nest *nests = make_nests(g, fn, name, &nest_count);
    LLVMTypeRef p[1] = {g->ptr};
    LLVMValueRef r = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->i32, p, 1, 0));
    if (!exported) LLVMSetLinkage(r, LLVMInternalLinkage);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, r, "entry");
    LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(g->ctx, r, "bad_symbols");
    LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(g->ctx, r, "run");
    LLVMPositionBuilderAtEnd(g->b, entry);
    LLVMValueRef state = LLVMGetParam(r, 0);
    LLVMValueRef status = call(g, "tsr_state_check_symbols", g->i32, p, 1, &state);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, status, LLVMConstInt(g->i32, 0, 0), ""), bad, run);
    LLVMPositionBuilderAtEnd(g->b, bad);
    LLVMBuildRet(g->b, status);
    LLVMPositionBuilderAtEnd(g->b, run);
    LLVMValueRef bufs = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildStructGEP2(g->b, g->state_t, state, 0, ""), "buffers");
    LLVMValueRef syms = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildStructGEP2(g->b, g->state_t, state, 1, ""), "symbols");
    LLVMValueRef ctx = NULL;
    for (uint32_t i = 0; i < nest_count; i++) {
        Nest *n = &nests[i];
        if (n->parallel) {
            if (!ctx) {
                ctx = LLVMBuildAlloca(g->b, LLVMArrayType(g->ptr, 2), "ctx");
                LLVMBuildStore(g->b, bufs, ctx);
                LLVMValueRef one[1] = {iconst(g, 1)};
                LLVMBuildStore(g->b, syms, LLVMBuildInBoundsGEP2(g->b, g->ptr, ctx, one, 1, ""));
            }
            LLVMTypeRef pp[4] = {g->ptr, g->ptr, g->i64, g->i64};
            LLVMValueRef a[4] = {n->range, ctx, iconst(g, n->extent), iconst(g, n->grain)};
            call(g, "tsr_parallel_for", g->void_t, pp, 4, a);
            continue;
        }
        LLVMValueRef *args = calloc(n->buffer_count + 3, sizeof *args);
        if (!args) diag_fatal_oom();
        args[0] = iconst(g, 0);
        args[1] = iconst(g, n->extent);
        args[2] = syms;
        for (uint32_t k = 0; k < n->buffer_count; k++) {
            LLVMValueRef idx[1] = {iconst(g, n->buffers[k])};
            args[3 + k] = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildInBoundsGEP2(g->b, g->ptr, bufs, idx, 1, ""), "");
        }
        LLVMBuildCall2(g->b, body_type(g, n->buffer_count), n->body, args, n->buffer_count + 3, "");
        free(args);
    }
    LLVMBuildRet(g->b, LLVMConstInt(g->i32, 0, 0));
    free_nests(nests, nest_count);
    return r;
}

/* ---- main ------------------------------------------------------------------------------------------ */

typedef struct MainCtx {
    LLVMValueRef fn, state, argv0, *routines;
    LLVMBasicBlockRef fail;
} MainCtx;

static void main_block(Cg *g, MainCtx *m, const IrMainStmt *stmts, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) {
        const IrMainStmt *s = &stmts[i];
        if (s->kind == IRM_FOR) {
            /* v = from; while (up ? v <= to : v >= to) { symbols[k] = v; body; v ± 1 } */
            LLVMValueRef var = LLVMBuildAlloca(g->b, g->i64, "counter");
            LLVMBuildStore(g->b, iconst(g, s->from), var);
            LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "for");
            LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "for_body");
            LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "for_done");
            LLVMBuildBr(g->b, head);
            LLVMPositionBuilderAtEnd(g->b, head);
            LLVMValueRef v = LLVMBuildLoad2(g->b, g->i64, var, "");
            LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, s->down ? LLVMIntSGE : LLVMIntSLE, v, iconst(g, s->to), ""), body,
                            done);
            LLVMPositionBuilderAtEnd(g->b, body);
            LLVMValueRef syms = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildStructGEP2(g->b, g->state_t, m->state, 1, ""), "");
            LLVMValueRef idx[1] = {iconst(g, s->symbol)};
            LLVMBuildStore(g->b, v, LLVMBuildInBoundsGEP2(g->b, g->i64, syms, idx, 1, ""));
            main_block(g, m, s->body, s->body_count);
            LLVMValueRef cur = LLVMBuildLoad2(g->b, g->i64, var, "");
            LLVMBuildStore(g->b, LLVMBuildAdd(g->b, cur, iconst(g, s->down ? -1 : 1), ""), var);
            LLVMBuildBr(g->b, head);
            LLVMPositionBuilderAtEnd(g->b, done);
            continue;
        }
        LLVMValueRef status;
        if (s->kind == IRM_RUN) {
            LLVMTypeRef p[1] = {g->ptr};
            status = LLVMBuildCall2(g->b, LLVMFunctionType(g->i32, p, 1, 0), m->routines[s->function], &m->state, 1, "");
        } else {
            LLVMTypeRef p[2] = {g->ptr, g->i32};
            LLVMValueRef a[2] = {m->state, LLVMConstInt(g->i32, s->print, 0)};
            status = call(g, "tsr_state_print", g->i32, p, 2, a);
        }
        LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "next");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, status, LLVMConstInt(g->i32, 0, 0), ""), m->fail, next);
        LLVMPositionBuilderAtEnd(g->b, next);
    }
}

static void emit_main(Cg *g, LLVMValueRef *routines) {
    LLVMTypeRef p[2] = {g->i32, g->ptr};
    MainCtx m = {.routines = routines};
    m.fn = LLVMAddFunction(g->mod, "main", LLVMFunctionType(g->i32, p, 2, 0));
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, m.fn, "entry");
    LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(g->ctx, m.fn, "run");
    m.fail = LLVMAppendBasicBlockInContext(g->ctx, m.fn, "fail");
    LLVMPositionBuilderAtEnd(g->b, entry);
    m.argv0 = LLVMBuildLoad2(g->b, g->ptr, LLVMGetParam(m.fn, 1), "argv0");
    LLVMTypeRef cp[3] = {g->ptr, g->i64, g->i64};
    LLVMValueRef ca[3] = {g->image, g->image_size, LLVMConstInt(g->i64, g->ir->seed, 0)};
    m.state = call(g, "tsr_state_create", g->ptr, cp, 3, ca);
    LLVMBuildCondBr(g->b, LLVMBuildIsNull(g->b, m.state, ""), m.fail, run);
    LLVMPositionBuilderAtEnd(g->b, run);
    main_block(g, &m, g->ir->main, g->ir->main_count);
    LLVMTypeRef ep[2] = {g->ptr, g->ptr};
    LLVMValueRef ea[2] = {m.state, m.argv0};
    LLVMBuildRet(g->b, call(g, "tsr_main_end", g->i32, ep, 2, ea));
    LLVMPositionBuilderAtEnd(g->b, m.fail);
    LLVMTypeRef fp[2] = {g->ptr, g->ptr};
    LLVMValueRef fa[2] = {m.state, m.argv0};
    LLVMBuildRet(g->b, call(g, "tsr_main_fail", g->i32, fp, 2, fa));
}

/* ---- Target and output ---------------------------------------------------------------------------------- */

static LLVMTargetMachineRef target_machine(const CgOptions *o) {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeX86AsmParser();
    char *host_triple = LLVMGetDefaultTargetTriple();
    const char *triple = o->triple ? o->triple : host_triple;
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        diag_error_noloc("unknown target '%s': %s (this tsrc generates x86-64 code: --target=x86_64-pc-linux-gnu)",
                         triple, err ? err : "");
        LLVMDisposeMessage(err);
        LLVMDisposeMessage(host_triple);
        return NULL;
    }
    char *host_cpu = LLVMGetHostCPUName(), *host_features = LLVMGetHostCPUFeatures();
    bool native = !o->cpu || strcmp(o->cpu, "native") == 0;
    const char *cpu = native ? (o->triple ? "x86-64" : host_cpu) : o->cpu;
    const char *features = native && !o->triple ? host_features : "";
    LLVMCodeGenOptLevel level = o->opt_level == 0 ? LLVMCodeGenLevelNone : o->opt_level == 1 ? LLVMCodeGenLevelLess
                              : o->opt_level == 2 ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelAggressive;
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, features, level, LLVMRelocPIC,
                                                      LLVMCodeModelDefault);
    LLVMDisposeMessage(host_triple);
    LLVMDisposeMessage(host_cpu);
    LLVMDisposeMessage(host_features);
    if (!tm) diag_error_noloc("cannot create a target machine for '%s' (cpu '%s')", triple, cpu);
    return tm;
}

bool cg_cpu_emit(const IrProgram *ir, const unsigned char *image, size_t image_size, const CgOptions *o,
                 CgFormat format, const char *path) {
    LLVMTargetMachineRef tm = target_machine(o);
    if (!tm) return false;
    Cg g = {.ir = ir, .opt = o};
    g.ctx = LLVMContextCreate();
    g.mod = LLVMModuleCreateWithNameInContext(o->module, g.ctx);
    g.b = LLVMCreateBuilderInContext(g.ctx);
    g.i32 = LLVMInt32TypeInContext(g.ctx);
    g.i64 = LLVMInt64TypeInContext(g.ctx);
    g.f32 = LLVMFloatTypeInContext(g.ctx);
    g.ptr = LLVMPointerTypeInContext(g.ctx, 0);
    g.void_t = LLVMVoidTypeInContext(g.ctx);
    LLVMTypeRef fields[4] = {g.ptr, g.ptr, g.ptr, g.i64}; /* tsr_state: buffers, symbols, model, seed */
    g.state_t = LLVMStructTypeInContext(g.ctx, fields, 4, 0);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(g.mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(g.mod, layout);

    /* The model image and its size. */
    const char *name = arena_printf(ir->arena, "%s__image", o->module);
    LLVMValueRef init = LLVMConstStringInContext(g.ctx, (const char *)image, (unsigned)image_size, 1);
    g.image = LLVMAddGlobal(g.mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g.image, init);
    LLVMSetGlobalConstant(g.image, 1);
    LLVMSetAlignment(g.image, 16);
    name = arena_printf(ir->arena, "%s__image_size", o->module);
    g.image_size = LLVMConstInt(g.i64, image_size, 0);
    LLVMValueRef size_global = LLVMAddGlobal(g.mod, g.i64, name);
    LLVMSetInitializer(size_global, g.image_size);
    LLVMSetGlobalConstant(size_global, 1);

    g.buffer = calloc(ir->buffer_count + 1, sizeof *g.buffer);
    g.symbol = calloc(ir->symbol_count + 1, sizeof *g.symbol);
    uint32_t iters = 1, locals = 1;
    for (uint32_t f = 0; f < ir->function_count; f++) {
        if (ir->functions[f].iter_count > iters) iters = ir->functions[f].iter_count;
        if (ir->functions[f].local_count > locals) locals = ir->functions[f].local_count;
    }
    g.iter = calloc(iters, sizeof *g.iter);
    g.local = calloc(locals, sizeof *g.local);
    LLVMValueRef *routines = calloc(ir->function_count + 1, sizeof *routines);
    if (!g.buffer || !g.symbol || !g.iter || !g.local || !routines) diag_fatal_oom();
    for (uint32_t f = 0; f < ir->function_count; f++) routines[f] = emit_routine(&g, f);
    if (o->with_main) emit_main(&g, routines);

    bool ok = true;
    char *err = NULL;
    if (LLVMVerifyModule(g.mod, LLVMReturnStatusAction, &err)) {
        diag_error_noloc("internal error: the generated LLVM module is malformed: %s", err);
        ok = false;
    }
    LLVMDisposeMessage(err);
    err = NULL;
    if (ok) {
        /* LLVM 19's SLP vectorizer gives wrong cells on some fully unrolled nests (a shuffle mask
         * with poison lanes: docs/notes/llvm19-slp-miscompile.md, tests/native/avx512_slp_repro.ll).
         * default<O2>/<O3> override the SLP setting of the options below, so the pass is switched
         * off through its own LLVM option (process-wide, set once). */
        static bool slp_off;
        if (!slp_off) {
            const char *args[] = {"tsrc", "-vectorize-slp=false"};
            LLVMParseCommandLineOptions(2, args, "");
            slp_off = true;
        }
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        LLVMPassBuilderOptionsSetLoopVectorization(po, o->opt_level >= 2);
        LLVMPassBuilderOptionsSetSLPVectorization(po, false);
        LLVMPassBuilderOptionsSetLoopInterleaving(po, o->opt_level >= 2);
        LLVMPassBuilderOptionsSetLoopUnrolling(po, o->opt_level >= 2);
        char pipeline[32];
        snprintf(pipeline, sizeof pipeline, "default<O%d>", o->opt_level);
        LLVMErrorRef e = LLVMRunPasses(g.mod, pipeline, tm, po);
        if (e) {
            char *m = LLVMGetErrorMessage(e);
            diag_error_noloc("internal error: LLVM's %s pipeline failed: %s", pipeline, m);
            LLVMDisposeErrorMessage(m);
            ok = false;
        }
        LLVMDisposePassBuilderOptions(po);
    }
    if (ok) {
        if (format == CG_LLVM) {
            if (LLVMPrintModuleToFile(g.mod, path, &err)) {
                diag_error_noloc("cannot write '%s': %s", o->shown_path ? o->shown_path : path, err ? err : "");
                ok = false;
            }
        } else if (LLVMTargetMachineEmitToFile(tm, g.mod, path, format == CG_ASM ? LLVMAssemblyFile : LLVMObjectFile,
                                               &err)) {
            diag_error_noloc("cannot write '%s': %s", o->shown_path ? o->shown_path : path, err ? err : "");
            ok = false;
        }
        LLVMDisposeMessage(err);
    }
    free(routines);
    free(g.buffer);
    free(g.symbol);
    free(g.iter);
    free(g.local);
    LLVMDisposeBuilder(g.b);
    LLVMDisposeModule(g.mod);
    LLVMDisposeTargetData(layout);
    LLVMContextDispose(g.ctx);
    LLVMDisposeTargetMachine(tm);
    return ok;
}
