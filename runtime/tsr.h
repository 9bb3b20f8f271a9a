/* tsr.h — the tsrc runtime library (libtsr.a): the one public header.
 *
 * Everything a compiled .tsr program needs at run time and nothing that needs a GPU: 64-byte-
 * aligned allocation with 64-bit sizes, the model state (buffers, index symbols) built from the
 * image the compiler embeds in each object, parameter initialisation with a counter-based RNG
 * (Philox4x32-10: reproducible, independent of thread count and order), data loaders (.npy, CSV)
 * and generators (half moons, circles, spirals, range, seeded uniform), tensor printing, a small
 * pthread pool for parallel loops, and status codes with messages and a replaceable error hook.
 * Programs compiled with --target=cuda use the same state; the runtime then loads the CUDA
 * driver at run time (runtime/cuda.c, dlopen), so nothing here needs CUDA to build or link.
 *
 * Generated headers (`tsrc -c model.tsr` writes model.h) include this file and wrap the
 * functions below under the module's own names; most programs never call tsr_* directly.  The
 * C ABI is described in docs/runtime.md.  The runtime includes nothing from the compiler. */
#ifndef TSR_H
#define TSR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Casts and the null pointer as C writes them in C, and as C++ does in C++ (static_cast,
 * reinterpret_cast, nullptr), so that this header and the generated ones compile cleanly under
 * C++ warnings such as -Wold-style-cast and -Wzero-as-null-pointer-constant. */
#ifdef __cplusplus
#define TSR_CAST(type, value) (static_cast<type>(value))
#define TSR_PTR_CAST(type, pointer) (reinterpret_cast<type>(pointer))
#if __cplusplus >= 201103L
#define TSR_NULL nullptr
#else
#define TSR_NULL 0
#endif
#else
#define TSR_CAST(type, value) ((type)(value))
#define TSR_PTR_CAST(type, pointer) ((type)(pointer))
#define TSR_NULL NULL
#endif

#define TSR_VERSION_MAJOR 0
#define TSR_VERSION_MINOR 1

/* ---- Status codes -------------------------------------------------------------------------- */

typedef enum tsr_status {
    TSR_OK = 0,
    TSR_ERR_NOMEM = 1,    /* an allocation failed */
    TSR_ERR_DATA = 2,     /* a data file is missing, malformed, or of the wrong shape */
    TSR_ERR_INDEX = 3,    /* an index symbol's value is outside its range */
    TSR_ERR_ARGUMENT = 4, /* a bad argument (NULL state, unknown name, …) */
    TSR_ERR_IMAGE = 5,    /* the model image in an object is malformed or from another version */
    TSR_ERR_IO = 6,       /* writing output failed */
    TSR_ERR_GPU = 7,      /* no GPU or driver, or the GPU failed (--target=cuda programs) */
    TSR_ERR_CPU = 8,      /* the object's code uses instructions this CPU lacks (--cpu=x86-64-v4 on AVX2) */
    TSR_ERR_DIST = 9      /* a distributed run: no MPI library, processes that disagree, a failed collective */
} tsr_status;

/* A short description of a status code ("data error"). */
const char *tsr_status_text(int status);

/* The text of the last error on this thread ("" if none). */
const char *tsr_last_error(void);

/* Called with every error (status and text) before the failing function returns.  The default
 * hook does nothing (the caller reads tsr_last_error()); pass NULL to restore it. */
typedef void (*tsr_error_hook)(int status, const char *message, void *user);
void tsr_set_error_hook(tsr_error_hook hook, void *user);

/* Record an error: sets the text tsr_last_error() returns, calls the hook, returns `status`. */
int tsr_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Memory --------------------------------------------------------------------------------- */

/* `cells` floats, 64-byte aligned and zeroed; NULL (with an error recorded) when it fails. */
float *tsr_alloc_floats(int64_t cells);
void tsr_free(void *p);

/* ---- Random numbers --------------------------------------------------------------------------- */

/* Philox4x32-10: four 32-bit words from a 128-bit counter and a 64-bit key. */
void tsr_philox4x32(const uint32_t counter[4], uint64_t key, uint32_t out[4]);

/* The parameter initialisation: a uniform number in [-1, 1) for cell `cell` of the tensor named
 * `name`, under `seed`.  Depends on nothing else (not on threads, order or other tensors). */
float tsr_uniform(uint64_t seed, const char *name, uint64_t cell);
/* A standard normal number for cell `cell` of the tensor named `name`, under `seed` (the
 * initialisers `normal`, `xavier_normal`, `kaiming_normal`); as pure as tsr_uniform. */
double tsr_normal(uint64_t seed, const char *name, uint64_t cell);
/* The loop IR's `random` primitive (docs/ir.md §2.5): a uniform number in [0, 1), a multiple of
 * 2^-24, for cell `cell` of the tensor whose site (FNV-1a of its name) is `site`, in routine run
 * number `run`, under `seed`: Philox4x32-10 of the counter {cell low, cell high, site, run low}
 * keyed by the seed, the top 24 bits of the first word times 2^-24.  Generated code computes
 * the same number inline; the reference executor calls this. */
float tsr_random_cell(uint64_t seed, uint64_t run, uint32_t site, uint64_t cell);

/* ---- Data ----------------------------------------------------------------------------------- */

/* Generators of the classic toy sets: `count` points (row-major count×2) and their labels (±1),
 * deterministic in `seed`.  Noise is Gaussian with standard deviation `noise`. */
void tsr_half_moons(float *points, float *labels, int64_t count, double noise, uint64_t seed);
/* Two concentric circles; the inner one has radius `factor` (0 < factor < 1). */
void tsr_circles(float *points, float *labels, int64_t count, double noise, double factor, uint64_t seed);
/* Two interleaved spirals. */
void tsr_spirals(float *points, float *labels, int64_t count, double noise, uint64_t seed);

/* Read a .npy file (format versions 1–3; little-endian, C order; of any float, integer or bool
 * type, converted to float) into `out`, whose shape is `dims` (rank `rank`): the file's shape must equal it.
 * `what` names the tensor in messages.  TSR_OK, or TSR_ERR_DATA with a message saying what is
 * wrong (missing, not a .npy file, wrong dtype, wrong shape, truncated). */
int tsr_load_npy(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what);
/* Read a CSV file of numbers (commas and/or blanks between fields, one row per line, `#`
 * comments, an optional header line of non-numbers) into `out`: it must hold exactly
 * dims[0]·…·dims[rank-1] numbers with dims[rank-1] numbers per line (rank 0 or 1: any layout).
 * Errors name the file, line and column. */
int tsr_load_csv(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what);

/* ---- Printing --------------------------------------------------------------------------------- */

/* "NAME : SHAPE" and the values as a grid: the last axis along a line, one line per index of
 * the axis before, a blank line between blocks of higher axes, each block headed by its
 * indices; numbers with %g. */
void tsr_print_tensor(FILE *out, const char *name, const char *shape_text, const float *data, uint32_t rank,
                      const int64_t *dims);

/* ---- Thread pool -------------------------------------------------------------------------------- */

/* Run fn(ctx, lo, hi) over [0, n) split into contiguous chunks of at least `grain` iterations,
 * on the pool's threads and the caller's.  Returns when every chunk is done.  The pool starts
 * on first use with TSR_NUM_THREADS threads (default: the number of online CPUs). */
typedef void (*tsr_range_fn)(void *ctx, int64_t lo, int64_t hi);
void tsr_parallel_for(tsr_range_fn fn, void *ctx, int64_t n, int64_t grain);
/* The number of threads parallel loops use (the pool's and the caller's); 0 means the default. */
void tsr_set_num_threads(int threads);
int tsr_num_threads(void);

/* ---- Kernel profile (tsrc --profile) ------------------------------------------------------------ */

/* Nanoseconds on a monotonic clock; code compiled with --profile reads it around each kernel. */
int64_t tsr_profile_clock(void);
/* Print to `out` the profile of a program compiled with --profile: its `count` kernels' labels
 * ("step #12  writes h, h.grad"), nanoseconds and launches (the counters its code keeps, summed
 * over every state and run of the process), the kernels launched sorted by time, slowest first,
 * each with its milliseconds, share, launches and mean microseconds per launch; kernels under
 * 0.1 % of the total are summed on one line.  Generated code calls it through
 * MODULE_profile_report(); an executable calls that when `main` ends. */
void tsr_profile_report(FILE *out, const char *module, uint32_t count, const char *const *labels, const int64_t *ns,
                        const int64_t *calls);

/* ---- Model state -------------------------------------------------------------------------------- */

/* A model's run-time state: one buffer per tensor, the values of its index symbols.  Generated
 * code reads `buffers` and `symbols` directly (their offsets are part of the ABI).
 *
 * `runs` counts the routine runs the state has started: every routine begins with
 * tsr_state_begin_run(), which gives the run the number `runs` (then adds one) and copies that
 * number and `seed` past the index symbols, where the kernels of the run read them as the key
 * of the `random` primitive (dropout masks): symbols[count + TSR_SYMBOL_SEED] and
 * symbols[count + TSR_SYMBOL_RUN], count being the model's symbols
 * (its index symbols, run-time sizes and loops of blocks: tsr_model_symbol_count).  So every
 * run draws fresh numbers, a run's forward and backward see the same ones, and a caller may set
 * `seed` or `runs` between runs to replay a run's numbers. */
typedef struct tsr_model tsr_model;
typedef struct tsr_state {
    float **buffers;          /* per buffer: 64-byte-aligned storage, or NULL (virtual) */
    int64_t *symbols;         /* per index symbol: its current value; then the run's random key */
    const tsr_model *model;
    uint64_t seed;
    uint64_t runs;            /* routine runs started */
} tsr_state;
enum { TSR_SYMBOL_SEED = 0, TSR_SYMBOL_RUN = 1, TSR_SYMBOL_KEY_WORDS = 2 };

/* Build a state from the image a generated object carries: allocate every buffer, fill
 * literals and constants, initialise parameters with tsr_uniform(seed, …), produce data sets
 * (files are read now).  NULL on failure (tsr_last_error() says why). */
tsr_state *tsr_state_create(const unsigned char *image, size_t image_size, uint64_t seed);
/* The same, with data items read from other files, as an executable's --data NAME=PATH:
 * names[i] (a data item, "xs", or a field of a data set, "moons.points") from paths[i] (.npy,
 * .csv; a token file for tokens), of the item's shape (a run-time length: the file's).  NULL
 * with TSR_ERR_ARGUMENT for a name the program lacks or a missing path, and every data error. */
tsr_state *tsr_state_create_data(const unsigned char *image, size_t image_size, uint64_t seed, const char *const *names,
                                 const char *const *paths, uint32_t count);
void tsr_state_destroy(tsr_state *state);

/* Index symbols: set (checked against the range) and read. */
int tsr_state_set_symbol(tsr_state *state, uint32_t symbol, int64_t value);
/* TSR_OK when every index symbol is in range. */
int tsr_state_check_symbols(tsr_state *state);
/* A routine's entry (generated routines and the reference executor call it first): check the
 * index symbols as tsr_state_check_symbols(), then number the run (`runs`, above).  A run
 * whose symbols are out of range is refused and not counted. */
int tsr_state_begin_run(tsr_state *state);
/* Before tsr_state_begin_run, a routine over run-time sizes (docs/runtime.md §16) checks the size
 * symbols `sizes` it uses: each is set, and equal to the first of its class (whose value its
 * loops run to).  TSR_OK, or TSR_ERR_INDEX with a message naming the size (and the one it
 * differs from). */
int tsr_state_check_sizes(tsr_state *state, const uint32_t *sizes, uint32_t count);

/* Run print statement `print` of the program's main (compiled from `print …`) to stdout; of a
 * program without main, of the one its executable runs (a print of each named tensor and gradient). */
int tsr_state_print(tsr_state *state, uint32_t print);

/* For the `main` of generated executables: read the command line (docs/cli.md "Running an
 * executable": --help, --seed N, --threads N, --data NAME=PATH, --load PATH and the program's options, whose
 * table the image holds), then create the state as tsr_state_create() does with the seed and
 * data files it chose; `seed` is the default; *status 0.  NULL when the program should stop, with
 * the exit status in *status: 0 after --help (printed to stdout), 2 after a bad command line or
 * when the processes a launcher started together began differently (the message is printed to
 * stderr, docs/runtime.md §19), 1 when the state could not be made (tsr_last_error() says why;
 * the caller prints it, as tsr_main_fail does). */
tsr_state *tsr_main_start(const unsigned char *image, size_t image_size, uint64_t seed, int argc, char **argv,
                          int *status);
/* The program's `option` NAME (docs/runtime.md §3): set it to `value`, as the command line's
 * --NAME VALUE does for an executable (an integer option takes a whole number within ±2^53, and
 * either kind a value within the range of the types the program computes it among), and the
 * tensors that read it with it; or read its value into *value.  TSR_OK, or TSR_ERR_ARGUMENT
 * (NULL state or name, no such option, a value the option cannot take; nothing changes). */
int tsr_state_set_option(tsr_state *state, const char *name, double value);
int tsr_state_option(const tsr_state *state, const char *name, double *value);
/* The value of option `option` of the program (an integer option), for loop bounds of main. */
int64_t tsr_state_option_int(const tsr_state *state, uint32_t option);
/* A bound of a loop of main: option `option`'s value plus `offset`, into *bound; TSR_OK, or
 * TSR_ERR_INDEX with a message when the sum is outside the 64-bit integers. */
int tsr_main_loop_bound(tsr_state *state, uint32_t option, int64_t offset, int64_t *bound);
/* TSR_OK when a loop of main running index symbol `symbol` from `from` to `to` (inclusive, either
 * way) stays within its range; TSR_ERR_INDEX with a message otherwise.  For loops whose bounds
 * come from options. */
int tsr_main_loop_check(tsr_state *state, uint32_t symbol, int64_t from, int64_t to);
/* TSR_OK when a loop of main over `symbol` from `from` to `to` (downward with `down`) runs zero
 * times or more; TSR_ERR_INDEX with a message when its bounds, which come from options, ask for
 * a negative count (`for epoch = 1 to epochs` with --epochs -1): an empty loop is `to` one step
 * short of `from`, anything further is a mistake on the command line. */
int tsr_main_loop_count(tsr_state *state, uint32_t symbol, int64_t from, int64_t to, int down);

/* Checkpoints (docs/runtime.md §14): write every parameter of the state to `path` as a NumPy
 * .npz archive (one float32 array per parameter, named as the tensor, in memory order), or
 * read them back from such an archive (numpy.savez's too).  TSR_OK, or TSR_ERR_IO (writing) /
 * TSR_ERR_DATA (reading: missing file or array, wrong shape, damaged archive, or a parameter the
 * saving model trained that this one lacks: a checkpoint of a larger model) with a message
 * naming the file and the array; a failed load changes nothing. */
int tsr_state_save(tsr_state *state, const char *path);
int tsr_state_load(tsr_state *state, const char *path);
/* Start from another model's weights (fine-tuning, a model grown by a layer): read each trained
 * parameter the checkpoint at `path` holds, of the same shape, and leave the others as
 * initialised; the training state, run counters and seed are not read.  *read (may be NULL)
 * counts the parameters read.  TSR_OK, or TSR_ERR_DATA (as tsr_state_load's, and for a file
 * holding none of the model's parameters) / TSR_ERR_ARGUMENT; a failed call changes nothing. */
int tsr_state_init_from(tsr_state *state, const char *path, uint32_t *read);

/* For the `main` of generated executables: run statement `action` of the program's main that
 * the runtime carries out (save, load, shuffle, record, plot: the image lists them). */
int tsr_state_action(tsr_state *state, uint32_t action);
/* The progress bar `action` of a loop of main: `done` of `total` iterations are done (0 when
 * the loop starts); drawn on standard error (docs/language.md §3.2.9). */
int tsr_state_progress(tsr_state *state, uint32_t action, int64_t done, int64_t total);

/* For the `main` of generated executables: print "PROGRAM: error: MESSAGE" (the last error) to
 * stderr, destroy the state (NULL is fine) and return 1, the exit status. */
int tsr_main_fail(tsr_state *state, const char *program);
/* For the end of `main`: write the checkpoint the command line asked for (--save PATH:
 * tsr_main_save), destroy the state, flush the standard output; 0, or (when the checkpoint or the
 * output could not be written) the message of tsr_main_fail and 1. */
int tsr_main_end(tsr_state *state, const char *program);
/* When main has run: the checkpoint of every parameter and the training state at the path of
 * the command line's --save PATH (tsr_main_start), if it gave one; TSR_OK otherwise.  The
 * reference executor calls it where a generated main calls tsr_main_end. */
int tsr_main_save(tsr_state *state);

/* ---- GPU states (--target=cuda; docs/runtime.md §15) ------------------------------------------
 *
 * A state made from an image with a GPU section keeps a device copy of every buffer a kernel
 * uses, and knows per buffer which copy is newer.  Data crosses only when the host reads or
 * writes a buffer (these functions, the accessors, print, the actions, checkpoints) or a
 * kernel needs it.  For a state without a GPU section they do nothing and return TSR_OK. */

/* Launch kernel `kernel` of the image's GPU section: copy its host-newer buffers to the
 * device, launch it (asynchronously, on the default stream) with the state's index symbols and
 * its buffers, and mark the buffers it writes device-newer.  TSR_OK, or TSR_ERR_GPU /
 * TSR_ERR_ARGUMENT with a message naming the kernel.  A kernel's own failure shows at the next
 * call that waits for the GPU (a copy to the host, tsr_state_sync_host). */
int tsr_gpu_launch(tsr_state *state, uint32_t kernel);
/* Launch kernels first … first + count - 1 as tsr_gpu_launch would, one after another, with
 * nothing on the host between them: the generated code calls it for each run of a routine's
 * kernels between two calls of the runtime.  The first launch of a run makes a CUDA graph of
 * its kernels and every launch replays it (refreshing the index symbols and the run's key of the
 * kernels that read them); with TSR_CUDA_GRAPHS=0, or a driver without graphs, the kernels are
 * launched one at a time.  TSR_OK, or TSR_ERR_GPU / TSR_ERR_ARGUMENT as tsr_gpu_launch. */
int tsr_gpu_launch_run(tsr_state *state, uint32_t first, uint32_t count);
/* Wait until the state's launched kernels have finished: code compiled with --profile
 * --target=cuda calls it after each launch, so that the time it records is the kernel's.
 * TSR_OK (also for a state without a GPU section), or TSR_ERR_GPU with the CUDA error. */
int tsr_gpu_profile_wait(tsr_state *state);
/* Buffer `buffer`'s host copy, brought up to date (device→host when the device's is newer)
 * and marked newer than the device's, since the caller may write through the pointer: read
 * or write it, then call no routine until done.  NULL (with an error recorded) for a bad
 * state or index or a failed copy; NULL without one for a buffer without storage. */
float *tsr_state_host_buffer(tsr_state *state, uint32_t buffer);
/* Wait for the GPU and copy every device-newer buffer to the host (both copies then current). */
int tsr_state_sync_host(tsr_state *state);
/* Copy every host-newer buffer to the device and wait for the GPU. */
int tsr_state_sync_device(tsr_state *state);

/* What the image says, for tools and generic drivers. */
uint32_t tsr_model_buffer_count(const tsr_model *model);
const char *tsr_model_buffer_name(const tsr_model *model, uint32_t buffer);
uint32_t tsr_model_symbol_count(const tsr_model *model);
const char *tsr_model_symbol_name(const tsr_model *model, uint32_t symbol);

/* A buffer's element type.  `buffers` holds float pointers whatever the type: an I32 buffer's
 * cells are 4-byte int32 values, an F64 buffer's 8-byte doubles, a U8 buffer's bytes 0..255 and
 * a BOOL buffer's bytes 0 or 1, an I64 buffer's 8-byte int64 values, to be read and written
 * through an int32_t, double, uint8_t or int64_t pointer (the generated accessor of the tensor
 * returns one), never converted as floats. */
typedef enum tsr_dtype {
    TSR_F32 = 0, TSR_I32 = 1, TSR_F64 = 2, TSR_BF16 = 3, TSR_F16 = 4, TSR_U8 = 5, TSR_BOOL = 6, TSR_I64 = 7
} tsr_dtype;
/* The element type of buffer `buffer` of the state (TSR_F32 … TSR_I64), or -1 for a NULL state
 * or a buffer the model does not have. */
int tsr_state_buffer_dtype(const tsr_state *state, uint32_t buffer);

/* BF16 and F16 cells are 2-byte bit patterns (uint16_t from the generated accessor).  These are
 * the conversions every executor uses (the compiler's reference executor, generated CPU and GPU
 * code, the loaders): to f32 exactly; from f32 or f64 to the nearest value of the type, ties to
 * even, overflowing to infinity, keeping subnormals; a NaN becomes the quiet NaN of its sign
 * (0x7fc0 / 0x7e00).  From f64 the value is first rounded to f32 toward zero with the last bit
 * set when inexact ("round to odd"), which makes the two roundings one (docs/language.md §3.9). */
static inline float tsr_f32_of_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline uint32_t tsr_bits_of_f32(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}
static inline float tsr_bf16_to_f32(uint16_t h) { return tsr_f32_of_bits(TSR_CAST(uint32_t, h) << 16); }
static inline uint16_t tsr_f32_to_bf16(float f) {
    uint32_t b = tsr_bits_of_f32(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return TSR_CAST(uint16_t, ((b >> 16) & 0x8000u) | 0x7fc0u);
    return TSR_CAST(uint16_t, (b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
static inline float tsr_f16_to_f32(uint16_t h) {
    uint32_t sign = (TSR_CAST(uint32_t, h) & 0x8000u) << 16, rest = h & 0x7fffu;
    if (rest >= 0x7c00u) return tsr_f32_of_bits(sign | 0x7f800000u | (rest & 0x3ffu) << 13); /* inf, NaN */
    if (rest >= 0x0400u) return tsr_f32_of_bits(sign | ((rest << 13) + 0x38000000u));     /* normal */
    return tsr_f32_of_bits(sign | tsr_bits_of_f32(TSR_CAST(float, rest) * 5.9604644775390625e-08f)); /* subnormal, 0: 2^-24 (C++11 has no hex floats) */
}
static inline uint16_t tsr_f32_to_f16(float f) {
    uint32_t b = tsr_bits_of_f32(f), sign = (b >> 16) & 0x8000u, a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return TSR_CAST(uint16_t, sign | 0x7e00u); /* NaN */
    if (a >= 0x47800000u) return TSR_CAST(uint16_t, sign | 0x7c00u); /* 65536 and beyond: inf */
    if (a >= 0x38800000u) { /* normal (a carry past 65504 gives inf) */
        a -= 0x38000000u;
        return TSR_CAST(uint16_t, sign | ((a + 0xfffu + ((a >> 13) & 1u)) >> 13));
    }
    /* below 2^-14: a multiple of 2^-24, rounded to nearest even by one f32 addition */
    return TSR_CAST(uint16_t, sign | (tsr_bits_of_f32(tsr_f32_of_bits(a) + 0.5f) - 0x3f000000u));
}
static inline float tsr_f64_to_f32_odd(double d) {
    float r = TSR_CAST(float, d);
    uint32_t b = tsr_bits_of_f32(r);
    if (!(r < 0 || r >= 0) || (!(TSR_CAST(double, r) < d) && !(TSR_CAST(double, r) > d))) return r; /* NaN, or exact (no float ==) */
    if ((r < 0 ? -TSR_CAST(double, r) : TSR_CAST(double, r)) > (d < 0 ? -d : d)) b -= 1; /* toward zero */
    return tsr_f32_of_bits(b | 1u);
}
static inline uint16_t tsr_f64_to_bf16(double d) { return tsr_f32_to_bf16(tsr_f64_to_f32_odd(d)); }
static inline uint16_t tsr_f64_to_f16(double d) { return tsr_f32_to_f16(tsr_f64_to_f32_odd(d)); }

/* ---- Several processes (data-parallel training; docs/runtime.md §19) ---------------------------
 *
 * One communicator per process.  tsr_dist_start(engine) chooses it: "none" (one process), "mpi"
 * (Open MPI, loaded at run time: TSR_MPI_LIBRARY, else libmpi.so.40, else libmpi.so), "auto"
 * (NULL too: MPI when a launcher such as mpirun or srun started several processes, else one), or
 * "nccl" (the processes as "auto"; GPU states average their gradients on the GPUs with NCCL,
 * loaded at run time: TSR_NCCL_LIBRARY, else libnccl.so.2; CPU states are then refused).
 * Generated executables call it from tsr_main_start (--distributed=…); a C driver calls it before
 * tsr_state_create when it wants its data sets split among the processes.  Until then, and in a
 * run of one process, the rank is 0, the size 1, the means do nothing and values agree.  Every
 * process must make the same collective calls in the same order.  TSR_OK, or TSR_ERR_DIST /
 * TSR_ERR_ARGUMENT with a message. */
int tsr_dist_start(const char *engine);
int tsr_dist_rank(void);
int tsr_dist_size(void);
/* This process's number among the processes on its machine (in rank order), and their count:
 * 0 and 1 until started and without MPI.  A --target=cuda state opens GPU local_rank modulo the
 * GPUs the process sees (docs/runtime.md §19). */
int tsr_dist_local_rank(void);
int tsr_dist_local_size(void);
/* In place: every cell becomes the mean over the processes of that cell (the library's
 * allreduce, then a division by the number of processes). */
int tsr_dist_mean(float *cells, int64_t count);
/* The same mean, the sum taken in rank order 0, 1, …, N-1 on every process: the same bits on
 * every process and in every run, whatever the library's algorithm (slower: an allgather). */
int tsr_dist_mean_ordered(float *cells, int64_t count);
/* The same two of double cells, summed in double. */
int tsr_dist_mean_f64(double *cells, int64_t count);
int tsr_dist_mean_ordered_f64(double *cells, int64_t count);
/* *agree = 1 on every process when all hold the same `count` values, else 0 on every process. */
int tsr_dist_agree(const int64_t *values, int64_t count, int *agree);
/* End every process of the run with exit status `status` (MPI_Abort; exit() in a run of one). */
void tsr_dist_abort(int status);
/* MPI_Finalize, once (also at exit when the runtime started MPI); TSR_OK at once without MPI. */
int tsr_dist_finalize(void);

#ifdef __cplusplus
}
#endif

#endif
