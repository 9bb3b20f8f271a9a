/* nccl.c — the NCCL engine of a data-parallel run (--distributed=nccl; docs/runtime.md §19): the
 * processes' GPU states average their gradients device to device, on the GPU's stream, with no
 * copy through the host.
 *
 * NCCL is loaded at run time, as cuda.c loads the CUDA driver and dist.c MPI: dlopen of the file
 * TSR_NCCL_LIBRARY names (a path or a soname), else libnccl.so.2, when the engine is chosen
 * (tsr_dist_start("nccl")), so a missing library is a message before any work.  The entry points
 * are resolved with dlsym and declared here with NCCL's public C ABI (nccl.h is not needed to
 * build): a communicator is a pointer, a unique id 128 bytes passed by value, data types, the
 * operation and results are ints.  ncclAvg needs NCCL 2.10 or later; an older one is refused.
 *
 * The communicator is made when the first GPU state needs it (cuda.c calls dist.c's
 * tsr_dist_nccl_open with that state's context current, so NCCL takes its device): process 0
 * draws the unique id (tsr_nccl_unique_id), MPI broadcasts its 128 bytes, and every process
 * calls tsr_nccl_open with it; a process started alone is rank 0 of 1 and needs no MPI.  This
 * file calls nothing of dist.c: the ranks come as arguments.  It belongs to that state and is destroyed when the state closes; a
 * later state makes a new one.  Means are ncclAllReduce calls with ncclAvg in place, in the
 * buffer's own element type, grouped (ncclGroupStart/End) per REDUCE, enqueued on the stream the
 * kernels run on (the legacy default stream): nothing waits for them but the next copy to the
 * host, in stream order.
 *
 * Faults: every wait on the GPU of a state in an NCCL run polls (cuda.c) and calls
 * tsr_nccl_watch, which asks ncclCommGetAsyncError; an error of NCCL, or a wait longer than
 * TSR_NCCL_TIMEOUT seconds (default 60), aborts the communicator (ncclCommAbort) and is a
 * TSR_ERR_DIST message, so a process whose peer died stops instead of hanging.
 *
 * Requires: glibc's dlopen; NCCL 2.10 or later (libnccl.so.2) and a --target=cuda state. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- NCCL's ABI (nccl.h, declared here) ----------------------------------------------------------- */

typedef struct NcclComm *NcclComm;
typedef struct {
    char internal[TSR_NCCL_UNIQUE_ID_BYTES];
} NcclUniqueId;
typedef struct CudaStream *CudaStream; /* cudaStream_t; NULL is the legacy default stream */

enum {
    NCCL_SUCCESS = 0,
    NCCL_IN_PROGRESS = 7,
    NCCL_AVG = 4,                  /* ncclAvg, since NCCL 2.10 */
    NCCL_FIRST_VERSION_WITH_AVG = 21000,
};

static struct {
    int (*GetVersion)(int *version);
    int (*GetUniqueId)(NcclUniqueId *id);
    int (*CommInitRank)(NcclComm *comm, int ranks, NcclUniqueId id, int rank);
    int (*AllReduce)(const void *send, void *receive, size_t count, int type, int op, NcclComm comm, CudaStream stream);
    int (*GroupStart)(void);
    int (*GroupEnd)(void);
    int (*CommGetAsyncError)(NcclComm comm, int *error);
    int (*CommAbort)(NcclComm comm);
    int (*CommDestroy)(NcclComm comm);
    const char *(*GetErrorString)(int result);
} nccl;

static const struct {
    const char *name;
    void **slot;
} nccl_entries[] = {
    {"ncclGetVersion", (void **)&nccl.GetVersion},
    {"ncclGetUniqueId", (void **)&nccl.GetUniqueId},
    {"ncclCommInitRank", (void **)&nccl.CommInitRank},
    {"ncclAllReduce", (void **)&nccl.AllReduce},
    {"ncclGroupStart", (void **)&nccl.GroupStart},
    {"ncclGroupEnd", (void **)&nccl.GroupEnd},
    {"ncclCommGetAsyncError", (void **)&nccl.CommGetAsyncError},
    {"ncclCommAbort", (void **)&nccl.CommAbort},
    {"ncclCommDestroy", (void **)&nccl.CommDestroy},
    {"ncclGetErrorString", (void **)&nccl.GetErrorString},
};

/* This process's engine: the library, the timeout, and the communicator with the state that owns it. */
static struct {
    void *library;
    const char *library_name;
    int version;
    double timeout_seconds;
    NcclComm comm;
    const void *owner; /* the GPU state the communicator was made for */
    int device;        /* its CUDA device ordinal */
    int rank, size;    /* this process's rank among `size`, for messages */
    bool failed;       /* aborted after a fault: the GPU may still hold NCCL's kernels */
} engine = {.timeout_seconds = TSR_NCCL_DEFAULT_TIMEOUT, .size = 1};

const char *tsr_nccl_entry_name(size_t k) { return k < sizeof nccl_entries / sizeof *nccl_entries ? nccl_entries[k].name : NULL; }

int tsr_nccl_type_of(uint8_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F16: return TSR_NCCL_FLOAT16;
    case TSR_DTYPE_F32: return TSR_NCCL_FLOAT32;
    case TSR_DTYPE_F64: return TSR_NCCL_FLOAT64;
    case TSR_DTYPE_BF16: return TSR_NCCL_BFLOAT16;
    default: return -1;
    }
}

int tsr_nccl_parse_timeout(const char *text, double *seconds) {
    if (!text || !text[0]) {
        *seconds = TSR_NCCL_DEFAULT_TIMEOUT;
        return TSR_OK;
    }
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end || end == text || errno == ERANGE || !isfinite(v) || !(v > 0))
        return tsr_error(TSR_ERR_DIST, "TSR_NCCL_TIMEOUT=%s: it must be a number of seconds greater than 0 (the "
                         "longest wait for the GPU before an NCCL run stops; default %d)", text, TSR_NCCL_DEFAULT_TIMEOUT);
    *seconds = v;
    return TSR_OK;
}

void tsr_nccl_version_text(int code, char *out, size_t size) {
    /* NCCL 2.9 on: major·10000 + minor·100 + patch; before: major·1000 + minor·100 + patch. */
    int major = code >= 10000 ? code / 10000 : code / 1000, rest = code >= 10000 ? code % 10000 : code % 1000;
    snprintf(out, size, "%d.%d.%d", major, rest / 100, rest % 100);
}

/* Record TSR_ERR_DIST: the printf-like context, then NCCL's text of `result`. */
static int nccl_error(int result, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int nccl_error(int result, const char *fmt, ...) {
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    const char *text = nccl.GetErrorString ? nccl.GetErrorString(result) : NULL;
    return tsr_error(TSR_ERR_DIST, "%s (process %d of %d): NCCL error %d%s%s%s", context, engine.rank, engine.size,
                     result, text ? " (" : "", text ? text : "", text ? ")" : "");
}

int tsr_nccl_load(void) {
    if (engine.library) return TSR_OK;
    int status = tsr_nccl_parse_timeout(getenv("TSR_NCCL_TIMEOUT"), &engine.timeout_seconds);
    if (status != TSR_OK) return status;
    const char *chosen = getenv("TSR_NCCL_LIBRARY");
    const char *name = chosen && chosen[0] ? chosen : "libnccl.so.2";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return tsr_error(TSR_ERR_DIST, "the NCCL engine (--distributed=nccl) needs NCCL's library (libnccl.so.2: NVIDIA's "
                         "libnccl2 package, or lib/ of the Python package nvidia-nccl-cu12 or -cu13), and %s cannot be "
                         "loaded (%s); set TSR_NCCL_LIBRARY to its path, or use --distributed=mpi",
                         name, why ? why : "not found");
    }
    for (size_t i = 0; i < sizeof nccl_entries / sizeof *nccl_entries; i++) {
        void *f = dlsym(lib, nccl_entries[i].name);
        if (!f) {
            memset(&nccl, 0, sizeof nccl);
            dlclose(lib);
            return tsr_error(TSR_ERR_DIST, "the library %s is not an NCCL this version can use: it lacks %s (set "
                             "TSR_NCCL_LIBRARY to NCCL's libnccl.so.2)", name, nccl_entries[i].name);
        }
        *nccl_entries[i].slot = f;
    }
    int result = nccl.GetVersion(&engine.version);
    if (result != NCCL_SUCCESS) {
        memset(&nccl, 0, sizeof nccl);
        dlclose(lib);
        return tsr_error(TSR_ERR_DIST, "the NCCL library %s does not say its version (ncclGetVersion: error %d)", name, result);
    }
    if (engine.version < NCCL_FIRST_VERSION_WITH_AVG) {
        char version[32];
        tsr_nccl_version_text(engine.version, version, sizeof version);
        memset(&nccl, 0, sizeof nccl);
        dlclose(lib);
        return tsr_error(TSR_ERR_DIST, "the NCCL library %s is version %s; the NCCL engine needs 2.10 or later (ncclAvg)",
                         name, version);
    }
    engine.library = lib; /* loaded for the rest of the process */
    engine.library_name = name;
    return TSR_OK;
}

int tsr_nccl_refuse_cpu_program(void) {
    return tsr_error(TSR_ERR_DIST, "--distributed=nccl averages gradients between NVIDIA GPUs, and this program was "
                     "compiled for the CPU (its target is not cuda): compile it with --target=cuda, or run it with "
                     "--distributed=mpi (or auto)");
}

int tsr_nccl_needs_open(const void *owner, bool *needed) {
    *needed = false;
    if (engine.failed) return tsr_error(TSR_ERR_DIST, "the NCCL communicator was aborted after an earlier fault");
    if (engine.comm && engine.owner == owner) return TSR_OK;
    if (engine.comm)
        return tsr_error(TSR_ERR_DIST, "the NCCL engine has one communicator per process, and another GPU state (GPU %d) "
                         "holds it: average the gradients of one state at a time", engine.device);
    if (!engine.library) return tsr_error(TSR_ERR_DIST, "the NCCL engine was not started (tsr_dist_start(\"nccl\"))");
    *needed = true;
    return TSR_OK;
}

int tsr_nccl_unique_id(void *id) {
    memset(id, 0, sizeof(NcclUniqueId));
    int result = nccl.GetUniqueId((NcclUniqueId *)id);
    return result == NCCL_SUCCESS ? TSR_OK : nccl_error(result, "NCCL cannot make a unique id (ncclGetUniqueId)");
}

int tsr_nccl_open(const void *owner, int device, int rank, int size, const void *unique_id) {
    engine.rank = rank;
    engine.size = size;
    NcclUniqueId id;
    memcpy(&id, unique_id, sizeof id);
    NcclComm comm = NULL;
    int result = nccl.CommInitRank(&comm, size, id, rank);
    if (result != NCCL_SUCCESS && result != NCCL_IN_PROGRESS)
        return nccl_error(result, "NCCL cannot make the communicator of GPU %d (ncclCommInitRank)", device);
    engine.comm = comm;
    engine.owner = owner;
    engine.device = device;
    return TSR_OK;
}

/* Abort the communicator after a fault; later uses are errors. */
static void abort_comm(void) {
    if (engine.comm) nccl.CommAbort(engine.comm);
    engine.comm = NULL;
    engine.owner = NULL;
    engine.failed = true;
}

int tsr_nccl_watch(double waited_seconds) {
    if (!engine.comm) return TSR_OK;
    int error = NCCL_SUCCESS, result = nccl.CommGetAsyncError(engine.comm, &error);
    if (result != NCCL_SUCCESS) error = result;
    if (error != NCCL_SUCCESS && error != NCCL_IN_PROGRESS) {
        abort_comm();
        return nccl_error(error, "a mean across the GPUs failed; the NCCL communicator was aborted");
    }
    if (waited_seconds > engine.timeout_seconds) {
        abort_comm();
        return tsr_error(TSR_ERR_DIST, "process %d of %d waited %.0f s for the GPU, past TSR_NCCL_TIMEOUT=%g s: another "
                         "process of the run has stopped or hangs (or a step takes longer: raise TSR_NCCL_TIMEOUT); the "
                         "NCCL communicator was aborted", engine.rank, engine.size, waited_seconds,
                         engine.timeout_seconds);
    }
    return TSR_OK;
}

bool tsr_nccl_failed(void) { return engine.failed; }

int tsr_nccl_mean(const tsr_nccl_cells *cells, uint32_t count) {
    if (!engine.comm) return tsr_error(TSR_ERR_DIST, "no NCCL communicator: tsr_nccl_open first");
    int result = nccl.GroupStart(), end;
    for (uint32_t k = 0; k < count && result == NCCL_SUCCESS; k++)
        if (cells[k].count)
            result = nccl.AllReduce(cells[k].device, cells[k].device, (size_t)cells[k].count, tsr_nccl_type_of(cells[k].dtype),
                                    NCCL_AVG, engine.comm, NULL);
    end = nccl.GroupEnd(); /* every GroupStart is ended */
    if (result == NCCL_SUCCESS || result == NCCL_IN_PROGRESS) result = end;
    if (result != NCCL_SUCCESS && result != NCCL_IN_PROGRESS) {
        abort_comm();
        return nccl_error(result, "the mean across the GPUs (ncclAllReduce) failed; the NCCL communicator was aborted");
    }
    return tsr_nccl_watch(0);
}

void tsr_nccl_close(const void *owner) {
    if (!engine.comm || engine.owner != owner) return;
    int error = NCCL_SUCCESS;
    if (nccl.CommGetAsyncError(engine.comm, &error) != NCCL_SUCCESS || (error != NCCL_SUCCESS && error != NCCL_IN_PROGRESS))
        nccl.CommAbort(engine.comm);
    else nccl.CommDestroy(engine.comm);
    engine.comm = NULL;
    engine.owner = NULL;
}
