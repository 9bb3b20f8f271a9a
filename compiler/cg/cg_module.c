/* cg_module.c — the LLVM module every emitter fills, the target machine, and the pass pipeline
 * that turns a module into bytes (cg_llvm.h).
 *
 * What it does: cgl_init creates the context, module and builder a CgLlvm holds (and the types
 * it names), cgl_target_machine the machine for a triple and CPU, and cgl_finish verifies the
 * module, runs LLVM's pipeline at the chosen level and writes an object, assembly or LLVM IR.
 * The pipeline runs without LLVM's SLP vectorizer, which miscompiles some fully unrolled nests
 * in LLVM 19 (docs/notes/llvm19-slp-miscompile.md).  For a long program (cg_cpu.c, "Splitting")
 * it starts by merging functions of identical code: kernels whose literals the emitter lifted
 * into tables (CgLlvm.literals) then merge when they differ only in those values, and identical
 * tables are merged first, so a merged kernel whose callers all pass the same values still sees
 * them as constants.  Any error reported while the module was generated fails cgl_finish.
 *
 * Requires: LLVM's targets initialised for the triple asked for (cgl_target_machine does). */
#include "cg/cg_llvm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "base/diag.h"

void cgl_init(CgLlvm *g, const IrProgram *ir, const char *module, LLVMTargetMachineRef tm) {
    memset(g, 0, sizeof *g);
    g->ir = ir;
    g->errors_before = diag_error_count();
    g->ctx = LLVMContextCreate();
    g->mod = LLVMModuleCreateWithNameInContext(module, g->ctx);
    g->b = LLVMCreateBuilderInContext(g->ctx);
    g->i32 = LLVMInt32TypeInContext(g->ctx);
    g->i64 = LLVMInt64TypeInContext(g->ctx);
    g->f32 = LLVMFloatTypeInContext(g->ctx);
    g->f64 = LLVMDoubleTypeInContext(g->ctx);
    g->ptr = LLVMPointerTypeInContext(g->ctx, 0);
    g->void_t = LLVMVoidTypeInContext(g->ctx);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(g->mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(g->mod, layout);
    LLVMDisposeTargetData(layout);
    uint32_t iters = 1, locals = 1;
    for (uint32_t f = 0; f < ir->function_count; f++) {
        if (ir->functions[f].iter_count > iters) iters = ir->functions[f].iter_count;
        if (ir->functions[f].local_count > locals) locals = ir->functions[f].local_count;
    }
    g->buffer = calloc(ir->buffer_count + 1, sizeof *g->buffer);
    g->symbol = calloc(ir->symbol_count + 1, sizeof *g->symbol);
    g->iter = calloc(iters, sizeof *g->iter);
    g->local = calloc(locals, sizeof *g->local);
    g->thread_iter = calloc(iters, sizeof *g->thread_iter);
    if (!g->buffer || !g->symbol || !g->iter || !g->local || !g->thread_iter) diag_fatal_oom();
    g->lane_iter = UINT32_MAX;
}

void cgl_dispose(CgLlvm *g) {
    free(g->buffer);
    free(g->symbol);
    free(g->iter);
    free(g->local);
    free(g->thread_iter);
    free(g->lifted);
    LLVMDisposeBuilder(g->b);
    LLVMDisposeModule(g->mod);
    LLVMContextDispose(g->ctx);
}

/* x86-64 extensions that the model image does not record (runtime/image_format.h's
 * TSR_CPU_FEATURE_KINDS), so that the runtime could not refuse to run code using them on a CPU
 * without them: code is generated without them whatever --cpu names — znver4's SSE4a `insertq`,
 * run on an Intel CPU with every recorded extension, was a SIGILL.  The code tsrc generates has
 * no use for them (f32 and the half types compute with the recorded ones). */
static const char unrecorded_extensions[] =
    "-sse4a,-xop,-fma4,-tbm,-avx512fp16,-avx512vbmi,-avx512vbmi2,-avx512vnni,-avx512bitalg,-avx512vpopcntdq,"
    "-avx512ifma,-avx512vp2intersect,-avxvnni,-gfni,-vaes,-vpclmulqdq,-amx-tile,-amx-int8,-amx-bf16";

LLVMTargetMachineRef cgl_target_machine(const char *triple_opt, const char *cpu_opt, int opt_level) {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeX86AsmParser();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    char *host_triple = LLVMGetDefaultTargetTriple();
    const char *triple = triple_opt ? triple_opt : host_triple;
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        diag_error_noloc("unknown target '%s': %s (this tsrc generates x86-64 code, --target=x86_64-pc-linux-gnu, "
                         "and GPU code, --target=cuda)",
                         triple, err ? err : "");
        LLVMDisposeMessage(err);
        LLVMDisposeMessage(host_triple);
        return NULL;
    }
    char *host_cpu = LLVMGetHostCPUName(), *host_features = LLVMGetHostCPUFeatures();
    bool native = !cpu_opt || strcmp(cpu_opt, "native") == 0;
    const char *cpu = native ? (triple_opt ? "x86-64" : host_cpu) : cpu_opt;
    bool x86 = !triple_opt || strncmp(triple_opt, "x86_64", 6) == 0 || strncmp(triple_opt, "amd64", 5) == 0;
    size_t host_length = native && !triple_opt ? strlen(host_features) : 0;
    char *features = malloc(host_length + sizeof unrecorded_extensions + 1);
    if (!features) diag_fatal_oom();
    snprintf(features, host_length + sizeof unrecorded_extensions + 1, "%s%s%s", host_length ? host_features : "",
             host_length ? "," : "", x86 ? unrecorded_extensions : "");
    LLVMCodeGenOptLevel level = opt_level == 0 ? LLVMCodeGenLevelNone : opt_level == 1 ? LLVMCodeGenLevelLess
                              : opt_level == 2 ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelAggressive;
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, features, level, LLVMRelocPIC,
                                                      LLVMCodeModelDefault);
    if (!tm) diag_error_noloc("cannot create a target machine for '%s' (cpu '%s')", triple, cpu);
    LLVMDisposeMessage(host_triple);
    LLVMDisposeMessage(host_cpu);
    LLVMDisposeMessage(host_features);
    free(features);
    return tm;
}

/* The direct calls of `fn` (it is the callee of each). */
static uint32_t direct_calls(LLVMValueRef fn) {
    uint32_t n = 0;
    for (LLVMUseRef u = LLVMGetFirstUse(fn); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef user = LLVMGetUser(u);
        if (LLVMIsACallInst(user) && LLVMGetCalledValue(user) == fn) n++;
    }
    return n;
}

/* Merging functions of identical code (LLVM's ConstantMerge, then MergeFunctions).  In a long
 * program many kernels are the same code on other buffers (every layer of a deep network of
 * equal widths, every period of a repeated block) or with other literals (lifted into tables);
 * the pass keeps one copy and points the others' callers at it.  A function that gained callers so is marked noinline, or the inliner would copy it
 * back into every caller and the merging would save nothing.  Runs on the code as emitted,
 * before the optimisation pipeline. */
static bool merge_identical_functions(CgLlvm *g, LLVMTargetMachineRef tm) {
    uint32_t count = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f)) count++;
    LLVMValueRef *fns = calloc(count + 1, sizeof *fns);
    uint32_t *calls = calloc(count + 1, sizeof *calls);
    if (!fns || !calls) diag_fatal_oom();
    count = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f), count++) {
        fns[count] = f;
        calls[count] = direct_calls(f);
    }
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(g->mod, "constmerge,mergefunc", tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        diag_error_noloc("internal error: LLVM's mergefunc pass failed: %s", m);
        LLVMDisposeErrorMessage(m);
    } else {
        /* The survivors keep their order in the module's list, so one walk over both finds them. */
        uint32_t i = 0;
        for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f)) {
            while (i < count && fns[i] != f) i++;
            if (i < count && direct_calls(f) > calls[i]) cgl_set_attr(g, f, LLVMAttributeFunctionIndex, "noinline");
        }
    }
    free(fns);
    free(calls);
    return !e;
}

bool cgl_finish(CgLlvm *g, LLVMTargetMachineRef tm, int opt_level, bool merge_identical, CgFormat format,
                CgBytes *out) {
    out->data = NULL;
    out->size = 0;
    if (diag_error_count() != g->errors_before) return false; /* an internal error, reported */
    char *err = NULL;
    if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &err)) {
        diag_error_noloc("internal error: the generated LLVM module is malformed: %s", err);
        LLVMDisposeMessage(err);
        return false;
    }
    LLVMDisposeMessage(err);
    if (merge_identical && !merge_identical_functions(g, tm)) return false;
    /* LLVM 19's SLP vectorizer gives wrong cells on some fully unrolled nests (a shuffle mask
     * with poison lanes: docs/notes/llvm19-slp-miscompile.md, tests/native/avx512_slp_repro.ll).
     * default<O2>/<O3> override the SLP setting of the options below, so the pass is switched
     * off through its own LLVM option (process-wide, set once).  The schedule emits the vector
     * code that matters (register tiles, streams) itself. */
    static bool slp_off;
    if (!slp_off) {
        const char *args[] = {"tsrc", "-vectorize-slp=false"};
        LLVMParseCommandLineOptions(2, args, "");
        slp_off = true;
    }
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, opt_level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(po, false);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, opt_level >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, opt_level >= 2);
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", opt_level);
    LLVMErrorRef e = LLVMRunPasses(g->mod, pipeline, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        diag_error_noloc("internal error: LLVM's %s pipeline failed: %s", pipeline, m);
        LLVMDisposeErrorMessage(m);
        return false;
    }
    if (format == CG_LLVM) {
        char *text = LLVMPrintModuleToString(g->mod);
        out->size = strlen(text);
        out->data = malloc(out->size + 1);
        if (!out->data) diag_fatal_oom();
        memcpy(out->data, text, out->size + 1);
        LLVMDisposeMessage(text);
        return true;
    }
    LLVMMemoryBufferRef mb = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, g->mod, format == CG_ASM ? LLVMAssemblyFile : LLVMObjectFile, &err,
                                            &mb)) {
        diag_error_noloc("LLVM cannot generate this code: %s", err ? err : "");
        LLVMDisposeMessage(err);
        return false;
    }
    out->size = LLVMGetBufferSize(mb);
    out->data = malloc(out->size ? out->size : 1);
    if (!out->data) diag_fatal_oom();
    memcpy(out->data, LLVMGetBufferStart(mb), out->size);
    LLVMDisposeMemoryBuffer(mb);
    return true;
}
