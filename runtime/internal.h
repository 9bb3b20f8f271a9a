/* internal.h — what the runtime's files share and the public header does not promise.
 *
 * The model as model.c reads it from the image (the format is image_format.h), the run-time
 * options, checkpoints, main's steps, GPU states and the helpers of the data generators.  Not
 * installed. */
#ifndef TSR_INTERNAL_H
#define TSR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

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
    uint8_t among; /* TSR_OPTION_AMONG_*: the types whose range a value set must be within */
    double value;
} tsr_option;

/* Why option `o` cannot take `value` although it is of its kind: "beyond f32's range …" (or
 * i32's) when the program computes with it among values of that type; NULL when it can
 * (args.c's --NAME VALUE and state.c's tsr_state_set_option say it alike). */
const char *tsr_option_beyond(const tsr_option *o, double value);

/* What the command line says beyond the options' values. */
typedef struct tsr_run_args {
    uint32_t data_count;
    const char **data_names, **data_paths; /* --data NAME=PATH, in order (a later one wins) */
    const char *load;                      /* --load PATH, or NULL */
    const char *init_from;                 /* --init-from PATH, or NULL */
    const char *save;                      /* --save PATH, or NULL */
    bool reduce_ordered;                   /* --reduce=ordered: REDUCE with tsr_dist_mean_ordered */
    bool check_replicas;                   /* --check-replicas: compare the parameters at the end */
    bool seed_given;                       /* --seed N: a checkpoint's seed is not taken on loading */
    uint32_t size_count;
    uint32_t *size_symbols;                /* --size NAME=N: the size symbols, in order */
    int64_t *size_values;
} tsr_run_args;

/* The size symbol (a run-time size `?`) named by the `len` bytes at `name`, or -1; the k-th size
 * symbol's number, or -1 past the last. */
int64_t tsr_model_size_symbol(const tsr_model *model, const char *name, size_t len);
/* Whether run-time size `symbol` is of a class a data item's file gives its length to (it is
 * that length, not set by the caller: --help lists it apart). */
bool tsr_model_size_from_file(const tsr_model *model, uint32_t symbol);
int64_t tsr_model_size_at(const tsr_model *model, uint32_t k);

/* A mean across processes under way (dist.c, tsr_dist_mean_begin below). */
typedef struct tsr_dist_pending {
    void *cells;
    int64_t count;
    uint8_t dtype;  /* the cells': TSR_DTYPE_F32 or TSR_DTYPE_F64 */
    void *requests; /* MPI's, one per piece */
    int request_count;
} tsr_dist_pending;

/* The cells of a REDUCE's buffers side by side, in the type their mean is computed in: f32 for
 * f32 buffers and for bf16 and f16 ones widened (MEAN_F32), f64 for f64 ones (MEAN_F64). */
enum { MEAN_F32, MEAN_F64, MEAN_ARRAYS };
typedef struct tsr_mean_array {
    void *cells; /* malloc'd on first use, kept from call to call */
    int64_t count;
    tsr_dist_pending pending; /* REDUCE_BEGIN: the mean under way */
} tsr_mean_array;

/* An action of main (the image's action table, read by model.c, run by steps.c), with what
 * the run has done with it so far. */
typedef struct tsr_action {
    uint8_t kind;
    char *text;
    int64_t value, rows;
    uint32_t ref_count;
    uint32_t *refs;
    uint64_t runs;          /* SHUFFLE: how many times its group has been shuffled (the permutation's counter;
                               kept by the group's first statement, `counter`) */
    uint32_t counter;       /* SHUFFLE: the action that counts its group's shuffles: the first SHUFFLE
                               with its value (the compiler gives a group's statements one value) */
    double started, drawn;  /* PROGRESS: when the loop started, when the bar was last drawn */
    tsr_mean_array means[MEAN_ARRAYS]; /* REDUCE, REDUCE_BEGIN: its buffers' cells, by the type of their mean */
} tsr_action;

/* A series of numbers that RECORD appends to. */
typedef struct tsr_series {
    float *values;
    uint64_t count, cap;
} tsr_series;

/* Action `k` of the model, or NULL past the last. */
tsr_action *tsr_model_action(const tsr_model *model, uint32_t k);
/* Whether the run's command line chose the seed (--seed N): loading a checkpoint keeps it then. */
bool tsr_model_seed_given(const tsr_model *model);
/* Series `k` of the model (there is one per number RECORD and PLOT name), or NULL. */
tsr_series *tsr_model_series(const tsr_model *model, uint32_t k);
/* Whether buffer `buffer` is a state tensor of code (TSR_BUFFER_FLAG_STATE: an optimiser's
 * moments or step count), which a checkpoint of every parameter holds too. */
bool tsr_model_buffer_is_state(const tsr_model *model, uint32_t buffer);
/* Whether buffer `buffer` is state that each process of a distributed run has its own of: a
 * parameter that code writes and no gradient reaches (a key/value cache, a count of the process's
 * batch), or a gradient whose sums carry between runs (TSR_BUFFER_FLAG_CARRIED). */
bool tsr_model_buffer_is_own(const tsr_model *model, uint32_t buffer);
/* The shape of buffer `buffer` (memory order) and its kind; false past the last buffer. */
bool tsr_model_buffer_shape(const tsr_model *model, uint32_t buffer, uint32_t *rank, const int64_t **dims,
                            int64_t *cells, uint8_t *kind);

/* Checkpoints (checkpoint.c): write or read the buffers `buffers` (count 0: every parameter)
 * as a NumPy .npz archive at `path`. */
int tsr_checkpoint_save(tsr_state *state, const char *path, const uint32_t *buffers, uint32_t count);
int tsr_checkpoint_load(tsr_state *state, const char *path, const uint32_t *buffers, uint32_t count);
/* --init-from PATH, tsr_state_init_from: read each trained parameter the checkpoint holds (shape
 * and type checked as a load's), leaving the others as initialised and the training state, run
 * counters and seed alone; *read (may be NULL) counts those read.  With `note`, *note is a
 * malloc'd sentence saying what was kept and what the file holds beyond the model (NULL when the
 * two match).  A file holding none of the model's parameters is an error; a failed call changes
 * nothing. */
int tsr_checkpoint_init_from(tsr_state *state, const char *path, uint32_t *read, char **note);
/* Whether a checkpoint could be written at `path` now (--save, checked before main runs): it is
 * not an existing directory, device or FIFO, and its directory exists and may be written in;
 * TSR_OK, or the error tsr_checkpoint_save would give. */
int tsr_checkpoint_writable(const char *path);
/* TSR_NUM_THREADS as a count (pool.c): a whole number, 1 or more, capped at the pool's 256 (blanks
 * around it allowed); 0 when it is unset or anything else ("abc", "4abc", "-1", "0", a number
 * past a long), which the default then replaces. */
int tsr_env_threads(void);
/* Remove the temporary of a save in progress, if any (async-signal-safe: an executable's handler
 * of SIGINT, SIGTERM and SIGHUP calls it, args.c). */
void tsr_checkpoint_remove_partial(void);
/* An executable's guards of its saves (tsr_main_start, before anything is read): the temporary
 * of a save in progress is kept for tsr_checkpoint_remove_partial, and the files data items are
 * read from are kept for the check that a save does not replace one (tsr_data_files_keep). */
void tsr_checkpoint_guard_saves(void);
void tsr_data_files_keep(void);
/* Whether the file of device `dev` and inode `ino` is one a data item of this process was read
 * from (data.c); the item's name into what[size]. */
bool tsr_data_file_item(dev_t dev, ino_t ino, char *what, size_t size);
/* Read the .npy file held in `size` bytes (a member of checkpoint `archive`, array `array`)
 * into `out` of shape `dims` and element type `dtype`, as tsr_load_npy_typed() does a file,
 * except that the array must hold numbers of the tensor's kind (floats for F32, F64, BF16 and
 * F16, integers for I32); messages name the archive and the array. */
/* The position of cell `cell` of a tensor of shape `dims`, in NumPy's form "(2, 5)", "(3,)"
 * (data.c; messages about a cell). */
void tsr_format_position(char *text, size_t size, uint32_t rank, const int64_t *dims, int64_t cell);
/* The shape a .npy member declares, into dims, when it has `rank` axes (false otherwise, and for
 * a member that is no .npy; nothing is recorded as an error): what a checkpoint's array was. */
bool tsr_npy_member_shape(const unsigned char *bytes, size_t size, uint32_t rank, int64_t *dims);
int tsr_load_npy_member(const unsigned char *bytes, size_t size, void *out, uint8_t dtype, uint32_t rank,
                        const int64_t *dims, const char *archive, const char *array);
/* Run SHUFFLE action `a` once (shuffle.c): permute its data items' rows by the permutation of
 * its run number a->runs, then count the run. */
int tsr_shuffle(tsr_state *state, tsr_action *a);
/* SAVE in a distributed run (checkpoint.c): process 0 writes the checkpoint, and every process learns
 * whether it could (a failure is then an error on every process); in a run of one, a plain
 * tsr_checkpoint_save. */
int tsr_checkpoint_save_once(tsr_state *state, const char *path, const uint32_t *buffers, uint32_t count);
/* Whether --reduce=ordered was given to the state's run (model.c). */
bool tsr_model_reduce_ordered(const tsr_model *model);
/* A checkpoint was loaded into a state of m (tsr_state_load): its seed may be the checkpoint's. */
void tsr_model_mark_loaded(const tsr_model *m);
/* After the state is made: the processes of a distributed run must agree on the seed, every
 * option's value and every run-time size; TSR_ERR_DIST naming the first value that differs and
 * two processes' values otherwise, on every process (state.c). */
int tsr_state_check_agreement(tsr_state *state);
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
    uint8_t scalars; /* TSR_GPU_READS_*: the by-value parameters its code reads */
    uint32_t param_count;
    uint32_t *buffers;
    uint8_t *writes;
} tsr_gpu_kernel;

typedef struct tsr_gpu_section {
    char *ptx;  /* NUL-terminated, as cuModuleLoadDataEx needs it */
    char *arch; /* "sm_90" */
    unsigned char *cubin; /* the PTX compiled for `arch` by ptxas when tsrc ran (cubin_size 0: none) */
    size_t cubin_size;
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
/* The GPU that a state of this process opens among the `count` the driver sees: the number
 * `chosen` gives (TSR_CUDA_DEVICE's text; NULL or "" when unset), the same for every process;
 * else `local_rank` (tsr_dist_local_rank()) modulo count.  -1 with a TSR_ERR_GPU error when
 * chosen is not a number of a GPU the driver has. */
int tsr_gpu_device_for(int count, const char *chosen, int local_rank);
/* cuda.c: a GPU buffer's bytes, false when cells × cell_bytes does not fit a size_t. */
bool tsr_gpu_buffer_bytes(int64_t cells, size_t cell_bytes, size_t *bytes);
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

/* The length of the first axis of the .npy file at `path` (for a run-time size of data `what`,
 * a tensor of element type `dtype` and shape (?, dims[1], …, dims[rank - 1]), which the file's
 * must be). */
int tsr_npy_length(const char *path, const char *what, uint8_t dtype, uint32_t rank, const int64_t *dims,
                   int64_t *length);

/* tsr_load_npy() and tsr_load_csv() into a tensor of element type `dtype` (TSR_DTYPE_*): F32 as
 * they do; F64, BF16 and F16 read the same files, converted to double or rounded once to the
 * half type (data.c); I32 takes integers only (any integer dtype of .npy, decimal integers in
 * CSV), each value checked to fit int32 (a message names the cell), and a float .npy file is an
 * error that names both types. */
int tsr_load_npy_typed(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims,
                       const char *what);
int tsr_load_csv_typed(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims,
                       const char *what);
/* The samples of process `shard` of `shards` (docs/runtime.md §19): `dims` is this process's
 * shape, whose first `sample_axes` axes number its samples (negative: -sample_axes, and the first
 * is a run-time length, so the file may hold more samples than the processes use); the file holds
 * shards times as many samples of the same shape, under any leading axes (else TSR_ERR_DATA naming
 * the item, the file, both counts and the number of processes), and process r gets samples r,
 * r+shards, …  The .npy reader reads those samples alone (a seek each); CSV is scanned whole,
 * keeping them. */
int tsr_load_npy_shard(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims, const char *what,
                       int shard, int shards, int sample_axes);
int tsr_load_csv_shard(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims, const char *what,
                       int shard, int shards, int sample_axes);
/* Open the regular file at `path` for data item `what`, as the loaders do (anything else is
 * refused before a byte is read), with its size in *size. */
int tsr_data_open(const char *path, const char *what, FILE **file, int64_t *size);

/* ---- Several processes (dist.c) -----------------------------------------------------------------
 *
 * Beyond tsr.h's tsr_dist_*: what the state and main's steps need. */

/* Whether this run has several processes that MPI connects (started, not finalized). */
bool tsr_dist_active(void);
/* This process's rank as its launcher says (mpirun's OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK),
 * before MPI starts; 0 without one: --help and usage errors are printed by rank 0 alone. */
int tsr_dist_launcher_rank(void);
/* Whether a launcher started this process as one of several (OMPI_COMM_WORLD_SIZE, PMI_SIZE or
 * PMIX_SIZE above 1). */
bool tsr_dist_launched_together(void);
/* How an executable's process begins (tsr_dist_vote): it runs with the others, its command line
 * asked for --help, its command line is bad, or it runs alone (--distributed=none). */
enum { TSR_BEGIN_RUN, TSR_BEGIN_HELP, TSR_BEGIN_BAD, TSR_BEGIN_ALONE };
/* The processes a launcher started together say how each begins (TSR_BEGIN_* in the low 3 bits;
 * the caller may add more above them), before anything else: *same when all begin alike, else *other, the first process that begins otherwise than
 * process 0, and how each of the two does (*begins0, *begins_other).  MPI must be started (by
 * a process that will not run with the others too: processes a launcher started wait in MPI_Init
 * for every one of them, so one that ended before would leave them waiting).  TSR_OK, or MPI's
 * error; a run of one process is alike. */
int tsr_dist_vote(int64_t begins, bool *same, int *other, int64_t *begins0, int64_t *begins_other);
/* A process that voted to run alone: MPI finalized, and it is process 0 of 1 from here on. */
void tsr_dist_leave(void);
/* tsr_dist_mean or tsr_dist_mean_ordered (`ordered`) of cells of `dtype`, TSR_DTYPE_F32 (float)
 * or TSR_DTYPE_F64 (double). */
int tsr_dist_mean_cells(void *cells, int64_t count, uint8_t dtype, bool ordered);
/* A mean across processes that runs while the caller goes on (REDUCE_BEGIN, REDUCE_END): begun
 * on `cells` (MPI_Iallreduce; nothing in a run of one process), moved on by progress (the
 * library advances it only inside its calls), ended by end (the wait, then the division by the
 * number of processes).  The cells must not be read or written in between. */
int tsr_dist_mean_begin(void *cells, int64_t count, uint8_t dtype, tsr_dist_pending *pending);
int tsr_dist_mean_progress(tsr_dist_pending *pending);
int tsr_dist_mean_end(tsr_dist_pending *pending);
/* Where the processes' values differ: index -1 when all agree; -2 when they do not even hold as
 * many values (value0 and value_other are then the counts); else the first differing value's
 * index, with rank 0's value and that of the first rank `other_rank` that holds another. */
typedef struct tsr_dist_difference {
    int64_t index;
    int other_rank;
    int64_t value0, value_other;
} tsr_dist_difference;
int tsr_dist_compare(const int64_t *values, uint32_t count, tsr_dist_difference *difference);
/* Rank 0's *value on every process. */
int tsr_dist_broadcast(int64_t *value);
/* An error that every process found at once (they compared values): tsr_main_fail then ends
 * each process normally instead of aborting the run, so that every one prints its message. */
void tsr_dist_set_collective_failure(void);
bool tsr_dist_collective_failure(void);

/* dist.c: whether tsr_dist_start chose the NCCL engine ("nccl": GPU states average on their GPUs,
 * nccl.c); `count` bytes of process 0 on every process (a multiple of 8; nothing in a run of one). */
bool tsr_dist_uses_nccl(void);
int tsr_dist_broadcast_bytes(void *bytes, int count);
/* dist.c: the NCCL communicator for GPU state `owner` on CUDA device `device` (its context
 * current), made on first use, collectively: process 0's unique id broadcast through MPI, then
 * tsr_nccl_open on every process. */
int tsr_dist_nccl_open(const void *owner, int device);

/* ---- The NCCL engine (nccl.c) --------------------------------------------------------------------
 *
 * NCCL's numbers this version uses (nccl.h's ncclDataType_t), the size of its unique id, and the
 * default of TSR_NCCL_TIMEOUT. */
enum {
    TSR_NCCL_FLOAT16 = 6,
    TSR_NCCL_FLOAT32 = 7,
    TSR_NCCL_FLOAT64 = 8,
    TSR_NCCL_BFLOAT16 = 9,
    TSR_NCCL_UNIQUE_ID_BYTES = 128,
    TSR_NCCL_DEFAULT_TIMEOUT = 60,
};
/* NCCL's data type of cells of `dtype` (TSR_DTYPE_*), or -1 for a type without a mean (integers). */
int tsr_nccl_type_of(uint8_t dtype);
/* TSR_NCCL_TIMEOUT's text (NULL or "": the default) as seconds > 0; TSR_ERR_DIST naming it otherwise. */
int tsr_nccl_parse_timeout(const char *text, double *seconds);
/* "2.21.5" from ncclGetVersion's code (both of NCCL's schemes). */
void tsr_nccl_version_text(int code, char *out, size_t size);
/* The k-th entry point resolved from the library, NULL past the last. */
const char *tsr_nccl_entry_name(size_t k);
/* Load the library and resolve its entry points (tsr_dist_start("nccl")); TSR_OK or TSR_ERR_DIST. */
int tsr_nccl_load(void);
/* TSR_ERR_DIST: --distributed=nccl given to a program without a GPU section. */
int tsr_nccl_refuse_cpu_program(void);
/* For tsr_dist_nccl_open: *needed when GPU state `owner` has no communicator yet; TSR_ERR_DIST
 * when it cannot have one (another state holds it, an earlier fault aborted it, no library). */
int tsr_nccl_needs_open(const void *owner, bool *needed);
/* A new unique id (process 0 draws it): TSR_NCCL_UNIQUE_ID_BYTES bytes into `id`. */
int tsr_nccl_unique_id(void *id);
/* The communicator of `size` processes with `unique_id`, this one `rank`, for GPU state `owner`
 * on CUDA device `device` (ncclCommInitRank: every process calls it together). */
int tsr_nccl_open(const void *owner, int device, int rank, int size, const void *unique_id);
/* One buffer of a mean: its device memory, cells and element type. */
typedef struct tsr_nccl_cells {
    void *device;
    int64_t count;
    uint8_t dtype;
} tsr_nccl_cells;
/* Enqueue, on the legacy default stream, the in-place mean (ncclAvg) of each of `count` device
 * arrays, as one group; errors of NCCL surface here (TSR_ERR_DIST). */
int tsr_nccl_mean(const tsr_nccl_cells *cells, uint32_t count);
/* Called while a wait for the GPU has lasted `waited_seconds`: TSR_OK to go on waiting, or
 * TSR_ERR_DIST after NCCL reported an error or the wait passed TSR_NCCL_TIMEOUT (the
 * communicator then aborted).  TSR_OK without a communicator. */
int tsr_nccl_watch(double waited_seconds);
/* Whether the communicator was aborted after a fault (the GPU may still hold its kernels). */
bool tsr_nccl_failed(void);
/* Destroy the communicator if GPU state `owner` holds it (aborted if NCCL reported an error). */
void tsr_nccl_close(const void *owner);
/* cuda.c: the in-place mean with NCCL of the listed buffers of a GPU state that have a device
 * copy (a host-newer one is uploaded first; all are device-newer afterwards); the others are
 * left for the caller, which learns of them from tsr_gpu_has_copy. */
int tsr_gpu_mean(tsr_state *state, const uint32_t *buffers, uint32_t count);
bool tsr_gpu_has_copy(const tsr_state *state, uint32_t b);

/* ---- Token files (tokens.c) ----------------------------------------------------------------------
 *
 * The token files llm.c and nanoGPT's data scripts write: a header of 256 little-endian int32
 * (TSR_TOKENS_MAGIC, the version: 1 for uint16 tokens, 2 for uint32 ones, the token count),
 * then the tokens.  A `tokens` data item cuts them into windows of W tokens, one per row of its
 * I32 tensor (docs/runtime.md §9). */
enum { TSR_TOKENS_MAGIC = 20240520, TSR_TOKENS_HEADER_WORDS = 256 };

/* A token file's tokens, in memory. */
typedef struct tsr_tokens {
    int32_t *tokens; /* malloc'd */
    int64_t count;
    bool bytes;      /* read by tsr_bytes_read: messages count bytes, not tokens */
} tsr_tokens;

/* "token", "tokens", "byte" or "bytes": what `tokens` holds, for `n` of them. */
const char *tsr_tokens_unit(const tsr_tokens *tokens, int64_t n);

/* Read the token file at `path` (data item `what`) whole: TSR_OK, or TSR_ERR_DATA with a message
 * naming the item and the file (bad magic or version, a count the file does not hold, bytes
 * after the tokens, a uint32 token beyond int32), TSR_ERR_NOMEM.  *tokens is empty on failure. */
int tsr_tokens_read(const char *path, const char *what, tsr_tokens *tokens);
/* Every byte of the file at `path` as a token 0 … 255 (the `bytes` source). */
int tsr_bytes_read(const char *path, const char *what, tsr_tokens *tokens);
void tsr_tokens_free(tsr_tokens *tokens);
/* How many sequential windows of `width` tokens the tokens hold (consecutive windows share one
 * token): (count - 1) / (width - 1), 0 when not even one. */
int64_t tsr_tokens_window_count(const tsr_tokens *tokens, int64_t width);
/* Fill `rows` rows of `width` int32 cells: row k the tokens from k·(width - 1) on (sequential),
 * or from a start drawn uniformly in [0, count - width] for draw `draw` and row k under `seed`
 * (random: reproducible, a new set of windows for each draw).  TSR_OK, or TSR_ERR_DATA naming
 * item `what` and file `path` when the tokens are too few. */
int tsr_tokens_sequential(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, const char *what,
                          const char *path);
int tsr_tokens_random(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, uint64_t seed,
                      uint64_t draw, const char *what, const char *path);
/* The same for process `shard` of `shards` of a distributed run whose item is sharded: row k is
 * global row k·shards + shard of the item `shards` times as long (its sequential window, or its
 * random draw); tsr_tokens_sequential and tsr_tokens_random are shard 0 of 1. */
int tsr_tokens_sequential_shard(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, int shard, int shards,
                                const char *what, const char *path);
int tsr_tokens_random_shard(const tsr_tokens *tokens, float *out, int64_t rows, int64_t width, uint64_t seed,
                            uint64_t draw, int shard, int shards, const char *what, const char *path);
/* The data set whose random windows fill buffer `buffer` (a `tokens ~windows:"random"` item),
 * with its tokens, or NULL: SHUFFLE draws new windows for it instead of permuting its rows. */
typedef struct tsr_token_windows {
    const tsr_tokens *tokens;
    const char *name, *path;
    uint64_t seed;
    int shard, shards; /* this process's rows of a sharded item (0 and 1 otherwise) */
} tsr_token_windows;
bool tsr_model_token_windows(const tsr_model *model, uint32_t buffer, tsr_token_windows *windows);

/* ---- Element types ------------------------------------------------------------------------------
 *
 * A buffer is an array of cells of its type's size (tsr_dtype_cell_bytes(); tsr_state.buffers
 * are float * whatever the type); an I32 buffer's cells hold int32 bit patterns, an F64 buffer's
 * doubles, a BF16 or F16 buffer's 2-byte patterns (tsr.h's conversions), read and written by
 * memcpy, never by float conversion. */

/* tsr.h's public names of the element types are the image's numbers. */
_Static_assert((int)TSR_F32 == (int)TSR_DTYPE_F32 && (int)TSR_I32 == (int)TSR_DTYPE_I32 &&
                   (int)TSR_F64 == (int)TSR_DTYPE_F64 && (int)TSR_BF16 == (int)TSR_DTYPE_BF16 &&
                   (int)TSR_F16 == (int)TSR_DTYPE_F16 && (int)TSR_U8 == (int)TSR_DTYPE_U8 &&
                   (int)TSR_BOOL == (int)TSR_DTYPE_BOOL && (int)TSR_I64 == (int)TSR_DTYPE_I64 &&
                   TSR_DTYPE_COUNT == 8,
               "tsr.h's tsr_dtype lists the image's TSR_DTYPE_KINDS");

/* The element type of buffer `buffer` (TSR_DTYPE_*; F32 past the last). */
uint8_t tsr_model_buffer_dtype(const tsr_model *model, uint32_t buffer);

/* The bytes of one cell of type `dtype` (its C type's size; 4 past the last). */
static inline size_t tsr_dtype_cell_bytes(uint8_t dtype) {
#define TSR_DTYPE_SIZE(name, word, numpy, ctype) sizeof(ctype),
    static const size_t sizes[] = {TSR_DTYPE_KINDS(TSR_DTYPE_SIZE)};
#undef TSR_DTYPE_SIZE
    return dtype < TSR_DTYPE_COUNT ? sizes[dtype] : sizeof(float);
}

/* `cells` cells of `cell_bytes` each, 64-byte aligned and zeroed; NULL (with an error recorded)
 * when it fails.  tsr_alloc_floats() is this for 4-byte cells. */
void *tsr_alloc_cells(int64_t cells, size_t cell_bytes);

/* A type's name in the language ("f32", "i32") and NumPy's descr of it ("<f4", "<i4"). */
static inline const char *tsr_dtype_word(uint8_t dtype) {
#define TSR_DTYPE_WORD(name, word, numpy, ctype) word,
    static const char *const words[] = {TSR_DTYPE_KINDS(TSR_DTYPE_WORD)};
#undef TSR_DTYPE_WORD
    return dtype < TSR_DTYPE_COUNT ? words[dtype] : "?";
}
static inline const char *tsr_dtype_numpy(uint8_t dtype) {
#define TSR_DTYPE_NUMPY(name, word, numpy, ctype) numpy,
    static const char *const descrs[] = {TSR_DTYPE_KINDS(TSR_DTYPE_NUMPY)};
#undef TSR_DTYPE_NUMPY
    return dtype < TSR_DTYPE_COUNT ? descrs[dtype] : "?";
}

/* The address of cell `cell` of a buffer of type `dtype` (cells of tsr_dtype_cell_bytes()). */
static inline void *tsr_cell_address(const void *buffer, uint8_t dtype, int64_t cell) {
    return (unsigned char *)buffer + (size_t)cell * tsr_dtype_cell_bytes(dtype);
}

/* Cell `cell` of an integer buffer (I32, U8, BOOL, I64) as its integer, exactly. */
static inline int64_t tsr_cell_integer(const void *buffer, uint8_t dtype, int64_t cell) {
    const void *at = tsr_cell_address(buffer, dtype, cell);
    if (dtype == TSR_DTYPE_I64) {
        int64_t v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    if (dtype == TSR_DTYPE_I32) {
        int32_t v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    return *(const uint8_t *)at;
}

/* Cell `cell` of a buffer of type `dtype` as a number (an integer cell's integer, exactly for
 * I32, U8 and BOOL, to nearest for an I64 beyond 2^53). */
static inline double tsr_cell_value(const void *buffer, uint8_t dtype, int64_t cell) {
    if (tsr_dtype_integer(dtype)) return (double)tsr_cell_integer(buffer, dtype, cell);
    const void *at = tsr_cell_address(buffer, dtype, cell);
    if (dtype == TSR_DTYPE_F64) {
        double v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    if (dtype == TSR_DTYPE_BF16 || dtype == TSR_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, at, sizeof h);
        return dtype == TSR_DTYPE_BF16 ? tsr_bf16_to_f32(h) : tsr_f16_to_f32(h);
    }
    float v;
    memcpy(&v, at, sizeof v);
    return v;
}

/* Store `value` in cell `cell`: rounded to float32, as it is in an F64 cell, rounded once to the
 * nearest BF16 or F16 (tsr_f64_to_bf16), for I32 truncated toward zero and held to int32's
 * range (NaN stores 0), for U8 that int32's low 8 bits (to_u8), for BOOL whether it is not 0
 * (to_bool; NaN stores 1), for I64 truncated toward zero and held to int64's range. */
static inline void tsr_cell_store(void *buffer, uint8_t dtype, int64_t cell, double value) {
    void *at = tsr_cell_address(buffer, dtype, cell);
    if (dtype == TSR_DTYPE_BOOL) {
        *(uint8_t *)at = value != 0;
        return;
    }
    if (dtype == TSR_DTYPE_I64) {
        int64_t v = value != value ? 0 : value < -0x1p63 ? INT64_MIN : value >= 0x1p63 ? INT64_MAX : (int64_t)value;
        memcpy(at, &v, sizeof v);
        return;
    }
    if (dtype == TSR_DTYPE_I32 || dtype == TSR_DTYPE_U8) {
        int32_t v = value != value ? 0 : value <= -2147483648.0 ? INT32_MIN : value >= 2147483647.0 ? INT32_MAX : (int32_t)value;
        if (dtype == TSR_DTYPE_U8) *(uint8_t *)at = (uint8_t)(v & 255);
        else memcpy(at, &v, sizeof v);
        return;
    }
    if (dtype == TSR_DTYPE_F64) {
        memcpy(at, &value, sizeof value);
        return;
    }
    if (dtype == TSR_DTYPE_BF16 || dtype == TSR_DTYPE_F16) { /* one rounding from the double */
        uint16_t h = dtype == TSR_DTYPE_BF16 ? tsr_f64_to_bf16(value) : tsr_f64_to_f16(value);
        memcpy(at, &h, sizeof h);
        return;
    }
    float v = (float)value;
    memcpy(at, &v, sizeof v);
}

/* The printed form of a grid: tsr_print_tensor() for a buffer of type `dtype` (I32 cells as
 * integers). */
void tsr_print_cells(FILE *out, const char *name, const char *shape_text, const float *data, uint8_t dtype,
                     uint32_t rank, const int64_t *dims);

/* Record an error that names no tensor, for the loaders: `fmt` is printf-like. */
int tsr_data_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Record `text`, the messages of several errors the hook has seen one by one (a line each), as
 * the thread's last error, without calling the hook again; returns `status`. */
int tsr_error_summary(int status, const char *text);


#endif
