/* cg_values.c — the LLVM values every emitter builds from (cg_llvm.h): integer and float
 * constants, broadcasts to vectors, calls of external functions and of LLVM's overloaded
 * intrinsics.
 *
 * What it does: small builders that cg_llvm.c (statements, loads, scalar operations) and
 * cg_approx.c (exp, log, tanh) share, so that neither calls into the other.
 *
 * Requires: a CgLlvm whose module and builder cgl_init() set up. */
#include "cg/cg_llvm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"

static bool is_vector(LLVMValueRef v) { return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind; }

LLVMValueRef cgl_iconst(CgLlvm *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }

static LLVMValueRef declare(CgLlvm *g, const char *name, LLVMTypeRef type) {
    LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
    return f ? f : LLVMAddFunction(g->mod, name, type);
}

LLVMValueRef cgl_call(CgLlvm *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, unsigned n,
                      LLVMValueRef *args) {
    LLVMTypeRef type = LLVMFunctionType(ret, params, n, 0);
    return LLVMBuildCall2(g->b, type, declare(g, name, type), args, n, "");
}

void cgl_set_attr(CgLlvm *g, LLVMValueRef fn, unsigned index, const char *name) {
    LLVMAttributeRef a = LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName(name, strlen(name)), 0);
    LLVMAddAttributeAtIndex(fn, index, a);
}

/* v as a vector of the current lane count (a scalar is broadcast), of floats or of integers. */
LLVMValueRef cgl_widen(CgLlvm *g, LLVMValueRef v) {
    if (is_vector(v)) return v;
    LLVMTypeRef type = LLVMVectorType(LLVMTypeOf(v), g->lanes);
    LLVMValueRef one = LLVMBuildInsertElement(g->b, LLVMGetUndef(type), v, LLVMConstInt(g->i32, 0, 0), "");
    LLVMValueRef *zeros = calloc(g->lanes, sizeof *zeros);
    if (!zeros) diag_fatal_oom();
    for (unsigned i = 0; i < g->lanes; i++) zeros[i] = LLVMConstInt(g->i32, 0, 0);
    LLVMValueRef mask = LLVMConstVector(zeros, g->lanes);
    free(zeros);
    return LLVMBuildShuffleVector(g->b, one, LLVMGetUndef(type), mask, "");
}

/* Whether v is a double or a vector of doubles (an f64 value; every other value is float). */
static bool is_double(LLVMValueRef v) {
    LLVMTypeRef t = LLVMTypeOf(v);
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) t = LLVMGetElementType(t);
    return LLVMGetTypeKind(t) == LLVMDoubleTypeKind;
}

/* A float constant of v's shape (scalar or vector) and type (double for an f64 value). */
LLVMValueRef cgl_fconst_like(CgLlvm *g, LLVMValueRef like, double v) {
    LLVMValueRef c = like && is_double(like) ? LLVMConstReal(g->f64, v) : LLVMConstReal(g->f32, (float)v);
    return like && is_vector(like) ? cgl_widen(g, c) : c;
}

/* An LLVM intrinsic overloaded on float, double and vectors of them ("llvm.fma" → llvm.fma.f32,
 * llvm.fma.v16f32 or llvm.fma.f64). */
LLVMValueRef cgl_intrinsic(CgLlvm *g, const char *base, LLVMValueRef *args, unsigned n) {
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    LLVMTypeRef params[3] = {t, t, t};
    const char *element = is_double(args[0]) ? "f64" : "f32";
    char name[64];
    if (is_vector(args[0])) snprintf(name, sizeof name, "%s.v%u%s", base, g->lanes, element);
    else snprintf(name, sizeof name, "%s.%s", base, element);
    return cgl_call(g, name, t, params, n, args);
}

/* A GPU special register (llvm.nvvm.read.ptx.sreg.NAME), as i64. */
LLVMValueRef cgl_special_register(CgLlvm *g, const char *name) {
    char full[64];
    snprintf(full, sizeof full, "llvm.nvvm.read.ptx.sreg.%s", name);
    return LLVMBuildZExt(g->b, cgl_call(g, full, g->i32, NULL, 0, NULL), g->i64, "");
}

/* A thread's register `at` of per-thread buffer `buffer`, whose cells are of `type`. */
LLVMValueRef cgl_thread_register(CgLlvm *g, LLVMTypeRef type, uint32_t buffer, uint32_t at) {
    LLVMValueRef idx[1] = {cgl_iconst(g, at)};
    return LLVMBuildInBoundsGEP2(g->b, type, g->buffer[buffer], idx, 1, "");
}
