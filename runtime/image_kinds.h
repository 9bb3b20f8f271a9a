/* image_kinds.h — the kind tables of the model image, one source for its writer and reader.
 *
 * The compiler's loop IR (compiler/ir/ir.h: BufferKind, InitKind, IrPrintArgKind) and the
 * runtime's image reader (internal.h: TSR_BUF_*, TSR_INIT_*, TSR_ARG_*) both expand these
 * lists, so a kind's number in the image is its position here on both sides.  Append only:
 * reordering changes the image format (TSR_IMAGE_VERSION). */
#ifndef TSR_IMAGE_KINDS_H
#define TSR_IMAGE_KINDS_H

/* What a buffer holds and who fills it. */
#define TSR_BUFFER_KINDS(X)                                                        \
    X(LITERAL)  /* values written in the program (init: values) */                \
    X(PARAM)    /* a parameter (init: fill value, values, seeded uniform or normal) */\
    X(CONSTANT) /* every cell the same value (`ones ()`, scalars): init fill */   \
    X(INPUT)    /* filled by the caller */                                         \
    X(DATA)     /* filled from a data source */                                    \
    X(COMPUTED) /* written by the program's code */                              \
    X(SCRATCH)  /* the schedule's working storage (packed panels, tiles): not observable */

/* How a buffer is initialised when a state is created. */
/* UNIFORM: shift + scale * u, u uniform in [-1, 1); NORMAL: shift + scale * n, n standard normal
 * (scale is the image's `fill`, shift its `shift`). */
#define TSR_INIT_KINDS(X) X(NONE) X(FILL) X(VALUES) X(UNIFORM) X(NORMAL)

/* The arguments of a print statement. */
#define TSR_ARG_KINDS(X) X(INT) X(FLOAT) X(SYMBOL) X(BUFFER) X(OPTION)

/* The statements of `main` that the runtime carries out (besides print): checkpoints, shuffles,
 * recorded series and their plots, and the progress bar of a loop. */
#define TSR_ACTION_KINDS(X) X(SAVE) X(LOAD) X(SHUFFLE) X(RECORD) X(PLOT) X(PROGRESS)

/* The x86-64 instruction-set extensions a model's native code may use, with LLVM's name for
 * each: the image's `cpu_features` are bits in this order (TSR_CPU_<NAME>), which the compiler
 * sets from the CPU it generated code for (compiler/sched/target.c) and the runtime checks against the
 * running CPU before any generated code runs (runtime/cpu.c).  Append only. */
#define TSR_CPU_FEATURE_KINDS(X)                                                                 \
    X(SSE4_2, "sse4.2") X(POPCNT, "popcnt") X(AVX, "avx") X(AVX2, "avx2") X(FMA, "fma")          \
    X(BMI1, "bmi") X(BMI2, "bmi2") X(F16C, "f16c") X(MOVBE, "movbe") X(LZCNT, "lzcnt")           \
    X(AVX512F, "avx512f") X(AVX512BW, "avx512bw") X(AVX512CD, "avx512cd") X(AVX512DQ, "avx512dq") \
    X(AVX512VL, "avx512vl")

#define TSR_CPU_BIT(name, llvm_name) TSR_CPU_BIT_##name,
enum { TSR_CPU_FEATURE_KINDS(TSR_CPU_BIT) TSR_CPU_FEATURE_COUNT };
#undef TSR_CPU_BIT
#define TSR_CPU_FEATURE(name) (1u << TSR_CPU_BIT_##name)
/* The x86-64 micro-architecture levels, as sets of the features above. */
#define TSR_CPU_LEVEL_V2 (TSR_CPU_FEATURE(SSE4_2) | TSR_CPU_FEATURE(POPCNT))
#define TSR_CPU_LEVEL_V3                                                                       \
    (TSR_CPU_LEVEL_V2 | TSR_CPU_FEATURE(AVX) | TSR_CPU_FEATURE(AVX2) | TSR_CPU_FEATURE(FMA) |      \
     TSR_CPU_FEATURE(BMI1) | TSR_CPU_FEATURE(BMI2) | TSR_CPU_FEATURE(F16C) | TSR_CPU_FEATURE(MOVBE) | \
     TSR_CPU_FEATURE(LZCNT))
#define TSR_CPU_LEVEL_V4                                                                       \
    (TSR_CPU_LEVEL_V3 | TSR_CPU_FEATURE(AVX512F) | TSR_CPU_FEATURE(AVX512BW) |                    \
     TSR_CPU_FEATURE(AVX512CD) | TSR_CPU_FEATURE(AVX512DQ) | TSR_CPU_FEATURE(AVX512VL))

#endif
