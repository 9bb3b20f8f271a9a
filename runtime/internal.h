/* internal.h — what the runtime's files share and the public header does not promise.
 *
 * The model image (the compiler's compiler/ir/image.c writes it, state.c reads it) and the RNG
 * helpers of the data generators.  Not installed. */
#ifndef TSR_INTERNAL_H
#define TSR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "image_kinds.h"
#include "tsr.h"

/* ---- The model image ------------------------------------------------------------------------
 *
 * A generated object carries its model as one constant byte array, read by tsr_state_create().
 * Little-endian; `str` is a u32 length and that many bytes (no terminator).
 *
 *   "TSRI" u32 version(=TSR_IMAGE_VERSION) u64 checksum
 *   str module
 *   u32 cpu_features   str cpu_name   (TSR_CPU_* bits, image_kinds.h; the CPU they were read from)
 *   u32 symbol_count   { str name; i64 range; u8 size; u32 leader }
 *   u32 buffer_count   { str name; str shape_text; u8 kind; u8 init; u8 is_virtual; u8 0;
 *                        u32 rank; i64 dims[rank]; f64 fill; f64 shift; u64 value_count; f32 values[value_count] }
 *   u32 data_count     { str generator; str path; str name; i64 count; i64 seed; f64 noise; f64 factor;
 *                        u32 field_count; u32 buffer[field_count] }
 *   u32 print_count    { str format; str label; u8 grid; u32 arg_count;
 *                        { u8 kind; i64 i; f64 f; u32 ref } [arg_count] }
 *   u32 option_count   { str name; u8 is_float; f64 default }
 *   u32 action_count   { u8 kind; str text; i64 value; i64 rows; u32 ref_count; u32 ref[ref_count] }
 *   u8 has_gpu         and, when 1 (a --target=cuda program):
 *     str ptx; str arch; u32 kernel_count
 *                      { str name; u32 grid[3]; u32 block[3]; u32 shared_bytes;
 *                        u32 param_count; { u32 buffer; u8 writes } [param_count] }
 *
 * Buffer kinds, initialisations and print arguments are the TSR_BUF_*, TSR_INIT_* and TSR_ARG_*
 * values below, made from the lists of image_kinds.h that the compiler expands too.  A print
 * with `grid` set prints buffer args[0].ref as a grid labelled `label`; otherwise `format` is a
 * printf-like format whose conversions take the arguments in order, followed by a newline.
 *
 * `checksum` is tsr_image_checksum() of every byte after it (from `str module` to the end):
 * the runtime checks it before it reads anything else, so a damaged object is refused rather
 * than half-read.  64-bit FNV-1a changes with every change of a single byte (each step is a
 * bijection of the running hash), so every flipped bit is caught.  Version 2 added it; version 3
 * added the options (a print argument of kind OPTION shows option `ref` plus `i`); version 4
 * added `shift` and the scaled UNIFORM and NORMAL initialisations (image_kinds.h); version 5 added
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
 * against the running CPU (cpu.c) before anything runs; none for the reference executor. */
/* cpu.c: the TSR_CPU_* extensions this CPU has, and TSR_OK or TSR_ERR_CPU (with a message
 * naming the missing ones and `made_for`) for code that needs `needed`. */
uint32_t tsr_cpu_features(void);
int tsr_cpu_check(uint32_t needed, const char *made_for);

#define TSR_IMAGE_MAGIC "TSRI"
#define TSR_IMAGE_VERSION 9u
#define TSR_IMAGE_HEADER 16u /* magic, version, checksum */

#define TSR_KIND_BUF(name) TSR_BUF_##name,
#define TSR_KIND_INIT(name) TSR_INIT_##name,
#define TSR_KIND_ARG(name) TSR_ARG_##name,
#define TSR_KIND_ACTION(name) TSR_ACTION_##name,
enum { TSR_BUFFER_KINDS(TSR_KIND_BUF) TSR_BUF_KIND_COUNT };
enum { TSR_INIT_KINDS(TSR_KIND_INIT) TSR_INIT_KIND_COUNT };
enum { TSR_ARG_KINDS(TSR_KIND_ARG) TSR_ARG_KIND_COUNT };
enum { TSR_ACTION_KINDS(TSR_KIND_ACTION) TSR_ACTION_KIND_COUNT };
#undef TSR_KIND_BUF
#undef TSR_KIND_INIT
#undef TSR_KIND_ARG
#undef TSR_KIND_ACTION

/* ---- Run-time options ---------------------------------------------------------------------------
 *
 * args.c parses an executable's command line against the model read from its image, then
 * builds the state with what it found (state.c). */

/* An `option` item: its name, whether it is a number (else an integer), and its value for this
 * run (the default until the command line sets it). */
typedef struct tsr_option {
    char *name;
    uint8_t is_float;
    double value;
} tsr_option;

/* What the command line says beyond the options' values. */
typedef struct tsr_run_args {
    uint32_t data_count;
    const char **data_names, **data_paths; /* --data NAME=PATH, in order (a later one wins) */
    const char *load;                      /* --load PATH, or NULL */
    uint32_t size_count;
    uint32_t *size_symbols;                /* --size NAME=N: the size symbols, in order */
    int64_t *size_values;
} tsr_run_args;

/* The size symbol (a run-time size `?`) named by the `len` bytes at `name`, or -1; the k-th size
 * symbol's number, or -1 past the last. */
int64_t tsr_model_size_symbol(const tsr_model *model, const char *name, size_t len);
int64_t tsr_model_size_at(const tsr_model *model, uint32_t k);

/* An action of main (the image's action table, read by state.c, run by steps.c), with what
 * the run has done with it so far. */
typedef struct tsr_action {
    uint8_t kind;
    char *text;
    int64_t value, rows;
    uint32_t ref_count;
    uint32_t *refs;
    uint64_t runs;          /* SHUFFLE: how many times it has run (the permutation's counter) */
    double started, drawn;  /* PROGRESS: when the loop started, when the bar was last drawn */
} tsr_action;

/* A series of numbers that RECORD appends to. */
typedef struct tsr_series {
    float *values;
    uint64_t count, cap;
} tsr_series;

/* Action `k` of the model, or NULL past the last. */
tsr_action *tsr_model_action(const tsr_model *model, uint32_t k);
/* Series `k` of the model (there is one per number RECORD and PLOT name), or NULL. */
tsr_series *tsr_model_series(const tsr_model *model, uint32_t k);
/* The shape of buffer `buffer` (memory order) and its kind; false past the last buffer. */
bool tsr_model_buffer_shape(const tsr_model *model, uint32_t buffer, uint32_t *rank, const int64_t **dims,
                            int64_t *cells, uint8_t *kind);

/* Checkpoints (checkpoint.c): write or read the buffers `buffers` (count 0: every parameter)
 * as a NumPy .npz archive at `path`. */
int tsr_checkpoint_save(tsr_state *state, const char *path, const uint32_t *buffers, uint32_t count);
int tsr_checkpoint_load(tsr_state *state, const char *path, const uint32_t *buffers, uint32_t count);
/* Read the .npy file held in `size` bytes (a member of checkpoint `archive`, array `array`)
 * into `out` of shape `dims`, as tsr_load_npy() does a file; messages name the archive and the
 * array. */
int tsr_load_npy_member(const unsigned char *bytes, size_t size, float *out, uint32_t rank, const int64_t *dims,
                        const char *archive, const char *array);
/* Take a progress bar off the terminal before something else is printed (steps.c). */
void tsr_progress_hide(void);

tsr_model *tsr_model_read(const unsigned char *image, size_t size);
void tsr_model_free(tsr_model *model);
/* The model's options (their values may be changed before the state is made). */
tsr_option *tsr_model_options(tsr_model *model, uint32_t *count);
/* The k-th tensor that `--data` may replace (a field of a data item), or NULL past the last. */
const char *tsr_model_data_field(const tsr_model *model, uint32_t k);
/* tsr_state_create() on a model already read (the state owns it from now on, also on failure),
 * with the data files of `args` (NULL: none). */
tsr_state *tsr_state_create_model(tsr_model *model, uint64_t seed, const tsr_run_args *args);

/* ---- GPU states (cuda.c) ------------------------------------------------------------------------
 *
 * The image's GPU section as state.c reads it (validated: buffers exist, launch dimensions are
 * sane), and the per-state device data that cuda.c keeps for it.  The state owns its model, so
 * the device data hangs off the model (tsr_state's layout is part of the ABI and stays as it is). */

/* One kernel: its entry in the PTX, its launch domain, and its buffer parameters (after one
 * int64_t per index symbol), `writes` set where it stores into the buffer. */
typedef struct tsr_gpu_kernel {
    char *name;
    uint32_t grid[3], block[3], shared_bytes;
    uint32_t param_count;
    uint32_t *buffers;
    uint8_t *writes;
} tsr_gpu_kernel;

typedef struct tsr_gpu_section {
    char *ptx;  /* NUL-terminated, as cuModuleLoadDataEx needs it */
    char *arch; /* "sm_90" */
    uint32_t kernel_count;
    tsr_gpu_kernel *kernels;
} tsr_gpu_section;

/* The device side of a state: the driver's context and module, device memory, coherence. */
typedef struct tsr_gpu tsr_gpu;

/* The model's GPU section, or NULL (a CPU program). */
const tsr_gpu_section *tsr_model_gpu(const tsr_model *model);
/* The state's device side, or NULL (a CPU state). */
tsr_gpu *tsr_state_gpu(const tsr_state *state);
/* Load the driver (once per process), load the section's PTX and allocate device memory for
 * every buffer a kernel lists, all host-newer.  NULL with a TSR_ERR_GPU error when it fails.
 * `state` must have its buffers and symbols allocated; it keeps the result. */
tsr_gpu *tsr_gpu_open(tsr_state *state, const tsr_gpu_section *section);
/* Wait for the GPU, free device memory, unload the module, release the context (NULL: nothing). */
void tsr_gpu_close(tsr_gpu *gpu);
/* Coherence for the runtime's own reads and writes of s->buffers[b]: bring the host copy up to
 * date (device→host when the device's is newer); with `write`, mark it newer than the device's
 * afterwards (the caller is about to change it).  TSR_OK at once for CPU states and for buffers
 * without a device copy; TSR_ERR_GPU with a message when a copy fails. */
int tsr_buffer_to_host(tsr_state *state, uint32_t b, bool write);

/* A uniform double in [0, 1) (53 random bits) from stream `stream`, draw `index`, under `seed`. */
double tsr_rng_unit(uint64_t seed, uint32_t stream, uint64_t index);
/* A standard normal number (Box–Muller on two unit draws of the same counter). */
double tsr_rng_normal(uint64_t seed, uint32_t stream, uint64_t index);

/* The number a print shows for `v`: every NaN becomes the positive quiet NaN, so it prints as
 * "nan" (or "NAN", "+nan" with those conversions) whatever its sign and payload. */
double tsr_print_canonical(double v);

/* The length of the first axis of the .npy file at `path` (for a run-time size, data `what`). */
int tsr_npy_length(const char *path, const char *what, int64_t *length);

/* Record an error that names no tensor, for the loaders: `fmt` is printf-like. */
int tsr_data_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* 64-bit FNV-1a of `size` bytes: the model image's checksum (compiler/ir/image.c writes it). */
static inline uint64_t tsr_image_checksum(const unsigned char *p, size_t size) {
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < size; i++) h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

#endif
