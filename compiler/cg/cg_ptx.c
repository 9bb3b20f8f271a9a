/* cg_ptx.c — code generation for NVIDIA GPUs: every kernel of the program as one PTX module,
 * through LLVM's NVPTX back end (cg_ptx.h).
 *
 * What it does.  Each kernel of each function (kernel.c, over the GPU schedule of
 * sched_gpu.c) becomes an entry point (the ptx_kernel calling convention) named
 * MODULE_FUNCTION_kN, whose parameters are one i64 per index symbol (the state's values, in
 * symbol order), the run's random key (two i64: seed and run number, abi.h) and then one
 * pointer per state buffer the kernel touches (device memory, in id order): the runtime (runtime/cuda.c) launches it with exactly these.  The body is
 * cg_llvm.c's, as on the CPU: the gpu.x/y/z (or gpu.block/gpu.thread) loops read the block and
 * thread indices, the loops below them run in each thread.  A block's kernel's shared panels
 * are arrays in shared memory (address space 3), one per kernel, 16-byte aligned.  Scalar operations are emitted without fast-math flags,
 * and NVPTX then prints multiplications and additions with an explicit rounding (mul.rn,
 * add.rn), which ptxas never contracts into an fma: arithmetic, sqrt (sqrt.rn) and division
 * (div.rn) give the reference executor's results bit for bit.  exp, log, tanh and sigmoid are
 * tsrc's own sequences of those operations and fma.rn (cg_approx.c), so they agree bit for bit
 * too; the other transcendental functions (pow, sin, cos, log2, exp2) and mod's fmodf are CUDA's
 * libdevice (__nv_powf …), linked into the module from the toolkit's
 * nvvm/libdevice/libdevice.10.bc ($TSR_LIBDEVICE, else $CUDA_HOME/nvvm/libdevice, else
 * /usr/local/cuda/nvvm/libdevice); they may differ from glibc's in the last bits (fmodf, exact,
 * does not).  A program that needs them where no libdevice is found is refused with a message
 * saying so.
 *
 * The result is the PTX text and, for the image (image.c) and the manifest (header.c), every
 * kernel's launch (grid, block) and parameters with the buffers it writes.
 *
 * Requires: a verified IrProgram scheduled for a TARGET_CUDA target (sched_gpu.c). */
#include "cg/cg_ptx.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>

#include "cg/abi.h"
#include "base/diag.h"
#include "runtime/image_format.h"
#include "sched/kernel.h"

enum { PTX_KERNEL_CALL_CONV = 71, /* LLVM's CallingConv::PTX_Kernel */
       SHARED_ADDRESS_SPACE = 3,
       STATIC_SHARED_BYTES = 48 << 10 /* the most a kernel's static shared arrays may take */ };

/* A shared buffer's bytes, rounded up to the 16 that align the next one. */
static uint32_t shared_buffer_bytes(const IrBuffer *b) { return (uint32_t)((b->size * ir_dtype_bytes(b->dtype) + 15) / 16 * 16); }

/* Where kernel k's shared buffers lie (at[i], the first byte of locals[i]), one after another,
 * each 16-byte aligned, a swizzled one (ir.h IrBuffer.swizzle) on a multiple of 8·swizzle bytes,
 * the most of which is *align (16 where none is swizzled); in a kernel of segments or a chain,
 * each part's from byte 0, since a block runs one segment alone and a chain's parts one after
 * another.  Returns the bytes the kernel's shared memory takes. */
static uint64_t shared_layout(const IrProgram *ir, const Kernel *k, uint32_t *at, uint32_t *align) {
    uint64_t total = 0;
    bool parts = k->segments || k->chain;
    *align = 16;
    for (uint32_t p = 0; p < (parts ? k->part_count : 1); p++) {
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < k->local_count; i++) {
            const IrBuffer *b = &ir->buffers[k->locals[i]];
            if (!b->gpu_shared || (parts && k->local_part[i] != p)) continue;
            if (b->swizzle) {
                uint32_t period = 8 * b->swizzle;
                bytes = (bytes + period - 1) / period * period;
                if (period > *align) *align = period;
            }
            at[i] = (uint32_t)bytes;
            bytes += shared_buffer_bytes(b);
        }
        if (bytes > total) total = bytes;
    }
    return total;
}

/* `base` (a shared pointer) moved up to the next multiple of `align` bytes, at run time. */
static LLVMValueRef aligned_up(CgLlvm *g, LLVMValueRef base, uint32_t align) {
    LLVMValueRef address = LLVMBuildPtrToInt(g->b, base, g->i64, "");
    LLVMValueRef idx[1] = {LLVMBuildAnd(g->b, LLVMBuildNeg(g->b, address, ""), cgl_iconst(g, align - 1), "pad")};
    return LLVMBuildInBoundsGEP2(g->b, LLVMInt8TypeInContext(g->ctx), base, idx, 1, "aligned");
}

/* One entry point; fills `info` (its launch and parameters). */
static void emit_kernel(CgLlvm *g, const IrFunction *fn, const Kernel *k, const char *name, bool *written,
                        GpuKernelInfo *info) {
    const IrProgram *ir = g->ir;
    uint32_t nsym = ir->symbol_count + ABI_SYMBOL_KEY_WORDS, n = nsym + k->buffer_count; /* the key follows the symbols */
    LLVMTypeRef *params = calloc(n + 1, sizeof *params);
    LLVMValueRef *buffers = calloc(k->buffer_count + 1, sizeof *buffers);
    if (!params || !buffers) diag_fatal_oom();
    for (uint32_t i = 0; i < n; i++) params[i] = i < nsym ? g->i64 : g->ptr;
    LLVMValueRef f = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->void_t, params, n, 0));
    LLVMSetFunctionCallConv(f, PTX_KERNEL_CALL_CONV);
    cgl_set_attr(g, f, LLVMAttributeFunctionIndex, "nounwind");
    /* Device buffers are cuMemAlloc's, aligned to 256 bytes: LLVM may then merge adjacent
     * loads and stores into vector ones. */
    LLVMAttributeRef align = LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("align", 5), 256);
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        cgl_set_attr(g, f, 1 + nsym + i, "noalias");
        LLVMAddAttributeAtIndex(f, 1 + nsym + i, align);
    }
    g->fn = f;
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f, "entry"));
    /* The symbols as the array cgl_kernel_body reads (SROA folds it back into the params). */
    LLVMValueRef symbols = LLVMBuildAlloca(g->b, LLVMArrayType(g->i64, nsym + 1), "symbols");
    for (uint32_t s = 0; s < nsym; s++) {
        LLVMValueRef idx[1] = {cgl_iconst(g, s)};
        LLVMBuildStore(g->b, LLVMGetParam(f, s), LLVMBuildInBoundsGEP2(g->b, g->i64, symbols, idx, 1, ""));
    }
    for (uint32_t i = 0; i < k->buffer_count; i++) buffers[i] = LLVMGetParam(f, nsym + i);
    /* Shared-memory panels (sched_gpu.c rewrites 6 and 6t): arrays in address space 3, one per
     * kernel, each 16-byte aligned; where they are more than STATIC_SHARED_BYTES together, parts
     * of the kernel's dynamic shared memory instead (asked for at launch: shared_bytes). */
    uint32_t *at = calloc(k->local_count + 1, sizeof *at), shared_align; /* each shared buffer's first byte */
    if (!at) diag_fatal_oom();
    uint64_t shared_bytes = shared_layout(ir, k, at, &shared_align);
    bool dynamic = shared_bytes > STATIC_SHARED_BYTES;
    /* Dynamic shared memory starts 16-byte aligned: room to move its start up to a swizzle's period. */
    if (dynamic) shared_bytes += shared_align - 16;
    /* A kernel of segments or a chain: one array, each part's buffers from its start (shared_layout);
     * likewise a kernel with swizzled panels, the array aligned to their period. */
    LLVMValueRef parts_shared = NULL;
    if ((k->segments || k->chain || shared_align > 16) && shared_bytes && !dynamic) {
        LLVMTypeRef type = LLVMArrayType(g->f32, (unsigned)(shared_bytes / 4));
        parts_shared = LLVMAddGlobalInAddressSpace(g->mod, type, arena_printf(ir->arena, "%s_shared", name), SHARED_ADDRESS_SPACE);
        LLVMSetLinkage(parts_shared, LLVMInternalLinkage);
        LLVMSetInitializer(parts_shared, LLVMGetUndef(type));
        LLVMSetAlignment(parts_shared, shared_align);
    }
    LLVMValueRef dynamic_shared = NULL;
    if (dynamic) {
        dynamic_shared = LLVMAddGlobalInAddressSpace(g->mod, LLVMArrayType(g->f32, 0), arena_printf(ir->arena, "%s_shared", name),
                                                     SHARED_ADDRESS_SPACE);
        LLVMSetLinkage(dynamic_shared, LLVMExternalLinkage);
        LLVMSetAlignment(dynamic_shared, 16);
        if (shared_align > 16) dynamic_shared = aligned_up(g, dynamic_shared, shared_align);
    }
    for (uint32_t i = 0; i < k->local_count; i++) {
        const IrBuffer *b = &ir->buffers[k->locals[i]];
        if (!b->gpu_shared) continue;
        uint32_t bytes = shared_buffer_bytes(b);
        if (dynamic || parts_shared) {
            LLVMValueRef idx[1] = {cgl_iconst(g, at[i])};
            g->buffer[k->locals[i]] = LLVMBuildInBoundsGEP2(g->b, LLVMInt8TypeInContext(g->ctx),
                                                            dynamic ? dynamic_shared : parts_shared, idx, 1, "");
            continue;
        }
        LLVMTypeRef type = LLVMArrayType(g->f32, bytes / 4); /* 4-byte words */
        LLVMValueRef shared = LLVMAddGlobalInAddressSpace(g->mod, type, arena_printf(ir->arena, "%s_shared%u", name, i),
                                                          SHARED_ADDRESS_SPACE);
        LLVMSetLinkage(shared, LLVMInternalLinkage);
        LLVMSetInitializer(shared, LLVMGetUndef(type));
        LLVMSetAlignment(shared, 16);
        g->buffer[k->locals[i]] = shared;
    }
    memcpy(g->block_dim, k->block, sizeof g->block_dim);
    cgl_kernel_body(g, fn, k, cgl_iconst(g, 0), cgl_iconst(g, k->extent), symbols, buffers);
    LLVMBuildRetVoid(g->b);
    for (uint32_t i = 0; i < k->local_count; i++) g->buffer[k->locals[i]] = NULL;

    Arena *arena = ir->arena;
    for (uint32_t i = 0; i < k->count; i++) kernel_note_stores(k->stmts[i], written);
    uint32_t *ids = arena_alloc(arena, (k->buffer_count + 1) * sizeof *ids);
    bool *writes = arena_alloc(arena, (k->buffer_count + 1) * sizeof *writes);
    for (uint32_t i = 0; i < k->buffer_count; i++) {
        ids[i] = k->buffers[i];
        writes[i] = written[k->buffers[i]];
        written[k->buffers[i]] = false;
    }
    for (uint32_t i = 0; i < k->local_count; i++) written[k->locals[i]] = false;
    *info = (GpuKernelInfo){.name = name, .shared_bytes = dynamic ? (uint32_t)shared_bytes : 0, .param_count = k->buffer_count,
                            .params = ids, .writes = writes};
    memcpy(info->grid, k->grid, sizeof k->grid);
    memcpy(info->block, k->block, sizeof k->block);
    free(params);
    free(buffers);
    free(at);
}

/* Which of each kernel's by-value parameters (the first symbol_count index symbols, then the
 * run's key) its code reads, as TSR_GPU_READS_* bits in info->scalars: those the PTX's text
 * names from the kernel's body (LLVM's NVPTX back end reads a parameter `NAME_param_I` by that
 * name, and leaves out the reads whose values nothing uses, the key of a kernel without random
 * numbers).  A replayed CUDA graph refreshes the parameters of the kernels that read a value
 * that changed since (runtime/cuda.c).  Kernels appear in the text in the order they were
 * emitted; `from` keeps the scan linear. */
static void note_scalars_read(const char *ptx, GpuKernelInfo *infos, uint32_t count, uint32_t symbol_count) {
    const char *from = ptx;
    for (uint32_t k = 0; k < count; k++) {
        GpuKernelInfo *info = &infos[k];
        size_t len = strlen(info->name);
        const char *entry = NULL;
        for (const char *at = from; (at = strstr(at, ".entry ")) != NULL; at += 7)
            if (!strncmp(at + 7, info->name, len) && at[7 + len] == '(') {
                entry = at;
                break;
            }
        if (!entry) { /* not where the order says: every entry reads every value, to be safe */
            info->scalars = TSR_GPU_READS_SYMBOLS | TSR_GPU_READS_KEY;
            continue;
        }
        const char *body = strchr(entry, '{'), *end = body ? strstr(body, "\n.visible .entry ") : NULL;
        if (!end) end = body ? strstr(body, "\n.entry ") : NULL;
        if (!end) end = body ? body + strlen(body) : entry;
        for (const char *at = body; at && at < end && (at = strstr(at, "_param_")) != NULL && at < end; at += 7) {
            if ((size_t)(at - body) < len || strncmp(at - len, info->name, len)) continue;
            char *digits_end;
            unsigned long i = strtoul(at + 7, &digits_end, 10);
            if (digits_end == at + 7) continue;
            if (i < symbol_count) info->scalars |= TSR_GPU_READS_SYMBOLS;
            else if (i < symbol_count + ABI_SYMBOL_KEY_WORDS) info->scalars |= TSR_GPU_READS_KEY;
        }
        from = end;
    }
}

/* Whether the module calls a libdevice function. */
static bool needs_libdevice(LLVMModuleRef mod) {
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t len;
        const char *name = LLVMGetValueName2(f, &len);
        if (LLVMIsDeclaration(f) && len > 5 && strncmp(name, "__nv_", 5) == 0) return true;
    }
    return false;
}

const char *cg_cuda_toolkit_file(Arena *arena, const char *relative, int mode) {
    const char *home = getenv("CUDA_HOME");
    const char *candidates[2] = {home && *home ? arena_printf(arena, "%s/%s", home, relative) : NULL,
                                 arena_printf(arena, "/usr/local/cuda/%s", relative)};
    for (int i = 0; i < 2; i++)
        if (candidates[i] && access(candidates[i], mode) == 0) return candidates[i];
    return NULL;
}

static const char *libdevice_path(Arena *arena) {
    const char *env = getenv("TSR_LIBDEVICE");
    if (env && *env) return env;
    return cg_cuda_toolkit_file(arena, "nvvm/libdevice/libdevice.10.bc", R_OK);
}

/* The first error LLVM reports while libdevice is read (a file that is not bitcode, or cut
 * short): kept for tsrc's own message, where LLVM's default handler would print it bare and
 * exit. */
typedef struct LibdeviceDiag {
    char text[512];
} LibdeviceDiag;

static void libdevice_diagnostic(LLVMDiagnosticInfoRef info, void *context) {
    LibdeviceDiag *d = context;
    if (LLVMGetDiagInfoSeverity(info) != LLVMDSError || d->text[0]) return;
    char *text = LLVMGetDiagInfoDescription(info);
    snprintf(d->text, sizeof d->text, "%s", text ? text : "");
    LLVMDisposeMessage(text);
}

/* Link libdevice into the module; its functions become internal, so that the pipeline keeps
 * only those the kernels call. */
static bool link_libdevice(CgLlvm *g) {
    const char *path = libdevice_path(g->ir->arena);
    if (!path) {
        diag_error_noloc("this program uses functions (sin, cos, log2, exp2, **, mod of numbers) that the GPU target "
                         "takes from CUDA's libdevice, and none was found (looked in $CUDA_HOME/nvvm/libdevice and "
                         "/usr/local/cuda/nvvm/libdevice; set TSR_LIBDEVICE to libdevice.10.bc)");
        return false;
    }
    LLVMMemoryBufferRef buf;
    char *err = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &err)) {
        diag_error_noloc("cannot read libdevice '%s': %s", path, err ? err : "");
        LLVMDisposeMessage(err);
        return false;
    }
    LLVMModuleRef lib;
    LibdeviceDiag why = {{0}};
    LLVMDiagnosticHandler handler = LLVMContextGetDiagnosticHandler(g->ctx);
    void *handler_context = LLVMContextGetDiagnosticContext(g->ctx);
    LLVMContextSetDiagnosticHandler(g->ctx, libdevice_diagnostic, &why);
    bool bad = LLVMParseBitcodeInContext2(g->ctx, buf, &lib);
    LLVMContextSetDiagnosticHandler(g->ctx, handler, handler_context);
    LLVMDisposeMemoryBuffer(buf);
    if (bad) {
        diag_error_noloc("'%s' is not LLVM bitcode%s%s (TSR_LIBDEVICE must name libdevice.10.bc)", path,
                         why.text[0] ? ": " : "", why.text);
        return false;
    }
    LLVMSetTarget(lib, LLVMGetTarget(g->mod));
    LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(g->mod));
    if (LLVMLinkModules2(g->mod, lib)) {
        diag_error_noloc("cannot link libdevice '%s' into the GPU module", path);
        return false;
    }
    for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f))
        if (!LLVMIsDeclaration(f) && LLVMGetFunctionCallConv(f) != PTX_KERNEL_CALL_CONV)
            LLVMSetLinkage(f, LLVMInternalLinkage);
    for (LLVMValueRef v = LLVMGetFirstGlobal(g->mod); v; v = LLVMGetNextGlobal(v))
        if (!LLVMIsDeclaration(v)) LLVMSetLinkage(v, LLVMInternalLinkage);
    /* __nvvm_reflect("__CUDA_FTZ") is 0: denormals are kept, as on the CPU. */
    LLVMAddModuleFlag(g->mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                      LLVMValueAsMetadata(LLVMConstInt(g->i32, 0, 0)));
    return true;
}

bool cg_ptx_emit(IrProgram *ir, const Target *target, int opt_level, const char *module, PtxModule *out) {
    memset(out, 0, sizeof *out);
    LLVMTargetMachineRef tm = cgl_target_machine(target->triple, target->gpu_arch, opt_level);
    if (!tm) return false;
    CgLlvm g;
    cgl_init(&g, ir, module, tm);
    g.libdevice = true;
    uint32_t total = 0;
    KernelList *lists = calloc(ir->function_count + 1, sizeof *lists);
    bool *written = calloc(ir->buffer_count + 1, sizeof *written);
    if (!lists || !written) diag_fatal_oom();
    for (uint32_t f = 0; f < ir->function_count; f++) {
        lists[f] = kernel_outline(ir, &ir->functions[f], target);
        total += lists[f].count; /* at most: calls of the runtime are made by the host */
    }
    GpuKernelInfo *infos = arena_alloc(ir->arena, (total + 1) * sizeof *infos);
    out->function_first = arena_alloc(ir->arena, (ir->function_count + 1) * sizeof *out->function_first);
    uint32_t n = 0;
    const char **routine_names = abi_routine_names(ir);
    for (uint32_t f = 0; f < ir->function_count; f++) {
        const IrFunction *fn = &ir->functions[f];
        out->function_first[f] = n;
        const char *fname = routine_names[f];
        for (uint32_t k = 0; k < lists[f].count; k++) {
            if (lists[f].kernels[k].call) continue; /* the routine calls the runtime there (cg_cpu.c) */
            emit_kernel(&g, fn, &lists[f].kernels[k], arena_printf(ir->arena, "%s_%s_k%u", module, fname, k), written,
                        &infos[n]);
            n++;
        }
    }
    out->function_first[ir->function_count] = n;
    free(lists);
    free(written);
    bool ok = !needs_libdevice(g.mod) || link_libdevice(&g);
    ok = ok && cgl_finish(&g, tm, opt_level, false, CG_ASM, &out->ptx);
    cgl_dispose(&g);
    LLVMDisposeTargetMachine(tm);
    if (!ok) return false;
    /* NUL-terminate the text for the image and the runtime's loader. */
    unsigned char *text = realloc(out->ptx.data, out->ptx.size + 1);
    if (!text) diag_fatal_oom();
    text[out->ptx.size] = 0;
    out->ptx.data = text;
    note_scalars_read((const char *)text, infos, n, ir->symbol_count);
    out->gpu = (GpuImage){.ptx = (const char *)text, .arch = target->gpu_arch, .kernels = infos, .kernel_count = n};
    return true;
}
