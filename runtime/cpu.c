/* cpu.c — which of the x86-64 extensions a model's native code may use this CPU has.
 *
 * The compiler records in the model image the extensions (TSR_CPU_*, image_format.h) the CPU it
 * generated code for has: all of x86-64-v4's for --cpu=x86-64-v4, the build machine's own for
 * --cpu=native.  Before any generated code runs, the image reader (model.c) asks here which of
 * them the running CPU lacks, so a program built for AVX-512 and started on an AVX2 machine ends
 * with a message that names what is missing instead of dying of SIGILL.
 *
 * The answer comes from CPUID, and from XGETBV for the register state the operating system
 * saves: AVX needs the YMM state enabled, AVX-512 the opmask and ZMM states too.
 *
 * Requires: an x86-64 host (any other host reports every extension missing). */
#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t os_saved_state(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

uint32_t tsr_cpu_features(void) {
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned c1 = c;
    if (c1 & bit_SSE4_2) f |= TSR_CPU_FEATURE(SSE4_2);
    if (c1 & bit_POPCNT) f |= TSR_CPU_FEATURE(POPCNT);
    if (c1 & bit_MOVBE) f |= TSR_CPU_FEATURE(MOVBE);
    bool ymm = false, zmm = false;
    if ((c1 & bit_OSXSAVE) && (c1 & bit_AVX)) {
        uint64_t state = os_saved_state();
        ymm = (state & 0x6) == 0x6;   /* SSE and AVX registers */
        zmm = (state & 0xe6) == 0xe6; /* and opmask, ZMM 0-15 upper halves, ZMM 16-31 */
    }
    if (ymm) {
        f |= TSR_CPU_FEATURE(AVX);
        if (c1 & bit_FMA) f |= TSR_CPU_FEATURE(FMA);
        if (c1 & bit_F16C) f |= TSR_CPU_FEATURE(F16C);
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        if (b & bit_BMI) f |= TSR_CPU_FEATURE(BMI1);
        if (b & bit_BMI2) f |= TSR_CPU_FEATURE(BMI2);
        if (ymm && (b & bit_AVX2)) f |= TSR_CPU_FEATURE(AVX2);
        if (zmm) {
            if (b & bit_AVX512F) f |= TSR_CPU_FEATURE(AVX512F);
            if (b & bit_AVX512BW) f |= TSR_CPU_FEATURE(AVX512BW);
            if (b & bit_AVX512CD) f |= TSR_CPU_FEATURE(AVX512CD);
            if (b & bit_AVX512DQ) f |= TSR_CPU_FEATURE(AVX512DQ);
            if (b & bit_AVX512VL) f |= TSR_CPU_FEATURE(AVX512VL);
            if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) /* AVX512_BF16 */
                f |= TSR_CPU_FEATURE(AVX512BF16);
        }
    }
    if (__get_cpuid(0x80000001, &a, &b, &c, &d) && (c & bit_LZCNT)) f |= TSR_CPU_FEATURE(LZCNT);
    return f;
}
#else
uint32_t tsr_cpu_features(void) { return 0; }
#endif

int tsr_cpu_check(uint32_t needed, const char *made_for) {
    static const char *const names[] = {
#define TSR_CPU_NAME(name, llvm_name) llvm_name,
        TSR_CPU_FEATURE_KINDS(TSR_CPU_NAME)
#undef TSR_CPU_NAME
    };
    uint32_t missing = needed & ~tsr_cpu_features();
    if (!missing) return TSR_OK;
    char list[256] = "";
    size_t used = 0;
    for (unsigned i = 0; i < TSR_CPU_FEATURE_COUNT && used < sizeof list; i++)
        if (missing >> i & 1)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", names[i]);
    return tsr_error(TSR_ERR_CPU,
                     "this program's code was generated for %s and uses instructions this CPU lacks (%s); "
                     "compile it again for this machine (--cpu=native) or for a level it has (--cpu=x86-64-v3, "
                     "x86-64-v2, x86-64)",
                     made_for && *made_for ? made_for : "another CPU", list);
}
