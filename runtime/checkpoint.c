/* checkpoint.c — a model's parameters as a NumPy .npz file (docs/runtime.md §14).
 *
 * A checkpoint of every parameter (no list) holds the training state too: every state tensor of
 * code (TSR_BUFFER_FLAG_STATE: optimisers' moments and step counts, and the working parameters
 * the compiler marks so: a sample buffer, a cache, which code writes and no backprop reaches, and
 * the gradients accumulated micro-batches add into between updates: TSR_BUFFER_FLAG_CARRIED) and
 * the run counters (tsrc.runs, tsrc.shuffles) and the seed (tsrc.seed), so that a run loading it
 * continues the run that saved it, and the names of the parameters the model trains
 * (tsrc.parameters), so that a load of the whole file into a model lacking one (a checkpoint of
 * more blocks) is refused rather than leaving those weights out; on loading, state arrays and
 * counters the file lacks are left as they are, the counters only move forward, the seed comes
 * with them unless the command line gave one (--seed), and the shuffles are replayed (shuffle.c)
 * to put the data in the saved run's order.
 *
 * Saving writes each chosen buffer (every parameter, or the list a `save` statement names) as
 * member NAME.npy of a zip archive: .npy format 1.0, little-endian, of the buffer's type's NumPy
 * descr (tsr_dtype_numpy: float32 '<f4', int32 '<i4' for an I32 buffer, float64 '<f8' for F64,
 * float16 '<f2' for F16; NumPy has no bfloat16, so a BF16 buffer is widened, exactly, to float32
 * '<f4', in pieces), C order, the shape the buffer has in memory (the dims of the generated
 * header); members are stored without compression, with their CRC-32s, so numpy.load reads the
 * file.  The archive is written to a new file of a random name beside PATH (O_EXCL, no link
 * followed) and renamed over PATH only when every byte is written, so a failed save never leaves a
 * cut checkpoint behind and nothing planted in the directory is written through; a PATH that
 * exists and is not a regular file (a device, a FIFO, a directory) is refused rather than
 * replaced.  A PATH that is a symbolic link is written through (the file it names is replaced,
 * the link stays, as a shell's redirection writes), but not one into /dev or /proc (/dev/stdout:
 * the program's prints go there, and a rename would replace the link itself).  The running
 * executable is refused, and in an executable (tsr_checkpoint_guard_saves) a file a data item was
 * read from: a save over them (`--save digits_train_x.npy`) would destroy what the run reads.
 * The temporary is flushed to the disk before the rename; in an executable its name is
 * registered while it exists, so that one stopped by a signal removes it
 * (tsr_checkpoint_remove_partial).
 *
 * Loading reads the zip's central directory from the end of the file, checks every entry against
 * its member's local header (the same name, no NUL byte: a damaged name would make a member look
 * like one the model does not need), and, for each chosen buffer,
 * member NAME.npy (with pread: memory is bounded by what the model's arrays need, whatever sizes
 * the file claims), checks every offset and size against the file, checks the CRC-32, and parses
 * the .npy through data.c (shape and dtype checked: a float dtype — float16, float32 or float64 —
 * for an F32, F64, BF16 or F16 buffer, converted to its type (widened exactly, or rounded once to
 * nearest even; a BF16 buffer saved as float32 loads back bit for bit), an integer one for an I32
 * buffer; the other kind is an error naming both types).  Archives written by numpy.savez (zip64
 * local headers included) load too; compressed members (numpy.savez_compressed) are refused by
 * name.  Every problem — a missing or unreadable file, a missing array, a wrong shape, a damaged or
 * truncated archive — is a TSR_ERR_DATA error naming the file and the array, and the state is
 * changed only when every array has been read.  Initialising from another model's checkpoint
 * (--init-from, tsr_state_init_from) reads the trained parameters the file holds alone, the
 * others keeping their initial values, and tells what was kept and what the file holds beyond.
 *
 * For a GPU state, saving reads and loading writes the host copies through the coherence of
 * cuda.c (tsr_buffer_to_host), so a checkpoint holds what the kernels last computed.
 *
 * Requires: a state made by tsr_state_create(); the host is little-endian (x86-64). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Zip record signatures and sizes (PKWARE's APPNOTE). */
enum {
    ZIP_LOCAL = 0x04034b50,
    ZIP_CENTRAL = 0x02014b50,
    ZIP_END = 0x06054b50,
    ZIP_LOCAL_SIZE = 30,
    ZIP_CENTRAL_SIZE = 46,
    ZIP_END_SIZE = 22,
    ZIP_VERSION = 20,      /* 2.0: what stored members need */
    ZIP_DATE_1980 = 0x21,  /* MS-DOS date 1980-01-01: a fixed time, so files are reproducible */
};

/* ---- CRC-32 (the zip polynomial, reflected 0xEDB88320) ------------------------------------------ */

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* The buffers a checkpoint holds: the listed ones, or (none listed) every parameter and every
 * state tensor of code (an optimiser's moments and step counts: the training state). */
static bool chosen(const tsr_state *s, const uint32_t *buffers, uint32_t count, uint32_t b) {
    uint32_t rank;
    const int64_t *dims;
    int64_t cells;
    uint8_t kind;
    if (!tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind) || !s->buffers[b]) return false;
    if (count == 0) return kind == TSR_BUF_PARAM || tsr_model_buffer_is_state(s->model, b);
    for (uint32_t i = 0; i < count; i++)
        if (buffers[i] == b) return true;
    return false;
}

/* TSR_OK, or an error when a buffer the checkpoint would hold has no storage: a parameter (or
 * training state) of run-time length whose size is not set yet, which a checkpoint can neither
 * hold nor fill (a save would leave it out, and the file would not load once it is set); with
 * `parameters_only`, a trained parameter (--init-from, which reads no training state). */
static int unsized_buffer(const tsr_state *s, const uint32_t *buffers, uint32_t count, bool parameters_only,
                          const char *what, const char *path) {
    uint32_t n = tsr_model_buffer_count(s->model);
    for (uint32_t b = 0; b < n; b++) {
        uint32_t rank;
        const int64_t *dims;
        int64_t cells;
        uint8_t kind;
        if (!tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind) || s->buffers[b]) continue;
        bool state = tsr_model_buffer_is_state(s->model, b);
        bool wanted = count == 0 && (parameters_only ? kind == TSR_BUF_PARAM && !state : kind == TSR_BUF_PARAM || state);
        for (uint32_t i = 0; i < count; i++) wanted |= buffers[i] == b;
        if (wanted)
            return tsr_error(TSR_ERR_ARGUMENT, "cannot %s checkpoint '%s': '%s' has a run-time size that is not set "
                             "yet (set it before saving or loading)", what, path, tsr_model_buffer_name(s->model, b));
    }
    return TSR_OK;
}

/* ---- Writing ------------------------------------------------------------------------------------ */

typedef struct Writer {
    FILE *file;
    uint64_t offset;
    bool failed;
} Writer;

static void put(Writer *w, const void *p, size_t n) {
    if (w->failed || n == 0) return;
    if (fwrite(p, 1, n, w->file) != n) w->failed = true;
    w->offset += n;
}
static void put16(Writer *w, uint32_t v) {
    unsigned char b[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    put(w, b, 2);
}
static void put32(Writer *w, uint32_t v) {
    put16(w, v & 0xffff);
    put16(w, v >> 16);
}

/* The .npy header (format 1.0) of an array of element type `dtype` and shape `dims`, padded with
 * blanks and a newline so that the data starts at a multiple of 64 bytes, as NumPy writes it.
 * Its length, or 0 when it does not fit `size`. */
static size_t npy_header(char *out, size_t size, uint8_t dtype, uint32_t rank, const int64_t *dims) {
    char shape[400];
    size_t n = (size_t)snprintf(shape, sizeof shape, "(");
    for (uint32_t a = 0; a < rank && n < sizeof shape; a++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, a ? ", %" PRId64 : "%" PRId64, dims[a]);
    if (n < sizeof shape) n += (size_t)snprintf(shape + n, sizeof shape - n, rank == 1 ? ",)" : ")");
    if (n >= sizeof shape) return 0;
    int len = snprintf(out + 10, size > 10 ? size - 10 : 0, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                       tsr_dtype_numpy(dtype), shape);
    size_t used = 10 + (size_t)len + 1, padded = (used + 63) / 64 * 64;
    if (len < 0 || padded > size || padded - 10 > 0xffff) return 0;
    memset(out + 10 + len, ' ', padded - used);
    out[padded - 1] = '\n';
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)((padded - 10) & 0xff);
    out[9] = (char)((padded - 10) >> 8);
    return padded;
}

typedef struct Member {
    char *name;
    uint32_t crc, size, offset;
} Member;

/* A zip's local header (at a member) or central directory entry (local header at `offset`). */
static void put_entry(Writer *w, const Member *m, bool central) {
    size_t name_len = strlen(m->name);
    put32(w, central ? ZIP_CENTRAL : ZIP_LOCAL);
    if (central) put16(w, ZIP_VERSION); /* made by */
    put16(w, ZIP_VERSION);              /* needed to extract */
    put16(w, 0);                        /* flags */
    put16(w, 0);                        /* method: stored */
    put16(w, 0);                        /* time */
    put16(w, ZIP_DATE_1980);
    put32(w, m->crc);
    put32(w, m->size); /* compressed */
    put32(w, m->size);
    put16(w, (uint32_t)name_len);
    put16(w, 0); /* extra */
    if (central) {
        put16(w, 0); /* comment */
        put16(w, 0); /* disk */
        put16(w, 0); /* internal attributes */
        put32(w, 0); /* external attributes */
        put32(w, m->offset);
    }
    put(w, m->name, name_len);
}

/* The bytes of one element of a saved array of a buffer of type `dtype`: its cell size, but 4 for
 * BF16 (saved as float32). */
static size_t saved_bytes(uint8_t dtype) { return dtype == TSR_DTYPE_BF16 ? 4 : tsr_dtype_cell_bytes(dtype); }

/* BF16 cells widened to float32, WIDEN_CELLS at a time: the CRC over them, or (with `w`) them
 * written. */
enum { WIDEN_CELLS = 4096 };
static uint32_t put_widened(Writer *w, const uint16_t *cells, int64_t count, uint32_t crc) {
    float wide[WIDEN_CELLS];
    for (int64_t at = 0; at < count; at += WIDEN_CELLS) {
        int64_t n = count - at < WIDEN_CELLS ? count - at : WIDEN_CELLS;
        for (int64_t i = 0; i < n; i++) wide[i] = tsr_bf16_to_f32(cells[at + i]);
        if (w) put(w, wide, (size_t)n * sizeof *wide);
        else crc = crc32_update(crc, (const unsigned char *)wide, (size_t)n * sizeof *wide);
    }
    return crc;
}

/* One member NAME.npy: an array of element type `dtype` (its cells' bits as they are; BF16 cells
 * widened to float32) and shape `dims` holding `values`; TSR_OK or an error. */
static int put_array(Writer *w, const char *path, const char *name, const float *values, uint8_t dtype, uint32_t rank,
                     const int64_t *dims, int64_t cells, Member *members, uint32_t *member_count) {
    char header[512];
    size_t header_len = npy_header(header, sizeof header, dtype, rank, dims);
    size_t bytes = (size_t)cells * saved_bytes(dtype);
    bool widen = saved_bytes(dtype) != tsr_dtype_cell_bytes(dtype);
    uint64_t size = header_len + (uint64_t)bytes;
    if (header_len == 0 || size > UINT32_MAX || w->offset + size > UINT32_MAX / 2 || *member_count >= 0xffff)
        return tsr_error(TSR_ERR_IO, "checkpoint '%s': array '%s' does not fit a zip file without zip64 extensions",
                         path, name);
    Member *m = &members[(*member_count)++];
    if (!(m->name = malloc(strlen(name) + 5))) return tsr_error(TSR_ERR_NOMEM, "out of memory saving '%s'", path);
    sprintf(m->name, "%s.npy", name);
    uint32_t crc = crc32_update(0, (const unsigned char *)header, header_len);
    m->crc = widen ? put_widened(NULL, (const uint16_t *)(const void *)values, cells, crc)
                   : crc32_update(crc, (const unsigned char *)values, bytes);
    m->size = (uint32_t)size;
    m->offset = (uint32_t)w->offset;
    put_entry(w, m, false);
    put(w, header, header_len);
    if (widen) put_widened(w, (const uint16_t *)(const void *)values, cells, 0);
    else put(w, values, bytes);
    return TSR_OK;
}

/* The rows of a (k, 2) .npy member `data` (a tsrc.shuffles of k statements), or -1: how many
 * statements shuffled in the program that saved it. */
static int64_t saved_statements(const unsigned char *data, size_t len) {
    int64_t dims[2];
    return tsr_npy_member_shape(data, len, 2, dims) && dims[1] == 2 ? dims[0] : -1;
}

/* The run counters of a training checkpoint: the state's routine runs (the random numbers'
 * counter) and each shuffle's runs (its permutation's), as float32 pairs (high, low) of 24 bits
 * each, exact up to 2^48 runs. */
enum { COUNTER_BITS = 24 };
static const char RUNS_ARRAY[] = "tsrc.runs", SHUFFLES_ARRAY[] = "tsrc.shuffles", SEED_ARRAY[] = "tsrc.seed";
/* The names of the parameters the saving model trains, each followed by '\n', as a uint8 array:
 * a load of the whole file into a model that lacks one of them is refused (a smaller model would
 * silently leave those weights out), while training state it lacks is ignored as before. */
static const char PARAMETERS_ARRAY[] = "tsrc.parameters";

/* Whether buffer `b` is a trained parameter: one a checkpoint of every parameter holds, that is
 * not training state (an optimiser's, a working parameter, a carried gradient). */
static bool trained_parameter(const tsr_state *s, uint32_t b) {
    uint32_t rank;
    const int64_t *dims;
    int64_t cells;
    uint8_t kind;
    return chosen(s, NULL, 0, b) && tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind) &&
           kind == TSR_BUF_PARAM && !tsr_model_buffer_is_state(s->model, b);
}

/* The next SHUFFLE action of main at or after action *k (then *k is past it), or NULL. */
static tsr_action *next_shuffle(const tsr_state *s, uint32_t *k) {
    for (tsr_action *a; (a = tsr_model_action(s->model, *k)); (*k)++)
        if (a->kind == TSR_ACTION_SHUFFLE) {
            (*k)++;
            return a;
        }
    return NULL;
}

static uint32_t shuffle_count(const tsr_state *s) {
    uint32_t n = 0;
    for (uint32_t k = 0; next_shuffle(s, &k);) n++;
    return n;
}

static void counter_pair(uint64_t runs, float *out) {
    out[0] = (float)(runs >> COUNTER_BITS);
    out[1] = (float)(runs & ((1u << COUNTER_BITS) - 1));
}

static int put_counters(tsr_state *s, Writer *w, const char *path, Member *members, uint32_t *member_count) {
    uint64_t limit = (uint64_t)1 << (2 * COUNTER_BITS);
    float runs[2];
    if (s->runs >= limit) return tsr_error(TSR_ERR_IO, "checkpoint '%s': more than 2^48 routine runs", path);
    counter_pair(s->runs, runs);
    const int64_t runs_dims[1] = {2};
    int status = put_array(w, path, RUNS_ARRAY, runs, TSR_DTYPE_F32, 1, runs_dims, 2, members, member_count);
    const int64_t seed_dims[1] = {1};
    int64_t seed = (int64_t)s->seed; /* the bits of the uint64 */
    if (status == TSR_OK)
        status = put_array(w, path, SEED_ARRAY, (const float *)(const void *)&seed, TSR_DTYPE_I64, 1, seed_dims, 1,
                           members, member_count);
    uint32_t n = shuffle_count(s);
    if (status != TSR_OK || n == 0) return status;
    float *pairs = malloc((size_t)n * 2 * sizeof *pairs);
    if (!pairs) return tsr_error(TSR_ERR_NOMEM, "out of memory saving '%s'", path);
    const tsr_action *a;
    for (uint32_t k = 0, j = 0; (a = next_shuffle(s, &k)); j++) {
        if (a->runs >= limit) status = tsr_error(TSR_ERR_IO, "checkpoint '%s': more than 2^48 shuffles", path);
        counter_pair(a->runs, pairs + 2 * j);
    }
    const int64_t pairs_dims[2] = {n, 2};
    if (status == TSR_OK)
        status = put_array(w, path, SHUFFLES_ARRAY, pairs, TSR_DTYPE_F32, 2, pairs_dims, (int64_t)n * 2, members,
                           member_count);
    free(pairs);
    return status;
}

static int put_parameter_names(tsr_state *s, Writer *w, const char *path, Member *members, uint32_t *member_count) {
    uint32_t n = tsr_model_buffer_count(s->model);
    size_t length = 0;
    for (uint32_t b = 0; b < n; b++)
        if (trained_parameter(s, b)) length += strlen(tsr_model_buffer_name(s->model, b)) + 1;
    char *names = malloc(length ? length : 1);
    if (!names) return tsr_error(TSR_ERR_NOMEM, "out of memory saving '%s'", path);
    size_t at = 0;
    for (uint32_t b = 0; b < n; b++)
        if (trained_parameter(s, b)) {
            size_t k = strlen(tsr_model_buffer_name(s->model, b));
            memcpy(names + at, tsr_model_buffer_name(s->model, b), k);
            names[at + k] = '\n';
            at += k + 1;
        }
    const int64_t dims[1] = {(int64_t)length};
    int status = put_array(w, path, PARAMETERS_ARRAY, (const float *)(const void *)names, TSR_DTYPE_U8, 1, dims,
                           (int64_t)length, members, member_count);
    free(names);
    return status;
}

/* Write the members and the directory; TSR_OK or an error naming the file.  A checkpoint of
 * every parameter (count 0) also holds the training state and the run counters. */
static int write_archive(tsr_state *s, Writer *w, const char *path, const uint32_t *buffers, uint32_t count,
                         Member *members, uint32_t *member_count) {
    uint32_t n = tsr_model_buffer_count(s->model);
    for (uint32_t b = 0; b < n; b++) {
        if (!chosen(s, buffers, count, b)) continue;
        uint32_t rank;
        const int64_t *dims;
        int64_t cells;
        uint8_t kind;
        tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind);
        int status = tsr_buffer_to_host(s, b, false); /* a GPU state's newest values */
        if (status == TSR_OK)
            status = put_array(w, path, tsr_model_buffer_name(s->model, b), s->buffers[b],
                               tsr_model_buffer_dtype(s->model, b), rank, dims, cells, members, member_count);
        if (status != TSR_OK) return status;
    }
    if (count == 0) {
        int status = put_counters(s, w, path, members, member_count);
        if (status == TSR_OK) status = put_parameter_names(s, w, path, members, member_count);
        if (status != TSR_OK) return status;
    }
    uint64_t directory = w->offset;
    for (uint32_t i = 0; i < *member_count; i++) put_entry(w, &members[i], true);
    uint64_t end = w->offset;
    put32(w, ZIP_END);
    put16(w, 0); /* this disk */
    put16(w, 0); /* the directory's disk */
    put16(w, *member_count);
    put16(w, *member_count);
    put32(w, (uint32_t)(end - directory));
    put32(w, (uint32_t)directory);
    put16(w, 0); /* comment */
    return TSR_OK;
}

/* The temporary of the save in progress, for an executable's signal handler
 * (tsr_checkpoint_remove_partial), kept only once tsr_checkpoint_guard_saves() was called (an
 * executable, whose saves are made by its one main thread; a library's callers may save from
 * several threads, and have no such handler).  The name is written, then a signal fence, then the
 * flag set; the flag is cleared before anything else changes, so the handler reads a whole name
 * or none. */
static bool partial_kept;
static char partial_name[PATH_MAX + 64];
static volatile sig_atomic_t partial_set;

static void register_partial(const char *name) {
    if (!partial_kept || strlen(name) >= sizeof partial_name) return;
    memcpy(partial_name, name, strlen(name) + 1);
    atomic_signal_fence(memory_order_seq_cst);
    partial_set = 1;
}
static void forget_partial(void) { partial_set = 0; }

void tsr_checkpoint_guard_saves(void) {
    partial_kept = true;
    tsr_data_files_keep();
}

void tsr_checkpoint_remove_partial(void) {
    if (partial_set) unlink(partial_name); /* async-signal-safe */
}

/* A new file beside `path` (in its directory), made with O_CREAT|O_EXCL|O_NOFOLLOW under a
 * random name, so nothing planted there (a link to another file, a FIFO, a file under a guessed
 * name) is opened, followed or overwritten; its mode is 0666 less the umask, as fopen's.  The
 * descriptor, with the name in *temp (malloc'd); -1 with errno set. */
static int create_beside(const char *path, char **temp) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0, n = strlen(path) + 40;
    bool long_name = strlen(path) - dir + 20 > NAME_MAX;
    char *t = malloc(n);
    if (!t) return errno = ENOMEM, -1;
    for (unsigned attempt = 0; attempt < 64; attempt++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (attempt + 1) * 0x9e3779b97f4a7c15u;
        if (long_name) snprintf(t, n, "%.*s.tsr-save.%012" PRIx64, (int)dir, path, r & 0xffffffffffffu);
        else snprintf(t, n, "%s.tmp%012" PRIx64, path, r & 0xffffffffffffu);
        int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *temp = t;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int err = errno;
    free(t);
    errno = err;
    return -1;
}

/* The directory of `path` (malloc'd; "." for a bare name, "/" for one at the root), or NULL. */
static char *directory_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

/* Whether `path` lies in /dev or /proc, where the standard streams and descriptors are named: its
 * directory resolved, so that `//proc/self/fd/1` and `fds/1` (fds a link to /proc/self/fd) are
 * seen for what they are. */
static bool names_stream(const char *path) {
    char *dir = directory_of(path);
    char *real = dir ? realpath(dir, NULL) : NULL;
    bool in = real && (!strcmp(real, "/dev") || !strncmp(real, "/dev/", 5) || !strcmp(real, "/proc") ||
                       !strncmp(real, "/proc/", 6));
    free(dir);
    free(real);
    return in;
}

/* The file a save at `path` replaces, in *target (malloc'd): `path`, or the file the symbolic
 * link at `path` names, followed link by link.  A link in or into /dev or /proc is refused (a
 * stream: /dev/stdout, /proc/self/fd/1); a file there (/dev/shm/run.npz) is not. */
static int save_target(const char *path, char **target) {
    char *at = strdup(path);
    if (!at) return tsr_error(TSR_ERR_NOMEM, "out of memory checking '%s'", path);
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(at, &st) != 0 || !S_ISLNK(st.st_mode)) break;
        if (names_stream(at)) {
            free(at);
            return tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': it names a stream or a descriptor (such as the "
                             "standard output), not a file", path);
        }
        char link[PATH_MAX];
        ssize_t n = readlink(at, link, sizeof link - 1);
        if (n < 0 || hops == 40) {
            free(at);
            return tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': %s", path,
                             n < 0 ? strerror(errno) : "too many levels of symbolic links");
        }
        link[n] = 0;
        /* A relative link is relative to the link's directory. */
        const char *slash = strrchr(at, '/');
        size_t dir = link[0] == '/' || !slash ? 0 : (size_t)(slash - at) + 1;
        char *next = malloc(dir + (size_t)n + 1);
        if (!next) {
            free(at);
            return tsr_error(TSR_ERR_NOMEM, "out of memory checking '%s'", path);
        }
        memcpy(next, at, dir);
        memcpy(next + dir, link, (size_t)n + 1);
        free(at);
        at = next;
        if (names_stream(at)) {
            free(at);
            return tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': it names a stream or a descriptor (such as the "
                             "standard output), not a file", path);
        }
    }
    *target = at;
    return TSR_OK;
}

/* The file is replaced by a rename: only a regular file may be replaced, and not one the process
 * reads (a data item's file, the running executable).  A device, a FIFO or a directory stays what
 * it is. */
static int replaceable(const char *path, const char *target) {
    struct stat st;
    if (stat(target, &st) != 0) return TSR_OK;
    if (!S_ISREG(st.st_mode))
        return tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': it is %s", path,
                         S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    char what[64];
    if (tsr_data_file_item(st.st_dev, st.st_ino, what, sizeof what))
        return tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': data '%s' was read from it, and a save "
                         "would replace it", path, what);
    struct stat self;
    if (stat("/proc/self/exe", &self) == 0 && self.st_dev == st.st_dev && self.st_ino == st.st_ino)
        return tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': it is this program's executable", path);
    return TSR_OK;
}

int tsr_checkpoint_writable(const char *path) {
    if (!path || !path[0]) return tsr_error(TSR_ERR_ARGUMENT, "save: no file name");
    char *target = NULL;
    int status = save_target(path, &target);
    if (status != TSR_OK) return status;
    status = replaceable(path, target);
    if (status == TSR_OK) {
        /* Make the temporary a save makes, and remove it: a directory that takes no new files
         * (/proc, /sys, a read-only file system, one root's access() lets pass) says so now. */
        char *temp = NULL;
        int fd = create_beside(target, &temp);
        if (fd >= 0) {
            close(fd);
            unlink(temp);
            free(temp);
        } else {
            int err = errno;
            char *dir = directory_of(target);
            struct stat st;
            if (dir && err == ENOENT && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
                status = tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': its directory '%s' takes no new files "
                                   "(a save writes a new file beside it, then renames it onto it)", path, dir);
            else
                status = tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': %s", path, strerror(err));
            free(dir);
        }
    }
    free(target);
    return status;
}

int tsr_checkpoint_save(tsr_state *s, const char *path, const uint32_t *buffers, uint32_t count) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    if (!path || !path[0]) return tsr_error(TSR_ERR_ARGUMENT, "save: no file name");
    char *target = NULL;
    int replace = save_target(path, &target);
    if (replace == TSR_OK) replace = replaceable(path, target);
    if (replace != TSR_OK) {
        free(target);
        return replace;
    }
    int unsized = unsized_buffer(s, buffers, count, false, "write", path);
    if (unsized != TSR_OK) {
        free(target);
        return unsized;
    }
    uint32_t n = tsr_model_buffer_count(s->model);
    /* the buffers, the seed, the two counters and the parameters' names */
    Member *members = calloc((size_t)n + 4, sizeof *members);
    if (!members) {
        free(target);
        return tsr_error(TSR_ERR_NOMEM, "out of memory saving '%s'", path);
    }
    char *partial = NULL;
    int fd = create_beside(target, &partial);
    if (fd >= 0) register_partial(partial);
    Writer w = {fd >= 0 ? fdopen(fd, "wb") : NULL, 0, false};
    int status = TSR_OK;
    uint32_t member_count = 0;
    if (!w.file) {
        status = tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd), unlink(partial), forget_partial();
    } else {
        status = write_archive(s, &w, path, buffers, count, members, &member_count);
        int saved_errno = errno;
        /* On the disk before it takes the name: a crash after the rename finds the whole file. */
        if (!w.failed && (fflush(w.file) != 0 || fsync(fileno(w.file)) != 0)) {
            w.failed = true;
            saved_errno = errno;
        }
        if (fclose(w.file) != 0 && !w.failed) {
            w.failed = true;
            saved_errno = errno;
        }
        if (status == TSR_OK && w.failed)
            status = tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': %s", path, strerror(saved_errno ? saved_errno : EIO));
        if (status == TSR_OK && rename(partial, target) != 0)
            status = tsr_error(TSR_ERR_IO, "cannot write checkpoint '%s': %s", path, strerror(errno));
        if (status != TSR_OK) unlink(partial);
        forget_partial();
    }
    for (uint32_t i = 0; i < member_count; i++) free(members[i].name);
    free(members);
    free(partial);
    free(target);
    return status;
}

int tsr_state_save(tsr_state *s, const char *path) { return tsr_checkpoint_save(s, path, NULL, 0); }

/* ---- Reading ------------------------------------------------------------------------------------ */

static uint32_t get16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const unsigned char *p) { return get16(p) | get16(p + 2) << 16; }

static int damaged(const char *path, const char *why) {
    return tsr_error(TSR_ERR_DATA, "checkpoint '%s' is not a readable .npz file: %s", path, why);
}

/* The archive being read: an open regular file, read in pieces with pread, so that memory is
 * bounded by what the chosen arrays need, whatever the file claims. */
typedef struct Archive {
    const char *path;
    int fd;
    uint64_t size;
    unsigned char *directory; /* the central directory, read once */
    size_t directory_size;
    uint32_t entries;
} Archive;

/* The largest central directory read (a zip entry per array: far more than any model has). */
enum { MAX_DIRECTORY = 16 << 20 };

static int archive_open(Archive *a, const char *path) {
    a->path = path;
    a->fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (a->fd < 0) return tsr_error(TSR_ERR_DATA, "cannot open checkpoint '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(a->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return tsr_error(TSR_ERR_DATA, "checkpoint '%s' is not a regular file", path);
    a->size = (uint64_t)st.st_size;
    return TSR_OK;
}

static void archive_close(Archive *a) {
    if (a->fd >= 0) close(a->fd);
    free(a->directory);
}

/* Exactly `n` bytes at `offset`, or an error (a file cut short says so). */
static int read_at(const Archive *a, uint64_t offset, void *out, size_t n) {
    size_t have = 0;
    while (have < n) {
        ssize_t got = pread(a->fd, (unsigned char *)out + have, n - have, (off_t)(offset + have));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return tsr_error(TSR_ERR_DATA, "cannot read checkpoint '%s': %s", a->path, strerror(errno));
        if (got == 0) return damaged(a->path, "it is cut short");
        have += (size_t)got;
    }
    return TSR_OK;
}

/* Find the end record (searched backwards past a comment of up to 64 KiB) and read the
 * central directory it points to. */
static int read_directory(Archive *a) {
    unsigned char tail[ZIP_END_SIZE + 0xffff];
    size_t n = a->size < sizeof tail ? (size_t)a->size : sizeof tail;
    int status = read_at(a, a->size - n, tail, n);
    if (status != TSR_OK) return status;
    size_t end = SIZE_MAX;
    for (size_t back = ZIP_END_SIZE; back <= n; back++)
        if (get32(tail + n - back) == ZIP_END) {
            end = n - back;
            break;
        }
    if (end == SIZE_MAX) return damaged(a->path, "no zip directory at its end (not a zip file, or cut short)");
    a->entries = get16(tail + end + 10);
    uint32_t length = get32(tail + end + 12), offset = get32(tail + end + 16);
    if ((uint64_t)offset + length > a->size - n + end) return damaged(a->path, "its zip directory lies outside the file");
    if (length > MAX_DIRECTORY) return damaged(a->path, "its zip directory is larger than 16 MiB");
    a->directory_size = length;
    if (!(a->directory = malloc(length ? length : 1)))
        return tsr_error(TSR_ERR_NOMEM, "out of memory reading checkpoint '%s'", a->path);
    return read_at(a, offset, a->directory, length);
}

/* Every entry of the directory whole, named without a NUL byte, and named the same in its local
 * header: a damaged name would otherwise make its member an array the model does not need, left
 * out of the load without a word (a run counter, an optimiser's state), and the run resumed would
 * silently differ from the one saved. */
static int check_directory(const Archive *a) {
    const unsigned char *d = a->directory;
    size_t at = 0;
    for (uint32_t i = 0; i < a->entries; i++) {
        if (at + ZIP_CENTRAL_SIZE > a->directory_size || get32(d + at) != ZIP_CENTRAL)
            return damaged(a->path, "a damaged zip directory");
        size_t name_len = get16(d + at + 28), extra = get16(d + at + 30), comment = get16(d + at + 32);
        uint32_t local = get32(d + at + 42);
        if (at + ZIP_CENTRAL_SIZE + name_len + extra + comment > a->directory_size)
            return damaged(a->path, "a damaged zip directory");
        const unsigned char *name = d + at + ZIP_CENTRAL_SIZE;
        if (memchr(name, 0, name_len)) return damaged(a->path, "a member's name in its zip directory holds a NUL byte");
        unsigned char header[ZIP_LOCAL_SIZE], piece[256];
        if ((uint64_t)local + ZIP_LOCAL_SIZE + name_len > a->size || read_at(a, local, header, sizeof header) != TSR_OK ||
            get32(header) != ZIP_LOCAL)
            return damaged(a->path, "a member's header lies outside the file");
        bool same = get16(header + 26) == name_len;
        for (size_t k = 0; same && k < name_len; k += sizeof piece) {
            size_t n = name_len - k < sizeof piece ? name_len - k : sizeof piece;
            same = read_at(a, local + ZIP_LOCAL_SIZE + k, piece, n) == TSR_OK && memcmp(piece, name + k, n) == 0;
        }
        if (!same) return damaged(a->path, "a member's name in the zip directory differs from its header's");
        at += ZIP_CENTRAL_SIZE + name_len + extra + comment;
    }
    /* Entries past the count would be members no reader here sees (an array left out of the
     * load, or one named twice unnoticed). */
    if (at != a->directory_size) return damaged(a->path, "its zip directory holds more than the entries its end record counts");
    return TSR_OK;
}

/* Whether the directory entries from byte `at`, the `left` after the one just read, name member
 * NAME.npy again (an archive written by hand can: numpy.load reads the last, this reader the
 * first, so the file is refused).  A damaged entry ends the search; read_member reports it. */
static bool named_again(const Archive *a, size_t at, uint32_t left, const char *name, size_t want) {
    const unsigned char *d = a->directory;
    for (; left > 0; left--) {
        if (at + ZIP_CENTRAL_SIZE > a->directory_size || get32(d + at) != ZIP_CENTRAL) return false;
        size_t name_len = get16(d + at + 28), extra = get16(d + at + 30), comment = get16(d + at + 32);
        if (at + ZIP_CENTRAL_SIZE + name_len + extra + comment > a->directory_size) return false;
        const char *member = (const char *)d + at + ZIP_CENTRAL_SIZE;
        if (name_len == want + 4 && memcmp(member, name, want) == 0 && memcmp(member + want, ".npy", 4) == 0) return true;
        at += ZIP_CENTRAL_SIZE + name_len + extra + comment;
    }
    return false;
}

/* Member NAME.npy into *data (malloc'd) and *len.  With `optional`, a member the archive does not
 * have is TSR_OK with *data NULL. */
static int read_member(const Archive *a, const char *name, uint64_t limit, bool optional, unsigned char **data,
                       size_t *len) {
    *data = NULL;
    *len = 0;
    const unsigned char *d = a->directory;
    size_t want = strlen(name), at = 0;
    for (uint32_t i = 0; i < a->entries; i++) {
        if (at + ZIP_CENTRAL_SIZE > a->directory_size || get32(d + at) != ZIP_CENTRAL)
            return damaged(a->path, "a damaged zip directory");
        uint32_t flags = get16(d + at + 8), method = get16(d + at + 10), crc = get32(d + at + 16);
        uint32_t stored = get32(d + at + 20), original = get32(d + at + 24);
        size_t name_len = get16(d + at + 28), extra = get16(d + at + 30), comment = get16(d + at + 32);
        uint32_t local = get32(d + at + 42);
        if (at + ZIP_CENTRAL_SIZE + name_len + extra + comment > a->directory_size)
            return damaged(a->path, "a damaged zip directory");
        const char *member = (const char *)d + at + ZIP_CENTRAL_SIZE;
        at += ZIP_CENTRAL_SIZE + name_len + extra + comment;
        if (name_len != want + 4 || memcmp(member, name, want) != 0 || memcmp(member + want, ".npy", 4) != 0) continue;
        if (named_again(a, at, a->entries - 1 - i, name, want))
            return tsr_error(TSR_ERR_DATA, "checkpoint '%s' holds array '%s' twice", a->path, name);
        if (method != 0)
            return tsr_error(TSR_ERR_DATA, "checkpoint '%s': array '%s' is compressed (only stored members are read: "
                             "write it with numpy.savez, not numpy.savez_compressed)", a->path, name);
        if (flags & 1) return tsr_error(TSR_ERR_DATA, "checkpoint '%s': array '%s' is encrypted", a->path, name);
        if (stored != original) return damaged(a->path, "a member's sizes disagree");
        if (stored > limit)
            return tsr_error(TSR_ERR_DATA, "checkpoint '%s': array '%s' holds %" PRIu32 " bytes, more than its shape "
                             "can need", a->path, name, stored);
        unsigned char header[ZIP_LOCAL_SIZE];
        if ((uint64_t)local + ZIP_LOCAL_SIZE > a->size || read_at(a, local, header, sizeof header) != TSR_OK ||
            get32(header) != ZIP_LOCAL)
            return damaged(a->path, "a member's header lies outside the file");
        uint64_t start = (uint64_t)local + ZIP_LOCAL_SIZE + get16(header + 26) + get16(header + 28);
        if (start + stored > a->size)
            return tsr_error(TSR_ERR_DATA, "checkpoint '%s': array '%s' is truncated", a->path, name);
        if (!(*data = malloc(stored ? stored : 1)))
            return tsr_error(TSR_ERR_NOMEM, "out of memory reading checkpoint '%s'", a->path);
        int status = read_at(a, start, *data, stored);
        if (status == TSR_OK && crc32_update(0, *data, stored) != crc)
            status = tsr_error(TSR_ERR_DATA, "checkpoint '%s': array '%s' is damaged (its CRC-32 does not match)",
                               a->path, name);
        if (status != TSR_OK) {
            free(*data);
            *data = NULL;
            return status;
        }
        *len = stored;
        return TSR_OK;
    }
    if (optional) return TSR_OK;
    return tsr_error(TSR_ERR_DATA, "checkpoint '%s' has no array '%s'", a->path, name);
}

/* The most bytes a .npy member of `cells` cells can hold: the largest header data.c reads and
 * 8 bytes a cell (float64, int64). */
static uint64_t member_limit(int64_t cells) { return 16 + (1u << 20) + (uint64_t)cells * 8; }

/* One counter from its pair (high, low): whole numbers below 2^24 each, or an error. */
static int counter_of(const float *pair, const char *path, const char *array, uint64_t *out) {
    for (int i = 0; i < 2; i++)
        if (!(pair[i] >= 0 && pair[i] < (float)(1u << COUNTER_BITS) && pair[i] == (float)(uint32_t)pair[i]))
            return tsr_error(TSR_ERR_DATA, "checkpoint '%s': array '%s' does not hold run counters", path, array);
    *out = (uint64_t)pair[0] << COUNTER_BITS | (uint64_t)pair[1];
    return TSR_OK;
}

/* The run counters of a training checkpoint, when it has them (a checkpoint of parameters only
 * leaves them as they are): the routine runs into *runs, the shuffles' into *shuffles (malloc'd,
 * one per SHUFFLE action in order; NULL when the archive has none), and the seed of the run that
 * saved it into *seed (*has_seed false when the file has none: an earlier tsrc's). */
static int read_counters(const tsr_state *s, const Archive *a, uint64_t *runs, uint64_t **shuffles, uint64_t *seed,
                         bool *has_seed) {
    unsigned char *data = NULL;
    size_t len = 0;
    float pair[2];
    const int64_t runs_dims[1] = {2};
    int status = read_member(a, RUNS_ARRAY, member_limit(2), true, &data, &len);
    if (status == TSR_OK && data)
        status = tsr_load_npy_member(data, len, pair, TSR_DTYPE_F32, 1, runs_dims, a->path, RUNS_ARRAY);
    if (status == TSR_OK && data) status = counter_of(pair, a->path, RUNS_ARRAY, runs);
    free(data);
    data = NULL;
    int64_t seed_bits = 0;
    const int64_t seed_dims[1] = {1};
    if (status == TSR_OK) status = read_member(a, SEED_ARRAY, member_limit(1), true, &data, &len);
    if (status == TSR_OK && data)
        status = tsr_load_npy_member(data, len, &seed_bits, TSR_DTYPE_I64, 1, seed_dims, a->path, SEED_ARRAY);
    *has_seed = status == TSR_OK && data;
    *seed = (uint64_t)seed_bits;
    free(data);
    uint32_t n = shuffle_count(s);
    if (status != TSR_OK || n == 0) return status;
    status = read_member(a, SHUFFLES_ARRAY, member_limit((int64_t)n * 2), true, &data, &len);
    if (status != TSR_OK || !data) return status;
    float *pairs = malloc((size_t)n * 2 * sizeof *pairs);
    *shuffles = calloc(n, sizeof **shuffles);
    const int64_t pairs_dims[2] = {n, 2};
    if (!pairs || !*shuffles) status = tsr_error(TSR_ERR_NOMEM, "out of memory reading checkpoint '%s'", a->path);
    if (status == TSR_OK)
        status = tsr_load_npy_member(data, len, pairs, TSR_DTYPE_F32, 2, pairs_dims, a->path, SHUFFLES_ARRAY);
    int64_t saved = status == TSR_OK ? n : saved_statements(data, len);
    if (saved >= 0 && saved != n)
        status = tsr_error(TSR_ERR_DATA, "checkpoint '%s' counts the permutations of %" PRId64 " shuffle statement%s, and "
                           "this program has %u: it was saved by a program that shuffles its data otherwise, whose data "
                           "order cannot be resumed (a load that lists the tensors, load \"FILE\" [w; b], takes them alone)",
                           a->path, saved, saved == 1 ? "" : "s", n);
    for (uint32_t j = 0; j < n && status == TSR_OK; j++) status = counter_of(pairs + 2 * j, a->path, SHUFFLES_ARRAY, &(*shuffles)[j]);
    free(pairs);
    free(data);
    if (status != TSR_OK) {
        free(*shuffles);
        *shuffles = NULL;
    }
    return status;
}

/* Whether the archive has member NAME.npy. */
static bool has_member(const Archive *a, const char *name) { return named_again(a, 0, a->entries, name, strlen(name)); }

/* Whether the model has a buffer named `name` that a checkpoint of every parameter holds. */
static bool model_holds(const tsr_state *s, const char *name) {
    uint32_t n = tsr_model_buffer_count(s->model);
    for (uint32_t b = 0; b < n; b++)
        if (chosen(s, NULL, 0, b) && strcmp(tsr_model_buffer_name(s->model, b), name) == 0) return true;
    return false;
}

/* The names in the archive's tsrc.parameters (the parameters the saving model trained), each
 * ended by '\n', into *names (malloc'd, NUL-terminated; NULL when the file has no such record:
 * numpy.savez's, an earlier tsrc's) and its length into *length; TSR_OK or the error. */
static int read_parameter_names(const Archive *a, char **names, size_t *length) {
    unsigned char *data = NULL;
    size_t len = 0;
    *names = NULL;
    *length = 0;
    int status = read_member(a, PARAMETERS_ARRAY, (uint64_t)MAX_DIRECTORY + (1u << 20), true, &data, &len);
    if (status != TSR_OK || !data) return status;
    int64_t dims[1];
    if (!tsr_npy_member_shape(data, len, 1, dims) || dims[0] < 0 || (uint64_t)dims[0] >= len)
        status = tsr_error(TSR_ERR_DATA, "checkpoint '%s': array '%s' does not hold the names of parameters", a->path,
                           PARAMETERS_ARRAY);
    else if (!(*names = malloc((size_t)dims[0] + 1)))
        status = tsr_error(TSR_ERR_NOMEM, "out of memory reading checkpoint '%s'", a->path);
    else status = tsr_load_npy_member(data, len, *names, TSR_DTYPE_U8, 1, dims, a->path, PARAMETERS_ARRAY);
    free(data);
    if (status != TSR_OK) {
        free(*names);
        *names = NULL;
        return status;
    }
    (*names)[dims[0]] = '\0';
    *length = (size_t)dims[0];
    return TSR_OK;
}

/* Each name of a tsrc.parameters record that the archive holds as an array and this model does
 * not have (a layer of a larger model), to `found` with its length; the count. */
static uint64_t saved_parameters_missing(const tsr_state *s, const Archive *a, char *names, size_t length,
                                         void (*found)(void *ctx, const char *name, size_t length), void *ctx) {
    uint64_t count = 0;
    for (size_t at = 0; at < length;) {
        size_t k = strcspn(names + at, "\n"); /* a name ends at a newline (or a stray NUL) */
        char after = names[at + k];
        names[at + k] = '\0';
        if (k > 0 && has_member(a, names + at) && !model_holds(s, names + at)) {
            found(ctx, names + at, k);
            count++;
        }
        names[at + k] = after;
        at += k + 1;
    }
    return count;
}

typedef struct FirstName {
    const char *name;
    size_t length;
} FirstName;

static void keep_first(void *ctx, const char *name, size_t length) {
    FirstName *first = ctx;
    if (!first->name) first->name = name, first->length = length;
}

/* A load of every parameter: TSR_OK, or an error when the file holds parameters the saving model
 * trained (its tsrc.parameters names them, and the member is there) that this model does not
 * have, which the load would leave out without a word (a checkpoint of more blocks loaded into a
 * model of fewer).  A file without the record (numpy.savez's, an earlier tsrc's) is not checked. */
static int check_saved_parameters(const tsr_state *s, const Archive *a) {
    char *names;
    size_t length;
    int status = read_parameter_names(a, &names, &length);
    if (status != TSR_OK || !names) return status;
    FirstName first = {0};
    uint64_t missing = saved_parameters_missing(s, a, names, length, keep_first, &first);
    if (missing) {
        char more[48] = "";
        if (missing > 1) snprintf(more, sizeof more, " (and %" PRIu64 " more)", missing - 1);
        status = tsr_error(TSR_ERR_DATA, "checkpoint '%s' holds parameter '%.*s'%s, which this model does not have: the "
                           "file was saved by another model (more layers or blocks?), and loading it would leave those "
                           "weights out (a load that lists the tensors, load \"FILE\" [w; b], takes them alone)", a->path,
                           (int)first.length, first.name, more);
    }
    free(names);
    return status;
}

/* Which of the model's buffers a load reads: the listed ones (each must be in the file), every
 * parameter and the training state (a state array may be missing: a checkpoint of parameters
 * only, from numpy.savez or an older tsrc, leaves that state where it is), or the trained
 * parameters the file has (--init-from: any may be missing, and stays as initialised). */
typedef enum { READ_LISTED, READ_WHOLE, READ_SHARED } ReadMode;

/* Read each buffer `mode` chooses into fresh[b] (allocated; NULL for a buffer not read), counting
 * them in *read; the state itself is not touched. */
static int read_buffers(tsr_state *s, const Archive *archive, const uint32_t *buffers, uint32_t count, ReadMode mode,
                        void **fresh, uint32_t *read) {
    uint32_t n = tsr_model_buffer_count(s->model);
    int status = TSR_OK;
    *read = 0;
    for (uint32_t b = 0; b < n && status == TSR_OK; b++) {
        if (mode == READ_SHARED ? !trained_parameter(s, b) : !chosen(s, mode == READ_LISTED ? buffers : NULL, count, b))
            continue;
        uint32_t rank;
        const int64_t *dims;
        int64_t cells;
        uint8_t kind;
        tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind);
        const char *name = tsr_model_buffer_name(s->model, b);
        unsigned char *data = NULL;
        size_t len = 0;
        bool optional = mode == READ_SHARED || (mode == READ_WHOLE && tsr_model_buffer_is_state(s->model, b));
        status = read_member(archive, name, member_limit(cells), optional, &data, &len);
        uint8_t dtype = tsr_model_buffer_dtype(s->model, b);
        if (status == TSR_OK && data && !(fresh[b] = tsr_alloc_cells(cells, tsr_dtype_cell_bytes(dtype))))
            status = TSR_ERR_NOMEM;
        if (status == TSR_OK && data) {
            status = tsr_load_npy_member(data, len, fresh[b], dtype, rank, dims, archive->path, name);
            (*read)++;
        }
        free(data);
    }
    for (uint32_t b = 0; b < n && status == TSR_OK; b++) /* a GPU state: the host copies are changed */
        if (fresh[b]) status = tsr_buffer_to_host(s, b, true);
    return status;
}

/* With `status` TSR_OK, copy each buffer read into the state (copied, so pointers a caller holds
 * stay valid); free them either way. */
static void commit_buffers(tsr_state *s, void **fresh, int status) {
    uint32_t n = tsr_model_buffer_count(s->model);
    for (uint32_t b = 0; fresh && b < n; b++) {
        if (fresh[b] && status == TSR_OK) {
            uint32_t rank;
            const int64_t *dims;
            int64_t cells;
            uint8_t kind;
            tsr_model_buffer_shape(s->model, b, &rank, &dims, &cells, &kind);
            memcpy(s->buffers[b], fresh[b], (size_t)cells * tsr_dtype_cell_bytes(tsr_model_buffer_dtype(s->model, b)));
        }
        tsr_free(fresh[b]);
    }
    free(fresh);
}

/* The checkpoint at `path` opened, its directory read and checked, and the table of buffers a
 * load fills (nothing changes unless every array is read); TSR_OK or the error. */
static int open_for_load(tsr_state *s, const char *path, Archive *archive, void ***fresh) {
    archive->fd = -1;
    int status = archive_open(archive, path);
    if (status == TSR_OK) status = read_directory(archive);
    if (status == TSR_OK) status = check_directory(archive);
    *fresh = calloc((size_t)tsr_model_buffer_count(s->model) + 1, sizeof **fresh);
    if (!*fresh && status == TSR_OK) status = tsr_error(TSR_ERR_NOMEM, "out of memory reading checkpoint '%s'", path);
    return status;
}

int tsr_checkpoint_load(tsr_state *s, const char *path, const uint32_t *buffers, uint32_t count) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    if (!path || !path[0]) return tsr_error(TSR_ERR_ARGUMENT, "load: no file name");
    int unsized = unsized_buffer(s, buffers, count, false, "read", path);
    if (unsized != TSR_OK) return unsized;
    Archive archive = {0};
    void **fresh;
    int status = open_for_load(s, path, &archive, &fresh);
    if (status == TSR_OK && count == 0) status = check_saved_parameters(s, &archive);
    uint32_t read;
    if (status == TSR_OK) status = read_buffers(s, &archive, buffers, count, count ? READ_LISTED : READ_WHOLE, fresh, &read);
    uint64_t runs = s->runs, seed = s->seed;
    uint64_t *shuffles = NULL;
    bool has_seed = false;
    if (count == 0 && status == TSR_OK) status = read_counters(s, &archive, &runs, &shuffles, &seed, &has_seed);
    /* The run counters move forward only (resuming a run: the checkpoint's counts are at least
     * this state's), and the saved run's seed comes with them (the random key is the seed and the
     * count) unless the command line chose one.  The data sets' rows are put in the order the
     * saved run had reached by replaying its shuffles, which depend on the seed and the counts. */
    bool resumes = runs > s->runs;
    tsr_action *a;
    for (uint32_t k = 0, j = 0; shuffles && (a = next_shuffle(s, &k)); j++) resumes |= shuffles[j] > a->runs;
    /* A group's count is kept by its first statement (the others' are 0; a checkpoint of a tsrc
     * that counted each statement apart: their sum). */
    for (uint32_t k = 0, j = 0; status == TSR_OK && shuffles && (a = next_shuffle(s, &k)); j++) {
        if (a->counter == k - 1) continue;
        uint32_t owner = 0; /* the ordinal of the group's first statement among the shuffles */
        for (uint32_t m = 0; next_shuffle(s, &m) && m - 1 != a->counter;) owner++;
        shuffles[owner] += shuffles[j];
        shuffles[j] = 0;
    }
    /* Each shuffle is replayed, so a count no run could have reached (a damaged tsrc.shuffles:
     * its pairs go up to 2^48) would never finish loading.  A training loop shuffles at most
     * once per routine run; up to 2^20 more are allowed for loops that shuffle without running. */
    for (uint32_t j = 0, groups = shuffles ? shuffle_count(s) : 0; status == TSR_OK && j < groups; j++)
        if (shuffles[j] > runs + ((uint64_t)1 << 20))
            status = tsr_error(TSR_ERR_DATA, "checkpoint '%s' counts %" PRIu64 " shuffles of a data set in a run of %" PRIu64
                               " routine runs: a damaged file (more than 2^20 shuffles beyond the runs are refused)",
                               path, shuffles[j], runs);
    /* Only now, every check passed (a failed load leaves the state as it was): */
    if (status == TSR_OK && resumes && has_seed && !tsr_model_seed_given(s->model)) s->seed = seed;
    if (status == TSR_OK && runs > s->runs) s->runs = runs;
    for (uint32_t k = 0, j = 0; status == TSR_OK && shuffles && (a = next_shuffle(s, &k)); j++)
        while (status == TSR_OK && a->counter == k - 1 && a->runs < shuffles[j]) status = tsr_shuffle(s, a);
    free(shuffles);
    commit_buffers(s, fresh, status);
    archive_close(&archive);
    return status;
}

int tsr_state_load(tsr_state *s, const char *path) {
    int status = tsr_checkpoint_load(s, path, NULL, 0);
    if (status == TSR_OK) tsr_model_mark_loaded(s->model); /* the agreement check names the seed so */
    return status;
}

/* ---- Initialising from another model's checkpoint (--init-from) --------------------------------- */

/* Text that lists names, up to three quoted and then "and N more". */
typedef struct NameList {
    char text[400];
    size_t length;
    uint32_t count;
} NameList;

static void name_list_add(NameList *l, const char *name, size_t length) {
    if (l->count < 3 && l->length < sizeof l->text) {
        int n = snprintf(l->text + l->length, sizeof l->text - l->length, "%s'%.*s%s'", l->count ? ", " : "",
                         (int)(length < 80 ? length : 77), name, length < 80 ? "" : "...");
        if (n > 0) l->length += (size_t)n;
    }
    l->count++;
}

static const char *name_list_text(NameList *l) {
    if (l->count > 3 && l->length < sizeof l->text)
        snprintf(l->text + l->length, sizeof l->text - l->length, " and %" PRIu32 " more", l->count - 3);
    return l->text;
}

static void add_name(void *list, const char *name, size_t length) { name_list_add(list, name, length); }

/* What the archive holds beyond this model: the parameters its tsrc.parameters record names that
 * this model lacks (the layers of a larger model), or, in a file without the record (numpy.savez's),
 * its arrays that are no parameter or training state of this model (tsrc.* left out); *recorded
 * says which.  Training state of the saving model (an optimiser's moments) is not counted. */
static int unused_arrays(const tsr_state *s, const Archive *a, NameList *unused, bool *recorded) {
    char *names;
    size_t length;
    int status = read_parameter_names(a, &names, &length);
    *recorded = names != NULL;
    if (status != TSR_OK || names) {
        if (names) saved_parameters_missing(s, a, names, length, add_name, unused);
        free(names);
        return status;
    }
    const unsigned char *d = a->directory;
    size_t at = 0;
    char name[256];
    for (uint32_t i = 0; i < a->entries; i++) { /* the directory was checked whole (check_directory) */
        size_t name_len = get16(d + at + 28), extra = get16(d + at + 30), comment = get16(d + at + 32);
        const char *member = (const char *)d + at + ZIP_CENTRAL_SIZE;
        at += ZIP_CENTRAL_SIZE + name_len + extra + comment;
        if (name_len < 4 || memcmp(member + name_len - 4, ".npy", 4) != 0) continue;
        size_t k = name_len - 4;
        if (k >= 5 && memcmp(member, "tsrc.", 5) == 0) continue;
        if (k < sizeof name) {
            memcpy(name, member, k);
            name[k] = '\0';
            if (model_holds(s, name)) continue;
        }
        name_list_add(unused, member, k);
    }
    return TSR_OK;
}

int tsr_checkpoint_init_from(tsr_state *s, const char *path, uint32_t *read, char **note) {
    if (note) *note = NULL;
    if (read) *read = 0;
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    if (!path || !path[0]) return tsr_error(TSR_ERR_ARGUMENT, "init-from: no file name");
    int status = unsized_buffer(s, NULL, 0, true, "read", path);
    if (status != TSR_OK) return status;
    uint32_t n = tsr_model_buffer_count(s->model), parameters = 0;
    for (uint32_t b = 0; b < n; b++) parameters += trained_parameter(s, b);
    Archive archive = {0};
    void **fresh;
    uint32_t got = 0;
    status = open_for_load(s, path, &archive, &fresh);
    if (status == TSR_OK) status = read_buffers(s, &archive, NULL, 0, READ_SHARED, fresh, &got);
    NameList kept = {0}, unused = {0};
    bool recorded = false;
    if (status == TSR_OK) status = unused_arrays(s, &archive, &unused, &recorded);
    if (status == TSR_OK) {
        for (uint32_t b = 0; b < n; b++)
            if (trained_parameter(s, b) && !fresh[b])
                name_list_add(&kept, tsr_model_buffer_name(s->model, b), strlen(tsr_model_buffer_name(s->model, b)));
    }
    if (status == TSR_OK && got == 0)
        status = parameters == 0
                     ? tsr_error(TSR_ERR_DATA, "cannot initialise from checkpoint '%s': this model trains no parameters",
                                 path)
                     : tsr_error(TSR_ERR_DATA, "checkpoint '%s' holds none of the %" PRIu32 " parameters of this model "
                                 "(%s); %s%s", path, parameters, name_list_text(&kept),
                                 !unused.count ? "it holds no parameters" : recorded ? "its parameters are "
                                                                                      : "its arrays are ",
                                 unused.count ? name_list_text(&unused) : "");
    if (status == TSR_OK && note && (kept.count || unused.count)) {
        char text[1024];
        int length = snprintf(text, sizeof text, "read %" PRIu32 " of %" PRIu32 " parameters from '%s'", got, parameters,
                              path);
        if (kept.count && length > 0 && (size_t)length < sizeof text)
            length += snprintf(text + length, sizeof text - (size_t)length, "; %" PRIu32 " kept as initialised (%s)",
                               kept.count, name_list_text(&kept));
        if (unused.count && length > 0 && (size_t)length < sizeof text)
            snprintf(text + length, sizeof text - (size_t)length, "; %" PRIu32 " %s of the file %s not in this "
                     "model (%s)", unused.count, recorded ? (unused.count == 1 ? "parameter" : "parameters")
                                                         : (unused.count == 1 ? "array" : "arrays"),
                     unused.count == 1 ? "is" : "are", name_list_text(&unused));
        if (!(*note = strdup(text))) status = tsr_error(TSR_ERR_NOMEM, "out of memory reading checkpoint '%s'", path);
    }
    commit_buffers(s, fresh, status);
    archive_close(&archive);
    if (status == TSR_OK && read) *read = got;
    return status;
}

int tsr_state_init_from(tsr_state *s, const char *path, uint32_t *read) {
    return tsr_checkpoint_init_from(s, path, read, NULL);
}

/* ---- Several processes: a checkpoint written once ------------------------------------------------ */

int tsr_checkpoint_save_once(tsr_state *s, const char *path, const uint32_t *buffers, uint32_t count) {
    if (!tsr_dist_active()) return tsr_checkpoint_save(s, path, buffers, count);
    /* The replicas hold the same parameters: process 0 writes them, then tells the others how it
     * went, so that a later LOAD on any process finds the file complete. */
    int64_t written = tsr_dist_rank() == 0 ? tsr_checkpoint_save(s, path, buffers, count) : TSR_OK;
    int status = tsr_dist_broadcast(&written);
    if (status != TSR_OK) return status;
    if (written == TSR_OK) return TSR_OK;
    tsr_dist_set_collective_failure();
    if (tsr_dist_rank() == 0) return (int)written; /* its own message */
    return tsr_error((int)written, "process 0 could not write checkpoint '%s' (it says why)", path);
}
