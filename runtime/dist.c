/* dist.c — the processes of a data-parallel run: which one this is, how many there are, and the
 * few collective operations training needs (docs/runtime.md §19 "Training on several processes").
 *
 * One communicator per process.  tsr_dist_start() chooses the engine: "none" is one process;
 * "mpi" opens an MPI library; "auto" opens one only when a launcher started this process as one of
 * several (Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE, MPICH-style launchers and Slurm PMI_SIZE or
 * PMIX_SIZE), and is one process otherwise, without touching MPI at all; "nccl" loads NCCL
 * (nccl.c: GPU states then average on their GPUs) and takes the processes from MPI as "auto" does
 * (a process started alone is rank 0 of 1 without MPI); MPI then also carries NCCL's unique id.  The library is loaded at
 * run time, as cuda.c loads the CUDA driver: dlopen of TSR_MPI_LIBRARY (a path or a soname) if set,
 * else libmpi.so.40 (Open MPI), else libmpi.so; the entry points are resolved with dlsym and
 * declared here with Open MPI's ABI, in which a communicator, a datatype, an operation and an
 * error handler are addresses of the library's global objects (MPI_COMM_WORLD is
 * &ompi_mpi_comm_world, …).  Nothing links against MPI, so libtsr.a builds and runs everywhere.
 * MPICH's ABI (integer handles) is not supported in this version: a library without
 * ompi_mpi_comm_world is refused with a message saying so.  The library is opened RTLD_GLOBAL:
 * Open MPI loads its own components with dlopen, and they resolve symbols of libmpi's libraries.
 *
 * Errors of MPI calls return (MPI_ERRORS_RETURN on the world communicator) and become
 * TSR_ERR_DIST with MPI's text.  The operations:
 *   mean          in place, over the processes: an allreduce of the sum, then a division by N;
 *                 of float or double cells, computed in their type;
 *   ordered mean  the same numbers, but every process gathers every process's cells and adds
 *                 them in rank order 0, 1, …, N-1, so every process gets the same bits whatever
 *                 algorithm the library's allreduce uses (memory: N times a piece of the array);
 *   machine       at the start, this process's rank among the processes of its machine (the
 *                 processes that share memory, MPI_Comm_split_type) and their count;
 *   agreement     every process learns whether all hold the same int64 values, and where not, the
 *                 first value that differs with two processes' values, for a message;
 *   broadcast     an int64 from rank 0 (a checkpoint's status);
 *   abort, finalize.
 * A run of one process does all of them without MPI: the mean is the identity, values agree.
 *
 * Requires: glibc's dlopen; Open MPI 3 or later (its ABI) for runs of several processes. */
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Open MPI's handles are pointers to the library's objects; MPI_IN_PLACE is (void *)1. */
typedef void *MpiHandle;
#define MPI_IN_PLACE_OMPI ((void *)1)
enum { MPI_SUCCESS_CODE = 0, MPI_ERROR_TEXT_BYTES = 256 };
enum { MPI_COMM_TYPE_SHARED_OMPI = 0 }; /* Open MPI's MPI_COMM_TYPE_SHARED: the processes of one machine */

static struct {
    int (*Initialized)(int *flag);
    int (*Finalized)(int *flag);
    int (*Init)(int *argc, char ***argv);
    int (*Comm_rank)(MpiHandle comm, int *rank);
    int (*Comm_size)(MpiHandle comm, int *size);
    int (*Comm_set_errhandler)(MpiHandle comm, MpiHandle handler);
    int (*Comm_split_type)(MpiHandle comm, int split_type, int key, MpiHandle info, MpiHandle *part);
    int (*Comm_free)(MpiHandle *comm);
    int (*Allreduce)(const void *send, void *receive, int count, MpiHandle type, MpiHandle op, MpiHandle comm);
    int (*Iallreduce)(const void *send, void *receive, int count, MpiHandle type, MpiHandle op, MpiHandle comm,
                      MpiHandle *request);
    int (*Waitall)(int count, MpiHandle *requests, void *statuses);
    int (*Testall)(int count, MpiHandle *requests, int *done, void *statuses);
    int (*Allgather)(const void *send, int send_count, MpiHandle send_type, void *receive, int receive_count,
                     MpiHandle receive_type, MpiHandle comm);
    int (*Bcast)(void *cells, int count, MpiHandle type, int root, MpiHandle comm);
    int (*Abort)(MpiHandle comm, int code);
    int (*Finalize)(void);
    int (*Error_string)(int code, char *text, int *length);
    MpiHandle world, float_type, double_type, int64_type, sum, errors_return, info_null;
} mpi;

static const struct {
    const char *name;
    void **slot;
} mpi_entries[] = {
    {"MPI_Initialized", (void **)&mpi.Initialized},
    {"MPI_Finalized", (void **)&mpi.Finalized},
    {"MPI_Init", (void **)&mpi.Init},
    {"MPI_Comm_rank", (void **)&mpi.Comm_rank},
    {"MPI_Comm_size", (void **)&mpi.Comm_size},
    {"MPI_Comm_set_errhandler", (void **)&mpi.Comm_set_errhandler},
    {"MPI_Comm_split_type", (void **)&mpi.Comm_split_type},
    {"MPI_Comm_free", (void **)&mpi.Comm_free},
    {"MPI_Allreduce", (void **)&mpi.Allreduce},
    {"MPI_Iallreduce", (void **)&mpi.Iallreduce},
    {"MPI_Waitall", (void **)&mpi.Waitall},
    {"MPI_Testall", (void **)&mpi.Testall},
    {"MPI_Allgather", (void **)&mpi.Allgather},
    {"MPI_Bcast", (void **)&mpi.Bcast},
    {"MPI_Abort", (void **)&mpi.Abort},
    {"MPI_Finalize", (void **)&mpi.Finalize},
    {"MPI_Error_string", (void **)&mpi.Error_string},
    {"ompi_mpi_float", &mpi.float_type},
    {"ompi_mpi_double", &mpi.double_type},
    {"ompi_mpi_int64_t", &mpi.int64_type},
    {"ompi_mpi_op_sum", &mpi.sum},
    {"ompi_mpi_errors_return", &mpi.errors_return},
    {"ompi_mpi_info_null", &mpi.info_null},
};

/* The communicator of this process. */
static struct {
    bool started, uses_mpi, uses_nccl, finalized, collective_failure;
    int rank, size;
    int local_rank, local_size; /* among the processes on this machine (that share memory) */
    void *library;
    const char *library_name;
} comm = {.rank = 0, .size = 1, .local_rank = 0, .local_size = 1};

/* Collective calls move at most this many cells at once (MPI counts are int). */
enum { PIECE_CELLS = 1 << 22 };

/* Record TSR_ERR_DIST: the printf-like context, then MPI's text of `code`. */
static int mpi_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int mpi_error(int code, const char *fmt, ...) {
    char context[512], text[MPI_ERROR_TEXT_BYTES + 1] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    int length = 0;
    if (!mpi.Error_string || mpi.Error_string(code, text, &length) != MPI_SUCCESS_CODE) snprintf(text, sizeof text, "MPI error %d", code);
    return tsr_error(TSR_ERR_DIST, "%s (process %d of %d): %s", context, comm.rank, comm.size, text);
}

bool tsr_dist_launched_together(void) {
    static const char *const variables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof variables / sizeof *variables; i++) {
        const char *v = getenv(variables[i]);
        if (v && atol(v) > 1) return true;
    }
    return false;
}

int tsr_dist_launcher_rank(void) {
    static const char *const variables[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof variables / sizeof *variables; i++) {
        const char *v = getenv(variables[i]);
        if (v && *v) return (int)atol(v);
    }
    return 0;
}

/* dlopen the MPI library and resolve its entry points; TSR_OK or TSR_ERR_DIST. */
static int open_library(void) {
    const char *chosen = getenv("TSR_MPI_LIBRARY");
    const char *const defaults[] = {"libmpi.so.40", "libmpi.so"};
    const char *tried = chosen && chosen[0] ? chosen : "libmpi.so.40 or libmpi.so";
    char why[512] = "not found";
    void *lib = NULL;
    if (chosen && chosen[0]) {
        lib = dlopen(chosen, RTLD_NOW | RTLD_GLOBAL);
        comm.library_name = chosen;
    } else {
        for (size_t i = 0; i < 2 && !lib; i++) {
            lib = dlopen(defaults[i], RTLD_NOW | RTLD_GLOBAL);
            comm.library_name = defaults[i];
            const char *e = lib ? NULL : dlerror();
            if (e && i == 0) snprintf(why, sizeof why, "%s", e); /* the first one's reason says most */
        }
    }
    if (!lib) {
        const char *e = chosen && chosen[0] ? dlerror() : NULL;
        if (e) snprintf(why, sizeof why, "%s", e);
        return tsr_error(TSR_ERR_DIST, "a distributed run needs an MPI library (Open MPI: libmpi.so.40, in Debian's "
                         "libopenmpi3 and openmpi-bin), and %s cannot be loaded (%s); set TSR_MPI_LIBRARY to its path, "
                         "or run one process with --distributed=none", tried, why);
    }
    if (!dlsym(lib, "ompi_mpi_comm_world")) {
        dlclose(lib);
        return tsr_error(TSR_ERR_DIST, "the MPI library %s is not Open MPI (it has no ompi_mpi_comm_world; MPICH and its "
                         "derivatives?): this version supports only Open MPI's ABI; set TSR_MPI_LIBRARY to Open MPI's "
                         "libmpi.so.40", comm.library_name);
    }
    mpi.world = dlsym(lib, "ompi_mpi_comm_world");
    for (size_t i = 0; i < sizeof mpi_entries / sizeof *mpi_entries; i++) {
        void *f = dlsym(lib, mpi_entries[i].name);
        if (!f) {
            const char *missing = mpi_entries[i].name;
            memset(&mpi, 0, sizeof mpi);
            dlclose(lib);
            return tsr_error(TSR_ERR_DIST, "the MPI library %s lacks %s: it is not an Open MPI this version can use",
                             comm.library_name, missing);
        }
        *mpi_entries[i].slot = f;
    }
    comm.library = lib; /* loaded for the rest of the process */
    return TSR_OK;
}

/* MPI_Finalize at exit when nothing else did (the reference executor returns from main). */
static void finalize_at_exit(void) { tsr_dist_finalize(); }

int tsr_dist_start(const char *engine) {
    if (!engine || !engine[0]) engine = "auto";
    bool use_mpi, use_nccl = !strcmp(engine, "nccl");
    if (!strcmp(engine, "none")) use_mpi = false;
    else if (!strcmp(engine, "mpi")) use_mpi = true;
    else if (!strcmp(engine, "auto") || use_nccl) use_mpi = tsr_dist_launched_together();
    else return tsr_error(TSR_ERR_ARGUMENT, "unknown distributed engine '%s' (auto, mpi, nccl or none)", engine);
    if (comm.started) {
        if (use_nccl == comm.uses_nccl && (use_mpi == comm.uses_mpi || (!use_mpi && comm.size == 1))) return TSR_OK;
        return tsr_error(TSR_ERR_ARGUMENT, "the processes were already started with another engine than '%s'", engine);
    }
    int status = use_nccl ? tsr_nccl_load() : TSR_OK; /* a missing library is said before MPI starts */
    if (status != TSR_OK) return status;
    comm.uses_nccl = use_nccl;
    if (!use_mpi) {
        comm.started = true;
        return TSR_OK;
    }
    status = open_library();
    if (status != TSR_OK) return status;
    int initialized = 0, code = mpi.Initialized(&initialized);
    if (code == MPI_SUCCESS_CODE && !initialized) code = mpi.Init(NULL, NULL);
    if (code != MPI_SUCCESS_CODE) return mpi_error(code, "MPI_Init failed");
    code = mpi.Comm_set_errhandler(mpi.world, mpi.errors_return);
    if (code == MPI_SUCCESS_CODE) code = mpi.Comm_rank(mpi.world, &comm.rank);
    if (code == MPI_SUCCESS_CODE) code = mpi.Comm_size(mpi.world, &comm.size);
    if (code != MPI_SUCCESS_CODE) return mpi_error(code, "cannot learn the processes of the run");
    /* This machine's processes, ordered by rank: which GPU a process takes (cuda.c). */
    MpiHandle machine = NULL;
    code = mpi.Comm_split_type(mpi.world, MPI_COMM_TYPE_SHARED_OMPI, comm.rank, mpi.info_null, &machine);
    if (code == MPI_SUCCESS_CODE) code = mpi.Comm_rank(machine, &comm.local_rank);
    if (code == MPI_SUCCESS_CODE) code = mpi.Comm_size(machine, &comm.local_size);
    if (machine && code == MPI_SUCCESS_CODE) code = mpi.Comm_free(&machine);
    if (code != MPI_SUCCESS_CODE) return mpi_error(code, "cannot learn the processes on this machine (MPI_Comm_split_type)");
    comm.started = comm.uses_mpi = true;
    if (!initialized) atexit(finalize_at_exit); /* ours to finalize */
    return TSR_OK;
}

int tsr_dist_rank(void) { return comm.rank; }
int tsr_dist_size(void) { return comm.size; }
int tsr_dist_local_rank(void) { return comm.local_rank; }
int tsr_dist_local_size(void) { return comm.local_size; }
bool tsr_dist_active(void) { return comm.uses_mpi && !comm.finalized && comm.size > 1; }
bool tsr_dist_uses_nccl(void) { return comm.uses_nccl; }

/* The MPI datatype of cells of `dtype` (TSR_DTYPE_F32 or TSR_DTYPE_F64). */
static MpiHandle mpi_type_of(uint8_t dtype) { return dtype == TSR_DTYPE_F64 ? mpi.double_type : mpi.float_type; }

/* Every cell divided by the number of processes, in the cells' type. */
static void divide_by_processes(void *cells, int64_t count, uint8_t dtype) {
    if (dtype == TSR_DTYPE_F64) {
        double *c = cells, processes = (double)comm.size;
        for (int64_t i = 0; i < count; i++) c[i] /= processes;
    } else {
        float *c = cells, processes = (float)comm.size;
        for (int64_t i = 0; i < count; i++) c[i] /= processes;
    }
}

/* cells[at …] = the mean of n cells of each process, gathered side by side (process r's n
 * cells from gathered + r·n), added in rank order in the cells' type. */
#define ADD_IN_RANK_ORDER(type)                                                                     \
    do {                                                                                            \
        const type *g = gathered;                                                                   \
        type *c = (type *)cells + at, processes = (type)comm.size;                                  \
        for (size_t i = 0; i < (size_t)n; i++) {                                                    \
            type sum = g[i];                                                                        \
            for (int r = 1; r < comm.size; r++) sum += g[(size_t)r * (size_t)n + i];                \
            c[i] = sum / processes;                                                                 \
        }                                                                                           \
    } while (0)
static void add_in_rank_order(void *cells, int64_t at, const void *gathered, int n, uint8_t dtype) {
    if (dtype == TSR_DTYPE_F64) ADD_IN_RANK_ORDER(double);
    else ADD_IN_RANK_ORDER(float);
}
#undef ADD_IN_RANK_ORDER

static int fast_mean(void *cells, int64_t count, uint8_t dtype) {
    for (int64_t at = 0; at < count; at += PIECE_CELLS) {
        int n = (int)(count - at < PIECE_CELLS ? count - at : PIECE_CELLS);
        int code = mpi.Allreduce(MPI_IN_PLACE_OMPI, (char *)cells + (size_t)at * tsr_dtype_cell_bytes(dtype), n, mpi_type_of(dtype),
                                 mpi.sum, mpi.world);
        if (code != MPI_SUCCESS_CODE) return mpi_error(code, "the sum over the processes (MPI_Allreduce) failed");
    }
    divide_by_processes(cells, count, dtype);
    return TSR_OK;
}

static int ordered_mean(void *cells, int64_t count, uint8_t dtype) {
    int64_t piece = count < PIECE_CELLS / comm.size ? count : PIECE_CELLS / comm.size;
    if (piece < 1) piece = 1;
    size_t bytes = tsr_dtype_cell_bytes(dtype);
    void *gathered = malloc((size_t)piece * (size_t)comm.size * bytes);
    if (!gathered) return tsr_error(TSR_ERR_NOMEM, "out of memory gathering %" PRId64 " cells of %d processes", piece, comm.size);
    for (int64_t at = 0; at < count; at += piece) {
        int n = (int)(count - at < piece ? count - at : piece);
        int code = mpi.Allgather((char *)cells + (size_t)at * bytes, n, mpi_type_of(dtype), gathered, n, mpi_type_of(dtype),
                                 mpi.world);
        if (code != MPI_SUCCESS_CODE) {
            free(gathered);
            return mpi_error(code, "gathering the processes' cells (MPI_Allgather) failed");
        }
        add_in_rank_order(cells, at, gathered, n, dtype);
    }
    free(gathered);
    return TSR_OK;
}

int tsr_dist_mean_cells(void *cells, int64_t count, uint8_t dtype, bool ordered) {
    if (count < 0 || (count > 0 && !cells) || (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F64))
        return tsr_error(TSR_ERR_ARGUMENT, "%s: bad array", ordered ? "tsr_dist_mean_ordered" : "tsr_dist_mean");
    if (!tsr_dist_active()) return TSR_OK;
    return ordered ? ordered_mean(cells, count, dtype) : fast_mean(cells, count, dtype);
}

int tsr_dist_mean(float *cells, int64_t count) { return tsr_dist_mean_cells(cells, count, TSR_DTYPE_F32, false); }
int tsr_dist_mean_ordered(float *cells, int64_t count) { return tsr_dist_mean_cells(cells, count, TSR_DTYPE_F32, true); }
int tsr_dist_mean_f64(double *cells, int64_t count) { return tsr_dist_mean_cells(cells, count, TSR_DTYPE_F64, false); }
int tsr_dist_mean_ordered_f64(double *cells, int64_t count) { return tsr_dist_mean_cells(cells, count, TSR_DTYPE_F64, true); }

/* A mean begun (tsr_dist_mean_begin): MPI's requests, one per piece of PIECE_CELLS cells. */
int tsr_dist_mean_begin(void *cells, int64_t count, uint8_t dtype, tsr_dist_pending *pending) {
    if (count < 0 || (count > 0 && !cells) || !pending || (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F64))
        return tsr_error(TSR_ERR_ARGUMENT, "tsr_dist_mean_begin: bad array");
    free(pending->requests);
    *pending = (tsr_dist_pending){.cells = cells, .count = count, .dtype = dtype};
    if (!tsr_dist_active()) return TSR_OK;
    int pieces = (int)((count + PIECE_CELLS - 1) / PIECE_CELLS);
    if (!(pending->requests = calloc((size_t)(pieces ? pieces : 1), sizeof(MpiHandle))))
        return tsr_error(TSR_ERR_NOMEM, "out of memory beginning a mean of %" PRId64 " cells", count);
    for (int64_t at = 0; at < count; at += PIECE_CELLS) {
        int n = (int)(count - at < PIECE_CELLS ? count - at : PIECE_CELLS);
        int code = mpi.Iallreduce(MPI_IN_PLACE_OMPI, (char *)cells + (size_t)at * tsr_dtype_cell_bytes(dtype), n, mpi_type_of(dtype),
                                  mpi.sum, mpi.world, (MpiHandle *)pending->requests + pending->request_count);
        if (code != MPI_SUCCESS_CODE) return mpi_error(code, "beginning the sum over the processes (MPI_Iallreduce) failed");
        pending->request_count++;
    }
    return TSR_OK;
}

int tsr_dist_mean_progress(tsr_dist_pending *pending) {
    if (!tsr_dist_active() || !pending || !pending->request_count) return TSR_OK;
    int done = 0, code = mpi.Testall(pending->request_count, (MpiHandle *)pending->requests, &done, NULL);
    return code == MPI_SUCCESS_CODE ? TSR_OK : mpi_error(code, "the sum over the processes (MPI_Testall) failed");
}

int tsr_dist_mean_end(tsr_dist_pending *pending) {
    if (!pending) return tsr_error(TSR_ERR_ARGUMENT, "tsr_dist_mean_end: no mean");
    int status = TSR_OK;
    if (tsr_dist_active() && pending->request_count) {
        int code = mpi.Waitall(pending->request_count, (MpiHandle *)pending->requests, NULL);
        if (code != MPI_SUCCESS_CODE) status = mpi_error(code, "the sum over the processes (MPI_Waitall) failed");
        else divide_by_processes(pending->cells, pending->count, pending->dtype);
    }
    free(pending->requests);
    *pending = (tsr_dist_pending){0};
    return status;
}

int tsr_dist_compare(const int64_t *values, uint32_t count, tsr_dist_difference *difference) {
    tsr_dist_difference none = {.index = -1, .other_rank = 0};
    if (!difference || (count > 0 && !values)) return tsr_error(TSR_ERR_ARGUMENT, "tsr_dist_compare: bad arguments");
    *difference = none;
    if (!tsr_dist_active()) return TSR_OK;
    /* The counts first: processes of different programs may hold different numbers of values. */
    int64_t *counts = malloc((size_t)comm.size * sizeof *counts), mine = count;
    if (!counts) return tsr_error(TSR_ERR_NOMEM, "out of memory comparing values of %d processes", comm.size);
    int code = mpi.Allgather(&mine, 1, mpi.int64_type, counts, 1, mpi.int64_type, mpi.world);
    if (code != MPI_SUCCESS_CODE) {
        free(counts);
        return mpi_error(code, "comparing the processes' values (MPI_Allgather) failed");
    }
    for (int r = 1; r < comm.size; r++)
        if (counts[r] != counts[0]) {
            difference->index = -2; /* the counts differ: not even the same program */
            difference->other_rank = r;
            difference->value0 = counts[0];
            difference->value_other = counts[r];
            free(counts);
            return TSR_OK;
        }
    free(counts);
    if (count == 0) return TSR_OK;
    int64_t *all = malloc((size_t)comm.size * count * sizeof *all);
    if (!all) return tsr_error(TSR_ERR_NOMEM, "out of memory comparing values of %d processes", comm.size);
    code = mpi.Allgather(values, (int)count, mpi.int64_type, all, (int)count, mpi.int64_type, mpi.world);
    if (code != MPI_SUCCESS_CODE) {
        free(all);
        return mpi_error(code, "comparing the processes' values (MPI_Allgather) failed");
    }
    for (uint32_t i = 0; i < count && difference->index < 0; i++)
        for (int r = 1; r < comm.size; r++)
            if (all[(size_t)r * count + i] != all[i]) {
                difference->index = i;
                difference->other_rank = r;
                difference->value0 = all[i];
                difference->value_other = all[(size_t)r * count + i];
                break;
            }
    free(all);
    return TSR_OK;
}

int tsr_dist_agree(const int64_t *values, int64_t count, int *agree) {
    if (!agree || count < 0 || count > UINT32_MAX) return tsr_error(TSR_ERR_ARGUMENT, "tsr_dist_agree: bad arguments");
    tsr_dist_difference d;
    int status = tsr_dist_compare(values, (uint32_t)count, &d);
    *agree = status == TSR_OK && d.index == -1;
    return status;
}

int tsr_dist_vote(int64_t begins, bool *same, int *other, int64_t *begins0, int64_t *begins_other) {
    int64_t mine = begins;
    tsr_dist_difference d;
    int status = tsr_dist_compare(&mine, 1, &d);
    *same = status != TSR_OK || d.index == -1;
    *other = d.other_rank;
    /* -2: a count of values other than one, an older tsrc's process comparing its options
     * first: the programs differ, said as a process that does not run with these */
    *begins0 = d.index == -2 ? TSR_BEGIN_RUN : d.value0;
    *begins_other = d.index == -2 ? TSR_BEGIN_BAD : d.value_other;
    return status;
}

void tsr_dist_leave(void) {
    tsr_dist_finalize();
    comm.uses_mpi = comm.finalized = false;
    comm.rank = comm.local_rank = 0;
    comm.size = comm.local_size = 1;
}

int tsr_dist_broadcast(int64_t *value) {
    if (!value) return tsr_error(TSR_ERR_ARGUMENT, "tsr_dist_broadcast: the value pointer is NULL");
    if (!tsr_dist_active()) return TSR_OK;
    int code = mpi.Bcast(value, 1, mpi.int64_type, 0, mpi.world);
    return code == MPI_SUCCESS_CODE ? TSR_OK : mpi_error(code, "the broadcast from process 0 (MPI_Bcast) failed");
}

int tsr_dist_broadcast_bytes(void *bytes, int count) {
    if (!bytes || count < 0 || count % 8) return tsr_error(TSR_ERR_ARGUMENT, "tsr_dist_broadcast_bytes: bad arguments");
    if (!tsr_dist_active()) return TSR_OK;
    int code = mpi.Bcast(bytes, count / 8, mpi.int64_type, 0, mpi.world);
    return code == MPI_SUCCESS_CODE ? TSR_OK : mpi_error(code, "the broadcast from process 0 (MPI_Bcast) failed");
}

int tsr_dist_nccl_open(const void *owner, int device) {
    bool needed;
    int status = tsr_nccl_needs_open(owner, &needed);
    if (status != TSR_OK || !needed) return status;
    unsigned char id[TSR_NCCL_UNIQUE_ID_BYTES] = {0};
    if (comm.rank == 0) status = tsr_nccl_unique_id(id);
    if (status == TSR_OK) status = tsr_dist_broadcast_bytes(id, sizeof id); /* one process: nothing to send */
    return status == TSR_OK ? tsr_nccl_open(owner, device, comm.rank, comm.size, id) : status;
}

void tsr_dist_set_collective_failure(void) { comm.collective_failure = true; }
bool tsr_dist_collective_failure(void) { return comm.collective_failure; }

void tsr_dist_abort(int status) {
    fflush(stdout);
    fflush(stderr);
    if (tsr_dist_active()) mpi.Abort(mpi.world, status);
    exit(status); /* MPI_Abort does not return; one process just ends */
}

int tsr_dist_finalize(void) {
    if (!comm.uses_mpi || comm.finalized) return TSR_OK;
    comm.finalized = true;
    int finalized = 0;
    if (mpi.Finalized(&finalized) != MPI_SUCCESS_CODE || finalized) return TSR_OK;
    fflush(stdout);
    fflush(stderr);
    int code = mpi.Finalize();
    return code == MPI_SUCCESS_CODE ? TSR_OK : mpi_error(code, "MPI_Finalize failed");
}
