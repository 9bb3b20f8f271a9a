/* target.c — choosing a Target from --target and --cpu (target.h).
 *
 * The CPU's vector width decides the register tile of contractions (sched_tile.c): with AVX-512
 * (32 registers of 16 floats) a tile of 6 rows by 4 vectors keeps 24 accumulators, 4 vectors of
 * the packed operand and a broadcast in registers; with AVX2 (16 registers of 8 floats) 6 by 2;
 * with SSE (16 registers of 4 floats) 4 by 2.  The host's width comes from LLVM's view of its
 * features; a named CPU's from a table of the x86-64 levels and common CPU names (an unknown
 * name gets the baseline's parameters, which are correct everywhere, only slower).  The same
 * reading gives the instruction-set extensions the code may use (Target.cpu_features), which
 * the model image carries so that the runtime refuses, with a message, to run code the CPU it
 * runs on cannot execute.
 *
 * Requires: LLVM's host queries (llvm-c/TargetMachine.h). */
#include "sched/target.h"

#include <llvm/Config/llvm-config.h>

#include "base/diag.h"
#include "runtime/image_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

/* CPUs with AVX-512F, and with AVX2 + FMA (prefixes of LLVM's names). */
static const char *const avx512_cpus[] = {"x86-64-v4", "znver4", "znver5", "skylake-avx512", "cascadelake",
                                          "cooperlake", "cannonlake", "icelake", "tigerlake", "rocketlake",
                                          "sapphirerapids", "emeraldrapids", "graniterapids", "knl", "knm"};
static const char *const avx2_cpus[] = {"x86-64-v3", "haswell", "broadwell", "skylake", "alderlake", "raptorlake",
                                        "meteorlake", "arrowlake", "lunarlake", "gracemont", "znver1", "znver2",
                                        "znver3", "bdver4"};

/* Those of them with AVX-512 BF16 (VDPBF16PS). */
static const char *const avx512_bf16_cpus[] = {"znver4", "znver5", "cooperlake", "sapphirerapids", "emeraldrapids",
                                               "graniterapids"};

/* Those with a 48 KiB, 12-way L1 data cache (the others of the tables: 32 KiB, 8-way). */
static const char *const l1_12_way_cpus[] = {"icelake", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
                                             "graniterapids", "alderlake", "raptorlake", "meteorlake", "arrowlake",
                                             "lunarlake", "znver5"};

static bool named_in(const char *cpu, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strncmp(cpu, list[i], strlen(list[i])) == 0) return true;
    return false;
}

/* The TSR_CPU_* features (runtime/image_format.h) that LLVM's list of the host's features
 * ("+avx2,-avx512f,…") enables. */
static uint32_t host_cpu_features(void) {
    static const char *const names[] = {
#define TSR_CPU_NAME(name, llvm_name) llvm_name,
        TSR_CPU_FEATURE_KINDS(TSR_CPU_NAME)
#undef TSR_CPU_NAME
    };
    char *list = LLVMGetHostCPUFeatures();
    uint32_t features = 0;
    for (const char *p = list ? list : ""; *p;) {
        size_t n = strcspn(p, ",");
        if (*p == '+')
            for (unsigned f = 0; f < TSR_CPU_FEATURE_COUNT; f++)
                if (strlen(names[f]) == n - 1 && strncmp(p + 1, names[f], n - 1) == 0) features |= 1u << f;
        p += n + (p[n] == ',');
    }
    LLVMDisposeMessage(list);
    return features;
}

/* The features code for a named CPU may use: the x86-64 levels' own sets; a CPU of the tables
 * above, the level it belongs to (Xeon Phi has AVX-512F and CD only); any other name, none
 * (its code is checked by nobody: the user named the CPU). */
static uint32_t named_cpu_features(const char *name) {
    if (strcmp(name, "x86-64-v2") == 0) return TSR_CPU_LEVEL_V2;
    if (strncmp(name, "knl", 3) == 0 || strncmp(name, "knm", 3) == 0)
        return TSR_CPU_LEVEL_V3 | TSR_CPU_FEATURE(AVX512F) | TSR_CPU_FEATURE(AVX512CD);
    if (named_in(name, avx512_bf16_cpus, sizeof avx512_bf16_cpus / sizeof *avx512_bf16_cpus))
        return TSR_CPU_LEVEL_V4 | TSR_CPU_FEATURE(AVX512BF16);
    if (named_in(name, avx512_cpus, sizeof avx512_cpus / sizeof *avx512_cpus)) return TSR_CPU_LEVEL_V4;
    if (named_in(name, avx2_cpus, sizeof avx2_cpus / sizeof *avx2_cpus)) return TSR_CPU_LEVEL_V3;
    return 0;
}

void target_select(const char *triple, const char *cpu, Target *out) {
    bool native = !cpu || strcmp(cpu, "native") == 0;
    *out = (Target){.kind = TARGET_CPU, .name = "x86-64", .triple = triple, .cpu = cpu,
                    .l1_bytes = 32u << 10, .l1_ways = 8, .l2_bytes = 1u << 20, .stream_bytes = 16u << 20,
                    .parallel_work = 1 << 14, .grain_work = 1 << 13, .nontemporal_bytes = 16u << 20,
                    .prefetch_cells = 512};
    if (native && !triple) {
        char *host = LLVMGetHostCPUName();
        snprintf(out->cpu_shown, sizeof out->cpu_shown, "%s", host && *host ? host : "native");
        LLVMDisposeMessage(host);
        out->cpu_features = host_cpu_features();
    } else {
        const char *name = native ? "x86-64" : cpu;
        snprintf(out->cpu_shown, sizeof out->cpu_shown, "%s", name);
        out->cpu_features = named_cpu_features(name);
    }
    out->vector_floats = out->cpu_features & TSR_CPU_FEATURE(AVX512F) ? 16
                       : out->cpu_features & TSR_CPU_FEATURE(AVX2)    ? 8
                                                                      : 4;
    /* VDPBF16PS does 32 multiply-adds where an f32 FMA does 16: on AMD's Zen 4 one of either a
     * cycle, so twice the f32 rate (tools/probes/bf16_throughput.c); on Sapphire Rapids one every
     * two cycles against two FMAs a cycle, half the rate.  So only AMD's CPUs use it. */
    out->bf16_convert = (out->cpu_features & TSR_CPU_FEATURE(AVX512BF16)) && out->vector_floats == 16;
    out->bf16_pairs = (out->cpu_features & TSR_CPU_FEATURE(AVX512BF16)) && strncmp(out->cpu_shown, "znver", 5) == 0;
    if (named_in(out->cpu_shown, l1_12_way_cpus, sizeof l1_12_way_cpus / sizeof *l1_12_way_cpus))
        out->l1_bytes = 48u << 10, out->l1_ways = 12;
    out->tile_rows = out->vector_floats == 4 ? 4 : 6;
    out->tile_vectors = out->vector_floats == 16 ? 4 : 2;
}

/* ---- Naming a CPU --------------------------------------------------------------------------------
 *
 * LLVM's C API has no list of a target's CPUs and no test of a name: a target machine made for
 * an unknown one prints "'NAME' is not a recognized processor for this target" on the standard
 * error, goes on for the generic CPU, and code generation may then fail fatally ("64-bit code
 * requested on a subtarget that doesn't support it").  A machine made for the CPU "help" prints
 * the list instead ("Available CPUs for this target:", a line "  NAME - Select the NAME
 * processor." each, then the features).  That list is read here, with the standard error
 * redirected into a temporary file for the moment the machine is made, so that --cpu is checked
 * before any work, with a suggestion, and `tsrc --cpu=help` prints it. */

static char **cpu_names;
static size_t cpu_name_count;
static bool cpu_names_read;

/* LLVM's list of CPU names for `triple` (NULL: the host's), read once; none when LLVM does not
 * know the triple or its list cannot be read. */
static void read_cpu_names(const char *triple) {
    if (cpu_names_read) return;
    cpu_names_read = true;
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    char *host_triple = LLVMGetDefaultTargetTriple(), *err = NULL;
    if (!triple) triple = host_triple;
    LLVMTargetRef target;
    FILE *log = NULL;
    int saved = -1;
    if (LLVMGetTargetFromTriple(triple, &target, &err) == 0 && (log = tmpfile()) && (fflush(stderr), saved = dup(2)) >= 0 &&
        dup2(fileno(log), 2) >= 0) {
        LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, "help", "", LLVMCodeGenLevelNone,
                                                          LLVMRelocDefault, LLVMCodeModelDefault);
        if (tm) LLVMDisposeTargetMachine(tm);
        dup2(saved, 2);
        rewind(log);
        char line[512];
        bool in_list = false;
        while (fgets(line, sizeof line, log)) {
            if (strncmp(line, "Available CPUs", 14) == 0) {
                in_list = true;
                continue;
            }
            char name[128], dash[4];
            if (!in_list || line[0] != ' ') {
                if (cpu_name_count) break; /* the features follow the CPUs */
                continue;
            }
            if (sscanf(line, " %127s %3s", name, dash) != 2 || strcmp(dash, "-") != 0) continue;
            char *copy = strdup(name);
            char **grown = copy ? realloc(cpu_names, (cpu_name_count + 1) * sizeof *cpu_names) : NULL;
            if (!grown) {
                free(copy);
                break;
            }
            cpu_names = grown;
            cpu_names[cpu_name_count++] = copy;
        }
    }
    if (saved >= 0) close(saved);
    if (log) fclose(log);
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(host_triple);
}

bool target_print_cpus(const char *triple, FILE *out) {
    read_cpu_names(triple);
    if (!cpu_name_count) return false;
    fputs("native\n", out);
    for (size_t i = 0; i < cpu_name_count; i++) fprintf(out, "%s\n", cpu_names[i]);
    return true;
}

const char *target_cpu_problem(const char *triple, const char *cpu) {
    if (strcmp(cpu, "native") == 0) return NULL;
    read_cpu_names(triple);
    if (!cpu_name_count) return NULL;
    for (size_t i = 0; i < cpu_name_count; i++)
        if (strcmp(cpu, cpu_names[i]) == 0) return NULL;
    const char *near = diag_closest_name(cpu, (const char *const *)cpu_names, cpu_name_count);
    static char message[512];
    snprintf(message, sizeof message, "unknown CPU '%s' (%s%s%s'tsrc --cpu=help' lists them all)", cpu,
             near ? "did you mean '" : "", near ? near : "", near ? "'? " : "");
    return message;
}

bool target_is_cuda(const char *triple) {
    return triple && (strcmp(triple, "cuda") == 0 || strcmp(triple, "nvptx64-nvidia-cuda") == 0);
}

/* The GPU architectures, sm_50 and later, that the LLVM tsrc is built with generates PTX for:
 * another one (sm_100 under LLVM 19) would be PTX for a default target that ptxas and the driver
 * refuse, after a warning of LLVM's. */
static const char *const gpu_archs[] = {
    "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87",
    "sm_89", "sm_90", "sm_90a",
#if LLVM_VERSION_MAJOR >= 20
    "sm_100", "sm_100a", "sm_101", "sm_101a", "sm_120", "sm_120a",
#endif
};

bool target_select_cuda(const char *arch, Target *out) {
    if (!arch) arch = "sm_80";
    bool known_arch = false; /* the whole name (a prefix let sm_80a and sm_80", "x through) */
    for (size_t i = 0; i < sizeof gpu_archs / sizeof *gpu_archs; i++) known_arch |= strcmp(arch, gpu_archs[i]) == 0;
    if (!known_arch) {
        char known[256] = "";
        size_t used = 0;
        for (size_t i = 0; i < sizeof gpu_archs / sizeof *gpu_archs && used < sizeof known; i++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", gpu_archs[i]);
        diag_error_noloc("unknown GPU architecture '%s' (--arch= one of %s)", arch, known);
        return false;
    }
    *out = (Target){.kind = TARGET_CUDA, .name = "cuda", .triple = "nvptx64-nvidia-cuda", .cpu = arch,
                    .gpu_arch = arch, .gpu_threads = 256, .gpu_blocks = 128, .vector_floats = 1};
    snprintf(out->cpu_shown, sizeof out->cpu_shown, "%s", arch);
    return true;
}
