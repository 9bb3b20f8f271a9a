/* image_format.h — the model image: its layout, its checksum and its kind tables, one source
 * for its writer (the compiler's compiler/ir/image.c) and its reader (model.c).  This and tsr.h
 * are the only runtime headers the compiler includes.
 *
 * The compiler's loop IR (compiler/ir/ir.h: BufferKind, InitKind, IrPrintArgKind) and the
 * runtime's image reader (TSR_BUF_*, TSR_INIT_*, TSR_ARG_*, TSR_ACTION_* below) both expand the
 * kind lists, so a kind's number in the image is its position here on both sides.  Append only:
 * reordering changes the image format (TSR_IMAGE_VERSION). */
#ifndef TSR_IMAGE_FORMAT_H
#define TSR_IMAGE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* The options of every executable's command line besides its program's own (runtime/args.c);
 * a program's `option` may not take one of these names (compiler/elab/elab.c). */
#define TSR_BUILTIN_OPTIONS \
    "help", "seed", "threads", "data", "load", "init-from", "save", "size", "distributed", "reduce", "check-replicas"

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
 * (scale is the image's `fill`, shift its `shift`); IOTA (version 20): cell c holds c, the
 * positions 0, 1, 2, … of `iota ()` and of attention's masks, which the image need not spell
 * out (a sequence of a billion positions would be 8 GB of values). */
#define TSR_INIT_KINDS(X) X(NONE) X(FILL) X(VALUES) X(UNIFORM) X(NORMAL) X(IOTA)

/* An option's `among` bits (version 21): it is read among f32 values, or among i32 values, so a
 * value set on the command line must be within that type's range (runtime/args.c). */
enum { TSR_OPTION_AMONG_F32 = 1, TSR_OPTION_AMONG_I32 = 2 };

/* The arguments of a print statement. */
#define TSR_ARG_KINDS(X) X(INT) X(FLOAT) X(SYMBOL) X(BUFFER) X(OPTION)

/* The statements of `main` that the runtime carries out (besides print): checkpoints, shuffles,
 * recorded series and their plots, and the progress bar of a loop; and REDUCE, which a routine's
 * code calls (version 13): the mean of buffers across the processes of a distributed run. */
#define TSR_ACTION_KINDS(X) X(SAVE) X(LOAD) X(SHUFFLE) X(RECORD) X(PLOT) X(PROGRESS) X(REDUCE) X(REDUCE_BEGIN) X(REDUCE_END)

/* A buffer's element type (version 11), with its name in the language, NumPy's dtype string and
 * the C type of its cells, whose size is the buffer's cell size: the runtime allocates, copies,
 * saves and compares a buffer as cells × sizeof(C type) bytes (tsr_dtype_cell_bytes()).  An I32
 * buffer holds int32 values, which code copies as bits and converts only where the program says
 * so (docs/language.md §3.9); an F64 buffer holds doubles; a BF16 or F16 buffer 2-byte bit
 * patterns (tsr.h's tsr_bf16_to_f32 …).  NumPy has no bfloat16: a BF16 buffer is saved as
 * float32 (exact) and read from any float or integer array, rounded.  A U8 buffer holds bytes
 * 0..255 and a BOOL buffer bytes 0 or 1 (version 16): storage types of integers, computed as I32
 * (tsr_dtype_integer); an I64 buffer int64 values.  Append only. */
#define TSR_DTYPE_KINDS(X) X(F32, "f32", "<f4", float) X(I32, "i32", "<i4", int32_t) \
    X(F64, "f64", "<f8", double) X(BF16, "bf16", "<f4", uint16_t) X(F16, "f16", "<f2", uint16_t) \
    X(U8, "u8", "|u1", uint8_t) X(BOOL, "bool", "|b1", uint8_t) X(I64, "i64", "<i8", int64_t)

/* The x86-64 instruction-set extensions a model's native code may use, with LLVM's name for
 * each: the image's `cpu_features` are bits in this order (TSR_CPU_<NAME>), which the compiler
 * sets from the CPU it generated code for (compiler/sched/target.c) and the runtime checks against the
 * running CPU before any generated code runs (runtime/cpu.c).  Append only. */
#define TSR_CPU_FEATURE_KINDS(X)                                                                 \
    X(SSE4_2, "sse4.2") X(POPCNT, "popcnt") X(AVX, "avx") X(AVX2, "avx2") X(FMA, "fma")          \
    X(BMI1, "bmi") X(BMI2, "bmi2") X(F16C, "f16c") X(MOVBE, "movbe") X(LZCNT, "lzcnt")           \
    X(AVX512F, "avx512f") X(AVX512BW, "avx512bw") X(AVX512CD, "avx512cd") X(AVX512DQ, "avx512dq") \
    X(AVX512VL, "avx512vl") X(AVX512BF16, "avx512bf16")

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

/* ---- The model image ------------------------------------------------------------------------
 *
 * A generated object carries its model as one constant byte array, read by tsr_state_create().
 * Little-endian; `str` is a u32 length and that many bytes (no terminator).
 *
 *   "TSRI" u32 version(=TSR_IMAGE_VERSION) u64 checksum
 *   str module         u64 program_hash
 *   u32 cpu_features   str cpu_name   (TSR_CPU_* bits, above; the CPU they were read from)
 *   u32 symbol_count   { str name; i64 range; u8 size; u32 leader }
 *   u32 buffer_count   { str name; str shape_text; u8 kind; u8 init; u8 is_virtual; u8 flags; u8 dtype;
 *                        u32 rank; i64 dims[rank]; f64 fill; f64 shift; u64 value_count; f64 values[value_count] }
 *   u32 data_count     { str generator; str path; str name; i64 count; i64 seed; f64 noise; f64 factor;
 *                        i64 bound; u8 sharded; u32 field_count; u32 buffer[field_count] }
 *   u32 print_count    { str format; str label; u8 grid; u32 arg_count;
 *                        { u8 kind; i64 i; f64 f; u32 ref } [arg_count] }
 *   u32 option_count   { str name; u8 is_float; u8 among; f64 default }
 *   u32 action_count   { u8 kind; str text; i64 value; i64 rows; u32 ref_count; u32 ref[ref_count] }
 *   u8 has_gpu         and, when 1 (a --target=cuda program):
 *     str ptx; str arch; u64 cubin_size; u8 cubin[cubin_size]; u32 kernel_count
 *                      { str name; u32 grid[3]; u32 block[3]; u32 shared_bytes; u8 scalars;
 *                        u32 param_count; { u32 buffer; u8 writes } [param_count] }
 *
 * Buffer kinds, initialisations and print arguments are the TSR_BUF_*, TSR_INIT_* and TSR_ARG_*
 * values below, made from the lists above that the compiler expands too.  A print
 * with `grid` set prints buffer args[0].ref as a grid labelled `label`; otherwise `format` is a
 * printf-like format whose conversions take the arguments in order, followed by a newline.
 *
 * `checksum` is tsr_image_checksum() of every byte after it (from `str module` to the end):
 * the runtime checks it before it reads anything else, so a damaged object is refused rather
 * than half-read.  64-bit FNV-1a changes with every change of a single byte (each step is a
 * bijection of the running hash), so every flipped bit is caught.  Version 2 added it; version 3
 * added the options (a print argument of kind OPTION shows option `ref` plus `i`); version 4
 * added `shift` and the scaled UNIFORM and NORMAL initialisations (above); version 5 added
 * the actions (TSR_ACTION_*, the statements of main that steps.c runs): SAVE and LOAD name a
 * checkpoint file in `text` and the buffers in `ref` (none: every parameter); SHUFFLE permutes
 * the `rows` leading rows of the buffers in `ref` (the fields of data set `value`; -`rows` times
 * the length of the first field's run-time outermost axis when negative, version 8); RECORD
 * appends cell 0 of buffer ref[0] to series `value`, PLOT draws series `value` titled `text`;
 * PROGRESS is the bar of a loop, titled `text`.  Version 6 added the GPU section: the PTX module
 * (text, arch "sm_80"…) and its kernels in launch numbering (tsr_gpu_launch); each kernel's
 * parameters are one i64 per index symbol (their values, in symbol order), then a pointer per
 * listed buffer (device memory), `writes` set where the kernel stores into that buffer.
 * Version 7 put the run's random key (tsr.h: TSR_SYMBOL_KEY_WORDS i64s, the seed and the run's
 * number) between a kernel's index symbols and its buffers.  Version 8 added run-time sizes: a
 * symbol with `size` set is the length of a `?` axis (at least `range`, and equal to symbol
 * `leader`, its class's first, when a routine runs; `leader` is the symbol itself otherwise),
 * and a buffer whose dims[0] is negative has that run-time length, the value of symbol
 * -1 - dims[0]: it has no storage until that symbol is set (tsr_state_set_symbol).  Version 9
 * added the CPU: the extensions the object's native code may use, which the reader checks
 * against the running CPU (cpu.c) before anything runs; none for the reference executor.
 * Version 10 put the buffer's flags in the byte after is_virtual (TSR_BUFFER_FLAG_STATE).
 * Version 11 added each buffer's element type after its flags (TSR_DTYPE_*).  Version 12 added a
 * data set's `bound`: when positive, its values are positions of a gathered axis of that many
 * cells (an embedding's rows, or the classes a target id picks), each of which must be a whole number in 0 … bound-1; the runtime
 * checks them when it produces the set (and the token file of random windows).  Version 13 added
 * REDUCE, an action that a routine's code runs (tsr_state_action from inside the routine, between
 * two of its kernels) rather than main: every buffer in `ref` becomes the mean over the processes
 * of a distributed run of its cells (the sum over the ranks divided by their number; nothing in
 * a run of one process); the same mean in buckets that overlap the code between them:
 * REDUCE_BEGIN begins the mean of its buffers `ref` (a bucket, ready: nothing writes them before
 * the end), `value` the number of the REDUCE_END that ends it, which lists every buffer of its
 * buckets in `ref` and leaves them averaged; and a data set's `sharded` byte: when k > 0, a distributed run of N
 * processes splits the set's samples among them (docs/runtime.md, "Training on several
 * processes"): a sample is one index of the fields' first k axes together (their batch axes),
 * and rank r holds the samples r, r + N, r + 2N, … of the set that one process would read with
 * N times the samples.  Version 14 added the element type F64 (8-byte cells), version 15 BF16 and
 * F16 (2-byte cells), version 16 U8 and BOOL (1-byte cells) and I64.  Version 17 added a GPU
 * kernel's `scalars`: which of its by-value parameters its code reads (TSR_GPU_READS_*: an index
 * symbol, the run's random key), so that a replayed CUDA graph (runtime/cuda.c) refreshes the
 * parameters of those kernels alone when the values change.  Version 18 added the GPU section's
 * cubin: the PTX compiled by ptxas for `arch` when tsrc ran (none: size 0), which the runtime
 * loads first, the PTX where the GPU cannot run it.  Version 19 wrote a buffer's initial values as
 * f64 (they were f32), so that each is rounded once, into the buffer's type: an f64 parameter's
 * `[0.1; 0.3]` is the doubles, a bf16's the nearest bf16s, an integer's the integers past 2^24.
 * Version 20 added the initialisation IOTA; version 21 an option's `among` byte after is_float;
 * version 22 the buffer flag CARRIED (a gradient whose sums carry between runs, saved with the
 * training state), which an older runtime would refuse as a malformed image.  Version 23 added
 * `program_hash` after the module's name: a hash of the loop IR and its main before the
 * schedule (the compiler's plan_program_hash), which the processes of a distributed run
 * compare, so that processes running different programs are refused rather than pairing
 * unrelated collective calls. */
#define TSR_IMAGE_MAGIC "TSRI"
#define TSR_IMAGE_VERSION 23u
/* A GPU kernel's `scalars` (version 17): it reads an index symbol's value, the run's key. */
#define TSR_GPU_READS_SYMBOLS 1u
#define TSR_GPU_READS_KEY 2u
/* A buffer's flags (version 10): a state tensor of code (an optimiser's moments and step count),
 * which a checkpoint of every parameter holds too (checkpoint.c). */
#define TSR_BUFFER_FLAG_STATE 1u
/* With STATE: a parameter's gradient whose sums carry from one routine run to the next (gradient
 * accumulation), the process's own in a distributed run (a reader without this flag refuses it). */
#define TSR_BUFFER_FLAG_CARRIED 2u
#define TSR_IMAGE_HEADER 16u /* magic, version, checksum */

#define TSR_KIND_BUF(name) TSR_BUF_##name,
#define TSR_KIND_INIT(name) TSR_INIT_##name,
#define TSR_KIND_ARG(name) TSR_ARG_##name,
#define TSR_KIND_ACTION(name) TSR_ACTION_##name,
#define TSR_KIND_DTYPE(name, word, numpy, ctype) TSR_DTYPE_##name,
enum { TSR_BUFFER_KINDS(TSR_KIND_BUF) TSR_BUF_KIND_COUNT };
enum { TSR_INIT_KINDS(TSR_KIND_INIT) TSR_INIT_KIND_COUNT };
enum { TSR_ARG_KINDS(TSR_KIND_ARG) TSR_ARG_KIND_COUNT };
enum { TSR_ACTION_KINDS(TSR_KIND_ACTION) TSR_ACTION_KIND_COUNT };
enum { TSR_DTYPE_KINDS(TSR_KIND_DTYPE) TSR_DTYPE_COUNT };
#undef TSR_KIND_BUF
#undef TSR_KIND_INIT
#undef TSR_KIND_ARG
#undef TSR_KIND_ACTION
#undef TSR_KIND_DTYPE

/* Whether a buffer of type `dtype` holds integers (I32, I64, and the byte types U8 and BOOL,
 * whose values are computed as I32s), and whether its cells are single bytes (U8, BOOL). */
static inline int tsr_dtype_integer(unsigned dtype) {
    return dtype == TSR_DTYPE_I32 || dtype == TSR_DTYPE_U8 || dtype == TSR_DTYPE_BOOL || dtype == TSR_DTYPE_I64;
}
static inline int tsr_dtype_byte(unsigned dtype) { return dtype == TSR_DTYPE_U8 || dtype == TSR_DTYPE_BOOL; }

/* 64-bit FNV-1a: `h` (TSR_FNV_BASIS to start) carried on over `size` more bytes. */
#define TSR_FNV_BASIS 0xcbf29ce484222325u
static inline uint64_t tsr_fnv1a_extend(uint64_t h, const void *bytes, size_t size) {
    const unsigned char *p = (const unsigned char *)bytes;
    for (size_t i = 0; i < size; i++) h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* 64-bit FNV-1a of `size` bytes: the model image's checksum (compiler/ir/image.c writes it). */
static inline uint64_t tsr_image_checksum(const unsigned char *p, size_t size) {
    return tsr_fnv1a_extend(TSR_FNV_BASIS, p, size);
}

#endif
