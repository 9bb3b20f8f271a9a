/* cg_cpu.c — the CPU's part of code generation: kernels as functions, the thread pool, routines,
 * `main` and the model image, through the LLVM 19 C API (cg_cpu.h).
 *
 * What it does.  Every kernel of a routine (kernel.c) becomes an internal function
 *     void KERNEL(i64 lo, i64 hi, ptr symbols, ptr noalias buffer…)
 * whose body cg_llvm.c emits; a threaded kernel also gets a trampoline
 *     void RANGE(ptr ctx, i64 lo, i64 hi)      ctx = {state buffers, state symbols}
 * that the runtime's pool calls on each chunk (tsr_parallel_for).  Every routine becomes
 * `int MODULE_ROUTINE(tsr_state *s)`: it begins the run (tsr_state_begin_run: checks the index
 * symbols, numbers the run for the `random` primitive), reads the state's buffer and symbol arrays, and launches its kernels in order — a threaded one through the pool, any other
 * by a direct call that LLVM inlines; a routine too large for one function is cut into parts
 * that LLVM may not inline, and the repeated kernels of such routines are compiled once (see
 * "Splitting" below).  The state's layout is abi.h's (checked
 * there against tsr.h).
 *
 * A --target=cuda program's routines instead launch its GPU kernels (cg_ptx.c, whose PTX the
 * image carries) one after another through the runtime: each run of kernels between two calls of
 * the runtime with tsr_gpu_launch_run() (a CUDA graph), a lone one with tsr_gpu_launch(); `main`
 * is the same.
 *
 * The model image (image.c) is a constant array `MODULE__image`; generated headers and `main`
 * pass it to tsr_state_create().  `main`, for executables, reads its command line and makes
 * the state through tsr_main_start(), then follows the program plan (plan.c): loops binding
 * index symbols (bounds read from options where the program says so), routine calls, prints
 * through tsr_state_print(), the runtime's statements through tsr_state_action() and progress
 * bars through tsr_state_progress().
 *
 * Requires: a verified, scheduled IrProgram with its plan; image from image_build(). */
#include "cg/cg_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "cg/abi.h"
#include "cg/cg_llvm.h"
#include "base/diag.h"
#include "sched/kernel.h"

typedef struct Cpu {
    CgLlvm g;
    const CgOptions *opt;
    LLVMTypeRef state_t;
    LLVMValueRef image, image_size;
    const char **routine_names; /* per function: its C name (abi_routine_names), computed once */
    bool split; /* some routine was cut into parts: a long program, whose repeated kernels are merged */
    /* --profile: every kernel launch adds its nanoseconds and 1 to its slot of two arrays, made
     * at the end (profile_finish) once the kernels are counted; until then the code addresses
     * placeholders. */
    LLVMValueRef profile_ns, profile_calls, profile_report;
    const char **profile_labels;
    uint32_t profile_count, profile_cap;
    uint32_t profile_base; /* the slot of the routine being emitted's kernel 0 */
    LLVMValueRef routine, routine_state; /* the routine being emitted and its state, for calls of
                                          * the runtime (kernel.h: a call kernel) */
} Cpu;

/* ---- Kernels --------------------------------------------------------------------------------------- */

/* void (i64 lo, i64 hi, ptr symbols, ptr noalias buffers…[, ptr noalias readonly literals]) */
static LLVMTypeRef kernel_type(Cpu *c, uint32_t buffers, bool literals) {
    uint32_t n = buffers + 3 + literals;
    LLVMTypeRef *p = calloc(n, sizeof *p);
    if (!p) diag_fatal_oom();
    p[0] = c->g.i64;
    p[1] = c->g.i64;
    for (uint32_t i = 2; i < n; i++) p[i] = c->g.ptr;
    LLVMTypeRef t = LLVMFunctionType(c->g.void_t, p, n, 0);
    free(p);
    return t;
}

/* On a target with AVX-512, every function with a body keeps 512-bit vectors whole
 * ("min-legal-vector-width") and LLVM's loop vectorizer uses 16 floats a vector
 * ("prefer-vector-width").  LLVM's own default for Intel's server CPUs (skylake-avx512 through
 * emeraldrapids) is 256 bits, against the clock drop that 512-bit instructions cost on Skylake-X;
 * the register tiles use 512-bit vectors in any case, so elementwise loops at half the width
 * only lose (GELU over 2 MB of cells: 480 against 363 us on an Emerald Rapids VM).  Widths change no
 * cell's value: each cell takes the same operations in either. */
static void use_whole_avx512(CgLlvm *g) {
    for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f)) {
        if (LLVMIsDeclaration(f)) continue;
        LLVMAddTargetDependentFunctionAttr(f, "min-legal-vector-width", "512");
        LLVMAddTargetDependentFunctionAttr(f, "prefer-vector-width", "512");
    }
}

/* The kernel's function.  With `literals` (a long program's kernel, see "Splitting" below) its
 * literals are lifted into a table (cg_llvm.h): the function takes the table as its last
 * parameter, and *literals is the table to call it with (a constant array, or null when the
 * code holds no literal). */
static LLVMValueRef emit_kernel(Cpu *c, const IrFunction *fn, const Kernel *k, const char *name, LLVMValueRef *literals) {
    CgLlvm *g = &c->g;
    LLVMValueRef f = LLVMAddFunction(g->mod, name, kernel_type(c, k->buffer_count, literals));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    cgl_set_attr(g, f, LLVMAttributeFunctionIndex, "nounwind");
    for (uint32_t i = 0; i < k->buffer_count + (literals != NULL); i++) cgl_set_attr(g, f, 4 + i, "noalias"); /* 1-based */
    if (literals) {
        cgl_set_attr(g, f, 4 + k->buffer_count, "readonly");
        cgl_lift_literals(g, LLVMGetParam(f, 3 + k->buffer_count));
    }
    g->fn = f;
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
    LLVMValueRef *buffers = calloc(k->buffer_count + 1, sizeof *buffers);
    if (!buffers) diag_fatal_oom();
    for (uint32_t i = 0; i < k->buffer_count; i++) buffers[i] = LLVMGetParam(f, 3 + i);
    cgl_kernel_body(g, fn, k, LLVMGetParam(f, 0), LLVMGetParam(f, 1), LLVMGetParam(f, 2), buffers);
    LLVMBuildRetVoid(g->b);
    free(buffers);
    if (literals) *literals = cgl_lifted_table(g, arena_printf(g->ir->arena, "%s.literals", name));
    return f;
}

/* The arguments of a kernel call: lo, hi, symbols, then each buffer loaded from `bufs`, then
 * the table of its lifted literals when it has one (`literals` not NULL). */
static LLVMValueRef *kernel_args(Cpu *c, const Kernel *k, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef syms,
                                 LLVMValueRef bufs, LLVMValueRef literals) {
    LLVMValueRef *args = calloc(k->buffer_count + 4, sizeof *args);
    if (!args) diag_fatal_oom();
    args[0] = lo;
    args[1] = hi;
    args[2] = syms;
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        LLVMValueRef idx[1] = {cgl_iconst(&c->g, k->buffers[i])};
        args[3 + i] = LLVMBuildLoad2(c->g.b, c->g.ptr, LLVMBuildInBoundsGEP2(c->g.b, c->g.ptr, bufs, idx, 1, ""), "");
    }
    args[3 + k->buffer_count] = literals;
    return args;
}

/* void range(ctx, lo, hi): ctx = {buffers, symbols} of the state; calls the kernel. */
static LLVMValueRef emit_range(Cpu *c, const Kernel *k, LLVMValueRef kernel, const char *name) {
    CgLlvm *g = &c->g;
    LLVMTypeRef p[3] = {g->ptr, g->i64, g->i64};
    LLVMValueRef f = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->void_t, p, 3, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
    LLVMValueRef ctx = LLVMGetParam(f, 0);
    LLVMValueRef bufs = LLVMBuildLoad2(g->b, g->ptr, ctx, "");
    LLVMValueRef one[1] = {cgl_iconst(g, 1)};
    LLVMValueRef syms = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildInBoundsGEP2(g->b, g->ptr, ctx, one, 1, ""), "");
    LLVMValueRef *args = kernel_args(c, k, LLVMGetParam(f, 1), LLVMGetParam(f, 2), syms, bufs, NULL);
    LLVMBuildCall2(g->b, kernel_type(c, k->buffer_count, false), kernel, args, k->buffer_count + 3, "");
    LLVMBuildRetVoid(g->b);
    free(args);
    return f;
}

/* ---- Routines -------------------------------------------------------------------------------------- */

/* Splitting.  A kernel called directly is inlined by LLVM into its caller, so a routine of
 * thousands of small nests (a long chain of definitions, a deep network) would become one
 * function of one enormous basic block once LLVM has unrolled the nests completely, and parts
 * of LLVM's back end (the machine scheduler's dependence graph) take time quadratic in a basic
 * block.  So the directly called kernels are grouped, in order, into parts of bounded estimated
 * size, each an internal function that LLVM may not inline into the routine; the kernels of
 * one part are still inlined into it and optimised together.  A routine whose kernels all fit
 * in one part calls them itself, as before.  The size estimate counts expression nodes, times
 * the iterations of each loop that will be unrolled (by the schedule, or by LLVM: a loop of at
 * most FULL_UNROLL_TRIPS iterations), and stops growing at the budget.
 *
 * A long program also repeats itself: the layers of a deep network, the blocks of a model, are
 * kernels of the same code on other buffers, often with other literals.  In a routine that is
 * split, the kernels called directly lift their literals into a table they are given (cg_llvm.h),
 * and the module's identical functions are merged before LLVM optimises it (cg_llvm.c): LLVM
 * then compiles each distinct kernel once, and a kernel that several parts share is called, not
 * inlined.  Compile time follows the number of distinct kernels, not the program's length
 * (docs/performance.md, "Compile time and memory"); the results are unchanged, since a literal
 * read from a table is the same float. */
enum { PART_BUDGET = 1024, FULL_UNROLL_TRIPS = 32 };

static uint64_t expr_size(const IrExpr *e) {
    uint64_t n = 1;
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) n += expr_size(e->args[i]);
    return n;
}

static uint64_t stmt_size(const IrStmt *s) {
    if (s->kind == IR_BARRIER || s->kind == IR_CALL || s->kind == IR_MMA || s->kind == IR_LDMATRIX ||
        s->kind == IR_WGMMA)
        return 1;
    if (s->kind != IR_LOOP) return 1 + expr_size(s->value);
    uint64_t body = 1;
    for (uint32_t i = 0; i < s->body.count && body < PART_BUDGET; i++) body += stmt_size(s->body.items[i]);
    bool unrolled = s->mode == LOOP_UNROLL || (s->mode == LOOP_PLAIN && s->extent <= FULL_UNROLL_TRIPS);
    uint64_t n = unrolled && s->extent > 1 ? body * (uint64_t)s->extent : body;
    return n < PART_BUDGET ? n : PART_BUDGET;
}

static uint64_t kernel_size(const IrFunction *fn, const Kernel *k) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < k->count && n < PART_BUDGET; i++) n += stmt_size(k->stmts[i]);
    return n;
}

/* The end of the run of kernels from `i` that belong to the same loop of blocks (kernel.h). */
/* ---- Profiling (--profile) --------------------------------------------------------------------------- */

static LLVMValueRef profile_clock(Cpu *c) { return cgl_call(&c->g, "tsr_profile_clock", c->g.i64, NULL, 0, NULL); }

/* slot += amount in one of the profile's arrays, atomically: states used on several threads at
 * once (docs/runtime.md §8) add to the same counters, and a load and a store lost counts. */
static void profile_bump(Cpu *c, LLVMValueRef array, uint32_t slot, LLVMValueRef amount) {
    CgLlvm *g = &c->g;
    LLVMValueRef idx[1] = {cgl_iconst(g, slot)};
    LLVMValueRef at = LLVMBuildInBoundsGEP2(g->b, g->i64, array, idx, 1, "");
    LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpAdd, at, amount, LLVMAtomicOrderingMonotonic, false);
}

/* After a launch that began at t0: its time and one launch for kernel `slot`. */
static void profile_launch(Cpu *c, uint32_t slot, LLVMValueRef t0) {
    profile_bump(c, c->profile_ns, slot, LLVMBuildSub(c->g.b, profile_clock(c), t0, ""));
    profile_bump(c, c->profile_calls, slot, cgl_iconst(&c->g, 1));
}

/* The label of the routine's kernel k: "ROUTINE #k  writes a, b.grad". */
static void profile_label(Cpu *c, const IrFunction *fn, const Kernel *k, uint32_t number, bool *written) {
    const IrProgram *ir = c->g.ir;
    for (uint32_t i = 0; i < k->count; i++) kernel_note_stores(k->stmts[i], written);
    if (k->call) /* the runtime writes them all */
        for (uint32_t i = 0; i < k->buffer_count; i++) written[k->buffers[i]] = true;
    char *label = arena_printf(ir->arena, k->call ? "%s #%u  means across processes of" : "%s #%u  writes", fn->name, number);
    bool first = true;
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        uint32_t b = k->buffers[i];
        if (!written[b]) continue;
        label = arena_printf(ir->arena, "%s%s %s", label, first ? "" : ",", ir->buffers[b].name);
        first = false;
    }
    for (uint32_t i = 0; i < k->buffer_count; i++) written[k->buffers[i]] = false;
    for (uint32_t i = 0; i < k->local_count; i++) written[k->locals[i]] = false;
    if (c->profile_count == c->profile_cap) {
        c->profile_cap = c->profile_cap ? 2 * c->profile_cap : 64;
        c->profile_labels = realloc(c->profile_labels, c->profile_cap * sizeof *c->profile_labels);
        if (!c->profile_labels) diag_fatal_oom();
    }
    c->profile_labels[c->profile_count++] = label;
}

/* A private constant NUL-terminated string. */
static LLVMValueRef const_string(CgLlvm *g, const char *text) {
    LLVMValueRef init = LLVMConstStringInContext(g->ctx, text, (unsigned)strlen(text), 0);
    LLVMValueRef str = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "");
    LLVMSetLinkage(str, LLVMPrivateLinkage);
    LLVMSetGlobalConstant(str, 1);
    LLVMSetInitializer(str, init);
    return str;
}

/* The arrays, now that every kernel has its slot, in place of the placeholders, the body of
 * MODULE_profile_report() (tsr_profile_report(stderr, …)) and MODULE_profile_reset(). */
static void profile_finish(Cpu *c) {
    CgLlvm *g = &c->g;
    uint32_t n = c->profile_count ? c->profile_count : 1;
    const char *module = c->opt->module;
    LLVMTypeRef counters = LLVMArrayType(g->i64, n);
    LLVMValueRef arrays[2] = {c->profile_ns, c->profile_calls};
    const char *names[2] = {"profile_ns", "profile_calls"};
    for (int a = 0; a < 2; a++) {
        LLVMValueRef real = LLVMAddGlobal(g->mod, counters, arena_printf(g->ir->arena, "%s.%s", module, names[a]));
        LLVMSetLinkage(real, LLVMInternalLinkage);
        LLVMSetInitializer(real, LLVMConstNull(counters));
        LLVMReplaceAllUsesWith(arrays[a], real);
        LLVMDeleteGlobal(arrays[a]);
        arrays[a] = real;
    }
    LLVMValueRef *strings = calloc(n, sizeof *strings);
    if (!strings) diag_fatal_oom();
    for (uint32_t k = 0; k < n; k++) strings[k] = const_string(g, k < c->profile_count ? c->profile_labels[k] : "");
    LLVMValueRef table_init = LLVMConstArray2(g->ptr, strings, n);
    LLVMValueRef table = LLVMAddGlobal(g->mod, LLVMTypeOf(table_init), arena_printf(g->ir->arena, "%s.profile_labels", module));
    LLVMSetLinkage(table, LLVMPrivateLinkage);
    LLVMSetGlobalConstant(table, 1);
    LLVMSetInitializer(table, table_init);
    free(strings);
    LLVMValueRef name = const_string(g, module);

    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, c->profile_report, "entry"));
    LLVMValueRef err = LLVMGetNamedGlobal(g->mod, "stderr");
    if (!err) err = LLVMAddGlobal(g->mod, g->ptr, "stderr");
    LLVMTypeRef p[6] = {g->ptr, g->ptr, g->i32, g->ptr, g->ptr, g->ptr};
    LLVMValueRef a[6] = {LLVMBuildLoad2(g->b, g->ptr, err, "stderr"), name, LLVMConstInt(g->i32, c->profile_count, 0),
                         table, arrays[0], arrays[1]};
    cgl_call(g, "tsr_profile_report", g->void_t, p, 6, a);
    LLVMBuildRetVoid(g->b);
    /* MODULE_profile_reset(): every counter back to 0 (a benchmark's warm-up steps left out). */
    LLVMValueRef reset = LLVMAddFunction(g->mod, arena_printf(g->ir->arena, "%s_profile_reset", module),
                                         LLVMFunctionType(g->void_t, NULL, 0, 0));
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, reset, "entry"));
    for (int k = 0; k < 2; k++) LLVMBuildStore(g->b, LLVMConstNull(counters), arrays[k]);
    LLVMBuildRetVoid(g->b);
    free(c->profile_labels);
}

static uint32_t blocks_end(const KernelList *kl, uint32_t i, uint32_t last) {
    uint32_t j = i;
    while (j < last && kl->kernels[j].blocks && kl->kernels[j].blocks == kl->kernels[i].blocks) j++;
    return j;
}

static void launch_kernels(Cpu *c, const KernelList *kl, uint32_t first, uint32_t last, const LLVMValueRef *bodies,
                           const LLVMValueRef *literals, const LLVMValueRef *ranges, LLVMValueRef bufs,
                           LLVMValueRef syms, LLVMValueRef ctx, bool in_blocks);
static void return_on_error(Cpu *c, LLVMValueRef fn, LLVMValueRef status);

/* A call of the runtime (kernel.h): tsr_state_action(state, action), the routine returning its
 * status when it fails. */
static void call_runtime(Cpu *c, const Kernel *k) {
    CgLlvm *g = &c->g;
    LLVMTypeRef p[2] = {g->ptr, g->i32};
    LLVMValueRef a[2] = {c->routine_state, LLVMConstInt(g->i32, k->stmts[0]->action, 0)};
    return_on_error(c, c->routine, cgl_call(g, "tsr_state_action", g->i32, p, 2, a));
}

/* The kernels [first, last) of one loop of blocks (docs/ir.md §5.2), run for each block: its
 * first row S, stored in the state's symbols (the kernels read it there), is ⌊n/A⌋·A (0 without
 * A), then S + B, … while S + B ≤ n, for blocks of B rows after blocks of A rows (ir.h). */
static void launch_blocks(Cpu *c, const KernelList *kl, uint32_t first, uint32_t last, const LLVMValueRef *bodies,
                          const LLVMValueRef *literals, const LLVMValueRef *ranges, LLVMValueRef bufs,
                          LLVMValueRef syms, LLVMValueRef ctx) {
    CgLlvm *g = &c->g;
    const IrStmt *loop = kl->kernels[first].blocks;
    LLVMValueRef n = cgl_size(g, loop->extent, syms), a = cgl_iconst(g, loop->block_after);
    LLVMValueRef lo = loop->block_after ? LLVMBuildNSWMul(g->b, LLVMBuildSDiv(g->b, n, a, ""), a, "from") : cgl_iconst(g, 0);
    /* S + B ≤ n: S < n - B + 1 */
    LLVMValueRef hi = LLVMBuildNSWSub(g->b, n, cgl_iconst(g, (int64_t)loop->block - 1), "to");
    CglLoop l;
    LLVMValueRef row = cgl_loop_open(g, &l, lo, hi);
    LLVMValueRef idx[1] = {cgl_iconst(g, loop->block_symbol)};
    LLVMBuildStore(g->b, row, LLVMBuildInBoundsGEP2(g->b, g->i64, syms, idx, 1, ""));
    launch_kernels(c, kl, first, last, bodies, literals, ranges, bufs, syms, ctx, true);
    cgl_loop_close(g, &l, loop->block);
}

/* Calls of kernels [first, last) of `kl` with the state's buffers and symbols, in order (the
 * kernels of a loop of blocks in that loop, unless `in_blocks`: the loop's own body); `ctx`
 * (NULL: made here when a threaded kernel needs it) holds them for the thread pool. */
static void launch_kernels(Cpu *c, const KernelList *kl, uint32_t first, uint32_t last, const LLVMValueRef *bodies,
                           const LLVMValueRef *literals, const LLVMValueRef *ranges, LLVMValueRef bufs,
                           LLVMValueRef syms, LLVMValueRef ctx, bool in_blocks) {
    CgLlvm *g = &c->g;
    bool threads = false;
    for (uint32_t i = first; i < last; i++) threads |= kl->kernels[i].threaded;
    if (threads && !ctx) { /* before any loop of blocks: one slot on the stack */
        ctx = LLVMBuildAlloca(g->b, LLVMArrayType(g->ptr, 2), "ctx");
        LLVMBuildStore(g->b, bufs, ctx);
        LLVMValueRef one[1] = {cgl_iconst(g, 1)};
        LLVMBuildStore(g->b, syms, LLVMBuildInBoundsGEP2(g->b, g->ptr, ctx, one, 1, ""));
    }
    for (uint32_t i = first; i < last; i++) {
        const Kernel *k = &kl->kernels[i];
        if (k->blocks && !in_blocks) {
            uint32_t end = blocks_end(kl, i, last);
            launch_blocks(c, kl, i, end, bodies, literals, ranges, bufs, syms, ctx);
            i = end - 1;
            continue;
        }
        LLVMValueRef t0 = c->opt->profile ? profile_clock(c) : NULL;
        if (k->call) {
            call_runtime(c, k);
        } else if (k->threaded) {
            LLVMTypeRef pp[4] = {g->ptr, g->ptr, g->i64, g->i64};
            LLVMValueRef a[4] = {ranges[i], ctx, cgl_size(g, k->extent, syms), cgl_iconst(g, k->grain)};
            cgl_call(g, "tsr_parallel_for", g->void_t, pp, 4, a);
        } else {
            LLVMValueRef *args = kernel_args(c, k, cgl_iconst(g, 0), cgl_size(g, k->extent, syms), syms, bufs, literals[i]);
            LLVMBuildCall2(g->b, kernel_type(c, k->buffer_count, literals[i]), bodies[i], args,
                           k->buffer_count + 3 + (literals[i] != NULL), "");
            free(args);
        }
        if (t0) profile_launch(c, c->profile_base + i, t0);
    }
}

/* void PART(ptr buffers, ptr symbols): kernels [first, last), never inlined into the routine. */
static LLVMValueRef emit_part(Cpu *c, const KernelList *kl, uint32_t first, uint32_t last, const LLVMValueRef *bodies,
                              const LLVMValueRef *literals, const char *name) {
    CgLlvm *g = &c->g;
    LLVMTypeRef p[2] = {g->ptr, g->ptr};
    LLVMValueRef f = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->void_t, p, 2, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    cgl_set_attr(g, f, LLVMAttributeFunctionIndex, "nounwind");
    cgl_set_attr(g, f, LLVMAttributeFunctionIndex, "noinline");
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
    launch_kernels(c, kl, first, last, bodies, literals, NULL, LLVMGetParam(f, 0), LLVMGetParam(f, 1), NULL, false);
    LLVMBuildRetVoid(g->b);
    return f;
}

/* Return the status if it is not TSR_OK, else go on (in a new block). */
static void return_on_error(Cpu *c, LLVMValueRef fn, LLVMValueRef status) {
    CgLlvm *g = &c->g;
    LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(g->ctx, fn, "failed");
    LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(g->ctx, fn, "go_on");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, status, LLVMConstInt(g->i32, 0, 0), ""), bad, go);
    LLVMPositionBuilderAtEnd(g->b, bad);
    LLVMBuildRet(g->b, status);
    LLVMPositionBuilderAtEnd(g->b, go);
}

/* int NAME(tsr_state *s) of a --target=cuda program: begin the run (check symbols, number the
 * run: tsr_state_begin_run), then launch the function's
 * GPU kernels in order through the runtime (runtime/cuda.c), stopping at the first error: each
 * run of kernels between two calls of the runtime with one tsr_gpu_launch_run (a CUDA graph),
 * or, with --profile, each kernel alone and waited for. */
static LLVMValueRef emit_gpu_routine(Cpu *c, uint32_t f) {
    CgLlvm *g = &c->g;
    IrProgram *ir = (IrProgram *)g->ir;
    const char *name = abi_routine_symbol(ir->arena, c->opt->module, c->routine_names[f], ir->exported[f]);
    LLVMTypeRef p[2] = {g->ptr, g->i32};
    LLVMValueRef r = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->i32, p, 1, 0));
    if (!ir->exported[f]) LLVMSetLinkage(r, LLVMInternalLinkage);
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, r, "entry"));
    LLVMValueRef state = LLVMGetParam(r, 0);
    c->routine = r;
    c->routine_state = state;
    return_on_error(c, r, cgl_call(g, "tsr_state_begin_run", g->i32, p, 1, &state));
    /* The function's kernels in order: the GPU's (cg_ptx.c numbers them, calls of the runtime
     * skipped) and the calls, which the host makes between them. */
    KernelList kl = kernel_outline(ir, &ir->functions[f], c->opt->gpu_target);
    c->profile_base = c->profile_count;
    if (c->opt->profile) {
        bool *written = calloc(ir->buffer_count + 1, sizeof *written);
        if (!written) diag_fatal_oom();
        for (uint32_t k = 0; k < kl.count; k++) profile_label(c, &ir->functions[f], &kl.kernels[k], k, written);
        free(written);
    }
    uint32_t next = c->opt->gpu_first[f];
    for (uint32_t k = 0; k < kl.count; k++) {
        /* --profile: each launch waits for its kernel (tsr_gpu_profile_wait), so its time is the kernel's */
        LLVMValueRef t0 = c->opt->profile ? profile_clock(c) : NULL;
        uint32_t run = 1; /* without --profile, the kernels up to the next call of the runtime: one graph */
        while (!t0 && !kl.kernels[k].call && k + run < kl.count && !kl.kernels[k + run].call) run++;
        if (kl.kernels[k].call) {
            call_runtime(c, &kl.kernels[k]);
        } else if (run > 1) {
            LLVMTypeRef pr[3] = {g->ptr, g->i32, g->i32};
            LLVMValueRef a[3] = {state, LLVMConstInt(g->i32, next, 0), LLVMConstInt(g->i32, run, 0)};
            return_on_error(c, r, cgl_call(g, "tsr_gpu_launch_run", g->i32, pr, 3, a));
            next += run;
            k += run - 1;
        } else {
            LLVMValueRef a[2] = {state, LLVMConstInt(g->i32, next++, 0)};
            return_on_error(c, r, cgl_call(g, "tsr_gpu_launch", g->i32, p, 2, a));
            if (t0) return_on_error(c, r, cgl_call(g, "tsr_gpu_profile_wait", g->i32, p, 1, &state));
        }
        if (t0) profile_launch(c, c->profile_base + k, t0);
    }
    if (next != c->opt->gpu_first[f + 1]) diag_error_noloc("internal error: the GPU kernels of a routine are miscounted");
    LLVMBuildRet(g->b, LLVMConstInt(g->i32, 0, 0));
    return r;
}

/* The status of tsr_state_check_sizes(state, the size symbols fn uses), or NULL when it uses none:
 * the list is a constant array of the module's, named after the routine. */
static LLVMValueRef check_sizes(Cpu *c, const IrFunction *fn, LLVMValueRef state, const char *routine) {
    CgLlvm *g = &c->g;
    uint32_t *list = calloc(g->ir->symbol_count + 1, sizeof *list);
    if (!list) diag_fatal_oom();
    uint32_t n = ir_function_sizes(g->ir, fn, list);
    LLVMValueRef status = NULL;
    if (n) {
        LLVMValueRef *items = calloc(n, sizeof *items);
        if (!items) diag_fatal_oom();
        for (uint32_t i = 0; i < n; i++) items[i] = LLVMConstInt(g->i32, list[i], 0);
        LLVMValueRef init = LLVMConstArray(g->i32, items, n);
        LLVMValueRef table = LLVMAddGlobal(g->mod, LLVMTypeOf(init), arena_printf(g->ir->arena, "%s.sizes", routine));
        LLVMSetInitializer(table, init);
        LLVMSetGlobalConstant(table, 1);
        LLVMSetLinkage(table, LLVMPrivateLinkage);
        LLVMTypeRef p[3] = {g->ptr, g->ptr, g->i32};
        LLVMValueRef a[3] = {state, table, LLVMConstInt(g->i32, n, 0)};
        status = cgl_call(g, "tsr_state_check_sizes", g->i32, p, 3, a);
        free(items);
    }
    free(list);
    return status;
}

/* int NAME(tsr_state *s): begin the run (check symbols, number the run and write its random key
 * past the symbols: tsr_state_begin_run), then launch the kernels in order (directly, or
 * through the parts that hold them). */
static LLVMValueRef emit_routine(Cpu *c, uint32_t f) {
    CgLlvm *g = &c->g;
    IrProgram *ir = (IrProgram *)g->ir;
    const IrFunction *fn = &ir->functions[f];
    bool exported = ir->exported[f];
    const char *name = abi_routine_symbol(ir->arena, c->opt->module, c->routine_names[f], exported);
    KernelList kl = kernel_outline(ir, fn, c->opt->target);
    LLVMValueRef *bodies = calloc(kl.count + 1, sizeof *bodies), *ranges = calloc(kl.count + 1, sizeof *ranges);
    LLVMValueRef *literals = calloc(kl.count + 1, sizeof *literals);
    /* part_end[i]: the end of the part that starts at kernel i (0 when none starts there). */
    uint32_t *part_end = calloc(kl.count + 1, sizeof *part_end);
    if (!bodies || !ranges || !literals || !part_end) diag_fatal_oom();
    uint64_t total = 0;
    for (uint32_t k = 0; k < kl.count && total <= PART_BUDGET; k++) total += kernel_size(fn, &kl.kernels[k]);
    bool split = total > PART_BUDGET;
    if (split) c->split = true;
    c->profile_base = c->profile_count;
    if (c->opt->profile) {
        bool *written = calloc(ir->buffer_count + 1, sizeof *written);
        if (!written) diag_fatal_oom();
        for (uint32_t k = 0; k < kl.count; k++) profile_label(c, fn, &kl.kernels[k], k, written);
        free(written);
    }
    for (uint32_t k = 0; k < kl.count; k++) {
        const Kernel *kn = &kl.kernels[k];
        bool lift = split && !kn->threaded;
        if (kn->call) continue; /* the routine calls the runtime there */
        bodies[k] = emit_kernel(c, fn, kn, arena_printf(ir->arena, "%s.kernel%u", name, k), lift ? &literals[k] : NULL);
        if (kn->threaded) ranges[k] = emit_range(c, kn, bodies[k], arena_printf(ir->arena, "%s.range%u", name, k));
    }
    uint32_t parts = 0;
    if (split) {
        for (uint32_t k = 0; k < kl.count;) {
            if (kl.kernels[k].threaded || kl.kernels[k].blocks || kl.kernels[k].call) { /* launched by the routine itself */
                k++;
                continue;
            }
            uint32_t end = k;
            uint64_t size = 0;
            while (end < kl.count && !kl.kernels[end].threaded && !kl.kernels[end].blocks && !kl.kernels[end].call &&
                   (end == k || size + kernel_size(fn, &kl.kernels[end]) <= PART_BUDGET))
                size += kernel_size(fn, &kl.kernels[end++]);
            part_end[k] = end;
            k = end;
        }
    }
    LLVMValueRef *part_fn = calloc(kl.count + 1, sizeof *part_fn);
    if (!part_fn) diag_fatal_oom();
    for (uint32_t k = 0; k < kl.count; k++)
        if (part_end[k])
            part_fn[k] = emit_part(c, &kl, k, part_end[k], bodies, literals, arena_printf(ir->arena, "%s.part%u", name, parts++));
    LLVMTypeRef p[1] = {g->ptr};
    LLVMValueRef r = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->i32, p, 1, 0));
    if (!exported) LLVMSetLinkage(r, LLVMInternalLinkage);
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, r, "entry"));
    LLVMValueRef state = LLVMGetParam(r, 0);
    c->routine = r;
    c->routine_state = state;
    LLVMValueRef sizes = check_sizes(c, fn, state, name); /* first: a run they refuse is not counted */
    if (sizes) return_on_error(c, r, sizes);
    return_on_error(c, r, cgl_call(g, "tsr_state_begin_run", g->i32, p, 1, &state));
    LLVMValueRef bufs = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildStructGEP2(g->b, c->state_t, state, ABI_STATE_BUFFERS, ""),
                                       "buffers");
    LLVMValueRef syms = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildStructGEP2(g->b, c->state_t, state, ABI_STATE_SYMBOLS, ""),
                                       "symbols");
    if (!parts) {
        launch_kernels(c, &kl, 0, kl.count, bodies, literals, ranges, bufs, syms, NULL, false);
    } else {
        for (uint32_t k = 0; k < kl.count;) {
            if (part_end[k]) {
                LLVMTypeRef pp[2] = {g->ptr, g->ptr};
                LLVMValueRef a[2] = {bufs, syms};
                LLVMBuildCall2(g->b, LLVMFunctionType(g->void_t, pp, 2, 0), part_fn[k], a, 2, "");
                k = part_end[k];
            } else { /* a threaded kernel, a call of the runtime, or a loop of blocks with its kernels */
                uint32_t end = kl.kernels[k].blocks ? blocks_end(&kl, k, kl.count) : k + 1;
                launch_kernels(c, &kl, k, end, bodies, literals, ranges, bufs, syms, NULL, false);
                k = end;
            }
        }
    }
    LLVMBuildRet(g->b, LLVMConstInt(g->i32, 0, 0));
    free(bodies);
    free(literals);
    free(ranges);
    free(part_end);
    free(part_fn);
    return r;
}

/* ---- main ------------------------------------------------------------------------------------------ */

typedef struct MainCtx {
    LLVMValueRef fn, state, argv0, *routines;
    LLVMBasicBlockRef fail;
} MainCtx;

static void branch_on_status(Cpu *c, MainCtx *m, LLVMValueRef status);

/* A stack slot of main, made in its entry block: a slot made where a loop of main is emitted
 * would be made again on every iteration of an enclosing loop, and the stack would grow. */
static LLVMValueRef main_slot(Cpu *c, MainCtx *m, LLVMTypeRef type, const char *name) {
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(m->fn);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c->g.ctx);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first) LLVMPositionBuilderBefore(b, first);
    else LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef slot = LLVMBuildAlloca(b, type, name);
    LLVMDisposeBuilder(b);
    return slot;
}

/* A bound of a loop: a constant, or an option's value (read at run time) plus the constant,
 * which tsr_main_loop_bound adds, failing main when the sum overflows. */
static LLVMValueRef loop_bound(Cpu *c, MainCtx *m, int64_t value, uint32_t option) {
    if (option == UINT32_MAX) return cgl_iconst(&c->g, value);
    LLVMValueRef out = main_slot(c, m, c->g.i64, "bound");
    LLVMTypeRef p[4] = {c->g.ptr, c->g.i32, c->g.i64, c->g.ptr};
    LLVMValueRef a[4] = {m->state, LLVMConstInt(c->g.i32, option, 0), cgl_iconst(&c->g, value), out};
    branch_on_status(c, m, cgl_call(&c->g, "tsr_main_loop_bound", c->g.i32, p, 4, a));
    return LLVMBuildLoad2(c->g.b, c->g.i64, out, "");
}

/* Tell the loop's progress bar, if it has one, how many of its iterations are done: 0 before
 * the first (v NULL), else those up to counter value v. */
static void progress_tick(Cpu *c, MainCtx *m, const IrMainStmt *s, LLVMValueRef from, LLVMValueRef to, LLVMValueRef v) {
    if (s->action == UINT32_MAX) return;
    CgLlvm *g = &c->g;
    LLVMValueRef one = cgl_iconst(g, 1);
    LLVMValueRef total = LLVMBuildAdd(g->b, s->down ? LLVMBuildSub(g->b, from, to, "") : LLVMBuildSub(g->b, to, from, ""), one, "");
    LLVMValueRef done = v ? LLVMBuildAdd(g->b, s->down ? LLVMBuildSub(g->b, from, v, "") : LLVMBuildSub(g->b, v, from, ""), one, "")
                          : cgl_iconst(g, 0);
    LLVMTypeRef p[4] = {g->ptr, g->i32, g->i64, g->i64};
    LLVMValueRef a[4] = {m->state, LLVMConstInt(g->i32, s->action, 0), done, total};
    cgl_call(g, "tsr_state_progress", g->i32, p, 4, a);
}

/* A loop of main whose bounds come from options: refuse a negative count (tsr_main_loop_count);
 * if (up ? from <= to : from >= to) { check the
 * range (tsr_main_loop_check); v = from; for (;;) { symbols[k] = v; body; if (v == to) break;
 * v ± 1 } }. */
static void main_block(Cpu *c, MainCtx *m, const IrMainStmt *stmts, uint32_t count);
static void option_loop(Cpu *c, MainCtx *m, const IrMainStmt *s) {
    CgLlvm *g = &c->g;
    LLVMValueRef from = loop_bound(c, m, s->from, s->from_option), to = loop_bound(c, m, s->to, s->to_option);
    LLVMBasicBlockRef check = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "for_check");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "for_body");
    LLVMBasicBlockRef step = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "for_step");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, m->fn, "for_done");
    LLVMValueRef var = main_slot(c, m, g->i64, "counter");
    LLVMBuildStore(g->b, from, var);
    LLVMTypeRef np[5] = {g->ptr, g->i32, g->i64, g->i64, g->i32};
    LLVMValueRef na[5] = {m->state, LLVMConstInt(g->i32, s->symbol, 0), from, to, LLVMConstInt(g->i32, s->down, 0)};
    branch_on_status(c, m, cgl_call(g, "tsr_main_loop_count", g->i32, np, 5, na));
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, s->down ? LLVMIntSGE : LLVMIntSLE, from, to, ""), check, done);
    LLVMPositionBuilderAtEnd(g->b, check);
    LLVMTypeRef cp[4] = {g->ptr, g->i32, g->i64, g->i64};
    LLVMValueRef ca[4] = {m->state, LLVMConstInt(g->i32, s->symbol, 0), from, to};
    branch_on_status(c, m, cgl_call(g, "tsr_main_loop_check", g->i32, cp, 4, ca));
    progress_tick(c, m, s, from, to, NULL);
    LLVMBuildBr(g->b, body);
    LLVMPositionBuilderAtEnd(g->b, body);
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->i64, var, "");
    LLVMValueRef syms = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildStructGEP2(g->b, c->state_t, m->state, ABI_STATE_SYMBOLS, ""), "");
    LLVMValueRef idx[1] = {cgl_iconst(g, s->symbol)};
    LLVMBuildStore(g->b, v, LLVMBuildInBoundsGEP2(g->b, g->i64, syms, idx, 1, ""));
    main_block(c, m, s->body, s->body_count);
    LLVMValueRef cur = LLVMBuildLoad2(g->b, g->i64, var, "");
    progress_tick(c, m, s, from, to, cur);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, cur, to, ""), done, step);
    LLVMPositionBuilderAtEnd(g->b, step);
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, cur, cgl_iconst(g, s->down ? -1 : 1), ""), var);
    LLVMBuildBr(g->b, body);
    LLVMPositionBuilderAtEnd(g->b, done);
}

/* Go on in a new block when `status` is 0, else to main's failure exit. */
static void branch_on_status(Cpu *c, MainCtx *m, LLVMValueRef status) {
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(c->g.ctx, m->fn, "next");
    LLVMBuildCondBr(c->g.b, LLVMBuildICmp(c->g.b, LLVMIntNE, status, LLVMConstInt(c->g.i32, 0, 0), ""), m->fail, next);
    LLVMPositionBuilderAtEnd(c->g.b, next);
}

static void main_block(Cpu *c, MainCtx *m, const IrMainStmt *stmts, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) {
        const IrMainStmt *s = &stmts[i];
        if (s->kind == IRM_FOR && (s->from_option != UINT32_MAX || s->to_option != UINT32_MAX)) {
            option_loop(c, m, s);
            continue;
        }
        if (s->kind == IRM_FOR) {
            /* if (up ? from <= to : from >= to) { v = from; for (;;) { symbols[k] = v; body;
             * if (v == to) break; v ± 1 } }: the end is tested before the counter is stepped, so a
             * loop ending at INT64_MAX (or INT64_MIN) stops instead of wrapping.  The bounds are
             * constants, so an empty loop is left out. */
            if (s->down ? s->from < s->to : s->from > s->to) continue;
            LLVMValueRef var = main_slot(c, m, c->g.i64, "counter");
            LLVMBuildStore(c->g.b, cgl_iconst(&c->g, s->from), var);
            LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->g.ctx, m->fn, "for_body");
            LLVMBasicBlockRef step = LLVMAppendBasicBlockInContext(c->g.ctx, m->fn, "for_step");
            LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->g.ctx, m->fn, "for_done");
            LLVMValueRef from = cgl_iconst(&c->g, s->from), to = cgl_iconst(&c->g, s->to);
            progress_tick(c, m, s, from, to, NULL);
            LLVMBuildBr(c->g.b, body);
            LLVMPositionBuilderAtEnd(c->g.b, body);
            LLVMValueRef v = LLVMBuildLoad2(c->g.b, c->g.i64, var, "");
            LLVMValueRef syms = LLVMBuildLoad2(c->g.b, c->g.ptr, LLVMBuildStructGEP2(c->g.b, c->state_t, m->state, ABI_STATE_SYMBOLS, ""), "");
            LLVMValueRef idx[1] = {cgl_iconst(&c->g, s->symbol)};
            LLVMBuildStore(c->g.b, v, LLVMBuildInBoundsGEP2(c->g.b, c->g.i64, syms, idx, 1, ""));
            main_block(c, m, s->body, s->body_count);
            LLVMValueRef cur = LLVMBuildLoad2(c->g.b, c->g.i64, var, "");
            progress_tick(c, m, s, from, to, cur);
            LLVMBuildCondBr(c->g.b, LLVMBuildICmp(c->g.b, LLVMIntEQ, cur, cgl_iconst(&c->g, s->to), ""), done, step);
            LLVMPositionBuilderAtEnd(c->g.b, step);
            LLVMBuildStore(c->g.b, LLVMBuildAdd(c->g.b, cur, cgl_iconst(&c->g, s->down ? -1 : 1), ""), var);
            LLVMBuildBr(c->g.b, body);
            LLVMPositionBuilderAtEnd(c->g.b, done);
            continue;
        }
        LLVMValueRef status;
        if (s->kind == IRM_RUN) {
            LLVMTypeRef p[1] = {c->g.ptr};
            status = LLVMBuildCall2(c->g.b, LLVMFunctionType(c->g.i32, p, 1, 0), m->routines[s->function], &m->state, 1, "");
        } else if (s->kind == IRM_ACTION) {
            LLVMTypeRef p[2] = {c->g.ptr, c->g.i32};
            LLVMValueRef a[2] = {m->state, LLVMConstInt(c->g.i32, s->action, 0)};
            status = cgl_call(&c->g, "tsr_state_action", c->g.i32, p, 2, a);
        } else {
            LLVMTypeRef p[2] = {c->g.ptr, c->g.i32};
            LLVMValueRef a[2] = {m->state, LLVMConstInt(c->g.i32, s->print, 0)};
            status = cgl_call(&c->g, "tsr_state_print", c->g.i32, p, 2, a);
        }
        branch_on_status(c, m, status);
    }
}

static void emit_main(Cpu *c, LLVMValueRef *routines) {
    LLVMTypeRef p[2] = {c->g.i32, c->g.ptr};
    MainCtx m = {.routines = routines};
    m.fn = LLVMAddFunction(c->g.mod, "main", LLVMFunctionType(c->g.i32, p, 2, 0));
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->g.ctx, m.fn, "entry");
    LLVMBasicBlockRef no_state = LLVMAppendBasicBlockInContext(c->g.ctx, m.fn, "no_state");
    LLVMBasicBlockRef stop = LLVMAppendBasicBlockInContext(c->g.ctx, m.fn, "stop");
    LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(c->g.ctx, m.fn, "run");
    m.fail = LLVMAppendBasicBlockInContext(c->g.ctx, m.fn, "fail");
    LLVMPositionBuilderAtEnd(c->g.b, entry);
    m.argv0 = LLVMBuildLoad2(c->g.b, c->g.ptr, LLVMGetParam(m.fn, 1), "argv0");
    /* state = tsr_main_start(image, size, seed, argc, argv, &status): the command line, then
     * the state; NULL with status 0 (--help) or 2 (a bad command line) ends main at once,
     * with status 1 through tsr_main_fail (it prints the error). */
    LLVMValueRef status = LLVMBuildAlloca(c->g.b, c->g.i32, "status");
    LLVMTypeRef cp[6] = {c->g.ptr, c->g.i64, c->g.i64, c->g.i32, c->g.ptr, c->g.ptr};
    LLVMValueRef ca[6] = {c->image, c->image_size, LLVMConstInt(c->g.i64, c->g.ir->seed, 0), LLVMGetParam(m.fn, 0),
                          LLVMGetParam(m.fn, 1), status};
    m.state = cgl_call(&c->g, "tsr_main_start", c->g.ptr, cp, 6, ca);
    LLVMBuildCondBr(c->g.b, LLVMBuildIsNull(c->g.b, m.state, ""), no_state, run);
    LLVMPositionBuilderAtEnd(c->g.b, no_state);
    LLVMValueRef code = LLVMBuildLoad2(c->g.b, c->g.i32, status, "");
    LLVMBuildCondBr(c->g.b, LLVMBuildICmp(c->g.b, LLVMIntEQ, code, LLVMConstInt(c->g.i32, 1, 0), ""), m.fail, stop);
    LLVMPositionBuilderAtEnd(c->g.b, stop);
    LLVMBuildRet(c->g.b, code);
    LLVMPositionBuilderAtEnd(c->g.b, run);
    main_block(c, &m, c->g.ir->main, c->g.ir->main_count);
    if (c->opt->profile) LLVMBuildCall2(c->g.b, LLVMFunctionType(c->g.void_t, NULL, 0, 0), c->profile_report, NULL, 0, "");
    LLVMTypeRef ep[2] = {c->g.ptr, c->g.ptr};
    LLVMValueRef ea[2] = {m.state, m.argv0};
    LLVMBuildRet(c->g.b, cgl_call(&c->g, "tsr_main_end", c->g.i32, ep, 2, ea));
    LLVMPositionBuilderAtEnd(c->g.b, m.fail);
    LLVMTypeRef fp[2] = {c->g.ptr, c->g.ptr};
    LLVMValueRef fa[2] = {m.state, m.argv0};
    LLVMBuildRet(c->g.b, cgl_call(&c->g, "tsr_main_fail", c->g.i32, fp, 2, fa));
}

/* ---- The C API of a shared library (--shared) --------------------------------------------------------- */

/* RET MODULE_NAME(PARAMS…) { return RUNTIME(ARGS…); } where the arguments are the parameters,
 * after the model's image and its size when `with_image`. */
static void api_function(Cpu *c, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, unsigned n,
                         const char *runtime, bool with_image) {
    CgLlvm *g = &c->g;
    LLVMValueRef f = LLVMAddFunction(g->mod, arena_printf(g->ir->arena, "%s_%s", c->opt->module, name),
                                     LLVMFunctionType(ret, params, n, 0));
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
    LLVMValueRef args[8];
    LLVMTypeRef types[8];
    unsigned count = 0;
    if (with_image) {
        args[count] = c->image, types[count++] = g->ptr;
        args[count] = c->image_size, types[count++] = g->i64;
    }
    for (unsigned i = 0; i < n; i++) args[count] = LLVMGetParam(f, i), types[count++] = params[i];
    LLVMValueRef r = cgl_call(g, runtime, ret, types, count, args);
    if (ret == g->void_t) LLVMBuildRetVoid(g->b);
    else LLVMBuildRet(g->b, r);
}

static void emit_shared_api(Cpu *c) {
    CgLlvm *g = &c->g;
    LLVMTypeRef seed[1] = {g->i64}, state[1] = {g->ptr}, path[2] = {g->ptr, g->ptr}, set[3] = {g->ptr, g->i32, g->i64};
    api_function(c, "create", g->ptr, seed, 1, "tsr_state_create", true);
    LLVMTypeRef create_data[4] = {g->i64, g->ptr, g->ptr, g->i32};
    api_function(c, "create_data", g->ptr, create_data, 4, "tsr_state_create_data", true);
    api_function(c, "destroy", g->void_t, state, 1, "tsr_state_destroy", false);
    api_function(c, "last_error", g->ptr, NULL, 0, "tsr_last_error", false);
    api_function(c, "save", g->i32, path, 2, "tsr_state_save", false);
    api_function(c, "load", g->i32, path, 2, "tsr_state_load", false);
    LLVMTypeRef init_from[3] = {g->ptr, g->ptr, g->ptr};
    api_function(c, "init_from", g->i32, init_from, 3, "tsr_state_init_from", false);
    api_function(c, "set_symbol", g->i32, set, 3, "tsr_state_set_symbol", false);
    LLVMTypeRef set_option[3] = {g->ptr, g->ptr, g->f64}, option[3] = {g->ptr, g->ptr, g->ptr};
    api_function(c, "set_option", g->i32, set_option, 3, "tsr_state_set_option", false);
    api_function(c, "option", g->i32, option, 3, "tsr_state_option", false);
    /* The library's runtime, and so its thread pool, is its own (docs/runtime.md §8). */
    LLVMTypeRef threads[1] = {g->i32};
    api_function(c, "set_num_threads", g->void_t, threads, 1, "tsr_set_num_threads", false);
    api_function(c, "num_threads", g->i32, NULL, 0, "tsr_num_threads", false);
    if (c->opt->gpu_first) { /* a GPU model: buffers live on the GPU (docs/runtime.md §15) */
        LLVMTypeRef buffer[2] = {g->ptr, g->i32};
        api_function(c, "host_buffer", g->ptr, buffer, 2, "tsr_state_host_buffer", false);
        api_function(c, "sync_host", g->i32, state, 1, "tsr_state_sync_host", false);
        api_function(c, "sync_device", g->i32, state, 1, "tsr_state_sync_device", false);
    }
}

/* ---- The module ------------------------------------------------------------------------------------ */

bool cg_cpu_emit(const IrProgram *ir, const unsigned char *image, size_t image_size, const CgOptions *o,
                 CgFormat format, CgBytes *out) {
    LLVMTargetMachineRef tm = cgl_target_machine(o->target->triple, o->target->cpu, o->opt_level);
    if (!tm) return false;
    Cpu c = {.opt = o};
    CgLlvm *g = &c.g;
    cgl_init(g, ir, o->module, tm);
    g->bf16_convert = o->target->bf16_convert;
    g->vector_floats = o->target->vector_floats;
    LLVMTypeRef fields[ABI_STATE_FIELDS] = {g->ptr, g->ptr, g->ptr, g->i64, g->i64}; /* tsr_state (abi.h) */
    c.state_t = LLVMStructTypeInContext(g->ctx, fields, ABI_STATE_FIELDS, 0);

    /* The model image and its size. */
    const char *name = arena_printf(ir->arena, "%s__image", o->module);
    LLVMValueRef init = LLVMConstStringInContext(g->ctx, (const char *)image, (unsigned)image_size, 1);
    c.image = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(c.image, init);
    LLVMSetGlobalConstant(c.image, 1);
    LLVMSetAlignment(c.image, 16);
    name = arena_printf(ir->arena, "%s__image_size", o->module);
    c.image_size = LLVMConstInt(g->i64, image_size, 0);
    LLVMValueRef size_global = LLVMAddGlobal(g->mod, g->i64, name);
    LLVMSetInitializer(size_global, c.image_size);
    LLVMSetGlobalConstant(size_global, 1);

    if (o->profile) {
        c.profile_ns = LLVMAddGlobal(g->mod, g->i64, "profile_ns.placeholder");
        c.profile_calls = LLVMAddGlobal(g->mod, g->i64, "profile_calls.placeholder");
        c.profile_report = LLVMAddFunction(g->mod, arena_printf(ir->arena, "%s_profile_report", o->module),
                                           LLVMFunctionType(g->void_t, NULL, 0, 0));
    }
    LLVMValueRef *routines = calloc(ir->function_count + 1, sizeof *routines);
    if (!routines) diag_fatal_oom();
    c.routine_names = abi_routine_names(ir);
    for (uint32_t f = 0; f < ir->function_count; f++) routines[f] = o->gpu_first ? emit_gpu_routine(&c, f) : emit_routine(&c, f);
    if (o->with_main) emit_main(&c, routines);
    if (o->shared_api) emit_shared_api(&c);
    if (o->profile) profile_finish(&c);
    if (o->target->vector_floats == 16) use_whole_avx512(g);
    bool ok = cgl_finish(g, tm, o->opt_level, c.split, format, out);
    free(routines);
    cgl_dispose(g);
    LLVMDisposeTargetMachine(tm);
    return ok;
}
