/* target.c — choosing a Target from --target and --cpu (target.h).
 *
 * The CPU's vector width decides the register tile of contractions (sched.c): with AVX-512
 * (32 registers of 16 floats) a tile of 6 rows by 4 vectors keeps 24 accumulators, 4 vectors of
 * the packed operand and a broadcast in registers; with AVX2 (16 registers of 8 floats) 6 by 2;
 * with SSE (16 registers of 4 floats) 4 by 2.  The host's width comes from LLVM's view of its
 * features; a named CPU's from a table of the x86-64 levels and common CPU names (an unknown
 * name gets the baseline's parameters, which are correct everywhere, only slower).
 *
 * Requires: LLVM's host queries (llvm-c/TargetMachine.h). */
#include "target.h"

#include "diag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* CPUs with AVX-512F, and with AVX2 + FMA (prefixes of LLVM's names). */
static const char *const avx512_cpus[] = {"x86-64-v4", "znver4", "znver5", "skylake-avx512", "cascadelake",
                                          "cooperlake", "cannonlake", "icelake", "tigerlake", "rocketlake",
                                          "sapphirerapids", "emeraldrapids", "graniterapids", "knl", "knm"};
static const char *const avx2_cpus[] = {"x86-64-v3", "haswell", "broadwell", "skylake", "alderlake", "raptorlake",
                                        "meteorlake", "arrowlake", "lunarlake", "gracemont", "znver1", "znver2",
                                        "znver3", "bdver4"};

static bool named_in(const char *cpu, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strncmp(cpu, list[i], strlen(list[i])) == 0) return true;
    return false;
}

static unsigned host_vector_floats(void) {
    char *features = LLVMGetHostCPUFeatures();
    unsigned w = features && strstr(features, "+avx512f") ? 16 : features && strstr(features, "+avx2") ? 8 : 4;
    LLVMDisposeMessage(features);
    return w;
}

void target_select(const char *triple, const char *cpu, Target *out) {
    bool native = !cpu || strcmp(cpu, "native") == 0;
    *out = (Target){.kind = TARGET_CPU, .name = "x86-64", .triple = triple, .cpu = cpu,
                    .l1_bytes = 32u << 10, .l2_bytes = 1u << 20,
                    .parallel_work = 1 << 20, .grain_work = 1 << 17, .nontemporal_bytes = 16u << 20,
                    .prefetch_cells = 512};
    if (native && !triple) {
        char *host = LLVMGetHostCPUName();
        snprintf(out->cpu_shown, sizeof out->cpu_shown, "%s", host && *host ? host : "native");
        LLVMDisposeMessage(host);
        out->vector_floats = host_vector_floats();
    } else {
        const char *name = native ? "x86-64" : cpu;
        snprintf(out->cpu_shown, sizeof out->cpu_shown, "%s", name);
        out->vector_floats = named_in(name, avx512_cpus, sizeof avx512_cpus / sizeof *avx512_cpus) ? 16
                           : named_in(name, avx2_cpus, sizeof avx2_cpus / sizeof *avx2_cpus)     ? 8
                                                                                                 : 4;
    }
    out->tile_rows = out->vector_floats == 4 ? 4 : 6;
    out->tile_vectors = out->vector_floats == 16 ? 4 : 2;
}

bool target_is_cuda(const char *triple) {
    return triple && (strcmp(triple, "cuda") == 0 || strcmp(triple, "nvptx64-nvidia-cuda") == 0);
}

bool target_select_cuda(const char *arch, Target *out) {
    if (!arch) arch = "sm_80";
    bool ok = strncmp(arch, "sm_", 3) == 0 && arch[3] >= '1' && arch[3] <= '9';
    for (const char *p = arch + 3; ok && *p; p++) ok = (*p >= '0' && *p <= '9') || (p[1] == 0 && *p == 'a');
    if (!ok || atoi(arch + 3) < 50) {
        diag_error_noloc("unknown GPU architecture '%s' (--arch=sm_80, sm_90, …: sm_50 or later)", arch);
        return false;
    }
    *out = (Target){.kind = TARGET_CUDA, .name = "cuda", .triple = "nvptx64-nvidia-cuda", .cpu = arch,
                    .gpu_arch = arch, .gpu_threads = 256, .vector_floats = 1};
    snprintf(out->cpu_shown, sizeof out->cpu_shown, "%s", arch);
    return true;
}
