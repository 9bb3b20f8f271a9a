/* internal.h — what the runtime's files share and the public header does not promise.
 *
 * The model as model.c reads it from the image (the format is image_format.h), the run-time
 * options, checkpoints, main's steps, GPU states and the helpers of the data generators.  Not
 * installed. */
#ifndef TSR_INTERNAL_H
#define TSR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "image_format.h"
#include "tsr.h"

/* cpu.c: the TSR_CPU_* extensions this CPU has, and TSR_OK or TSR_ERR_CPU (with a message
 * naming the missing ones and `made_for`) for code that needs `needed`. */
uint32_t tsr_cpu_features(void);
int tsr_cpu_check(uint32_t needed, const char *made_for);


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
    const char *save;                      /* --save PATH, or NULL */
    uint32_t size_count;
    uint32_t *size_symbols;                /* --size NAME=N: the size symbols, in order */
    int64_t *size_values;
} tsr_run_args;

/* The size symbol (a run-time size `?`) named by the `len` bytes at `name`, or -1; the k-th size
 * symbol's number, or -1 past the last. */
int64_t tsr_model_size_symbol(const tsr_model *model, const char *name, size_t len);
int64_t tsr_model_size_at(const tsr_model *model, uint32_t k);

/* An action of main (the image's action table, read by model.c, run by steps.c), with what
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
/* Whether buffer `buffer` is a state tensor of code (TSR_BUFFER_FLAG_STATE: an optimiser's
 * moments or step count), which a checkpoint of every parameter holds too. */
bool tsr_model_buffer_is_state(const tsr_model *model, uint32_t buffer);
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
/* Run SHUFFLE action `a` once (shuffle.c): permute its data items' rows by the permutation of
 * its run number a->runs, then count the run. */
int tsr_shuffle(tsr_state *state, tsr_action *a);
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
 * The image's GPU section as model.c reads it (validated: buffers exist, launch dimensions are
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


#endif
