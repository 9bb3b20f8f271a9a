/* cuda.c — the device side of a state made from an image with a GPU section (--target=cuda).
 *
 * The CUDA driver is loaded at run time: dlopen("libcuda.so.1") (or the file that the
 * environment variable TSR_CUDA_DRIVER names), and the few entry points used are resolved with
 * dlsym, declared here with the driver's ABI.  Nothing links against CUDA, so libtsr.a builds,
 * links and runs everywhere; without a driver or a GPU, creating a GPU state fails with
 * TSR_ERR_GPU and a message saying so.  The driver is loaded and initialised once per process
 * (under a lock); a failed load is tried again by the next state.
 *
 * Per state: the primary context of device 0 (TSR_CUDA_DEVICE=N picks another), the section's
 * PTX loaded as a module (the JIT's error log goes into the message when it fails), every
 * kernel's function, and device memory for every buffer some kernel lists.  Each such buffer is
 * host-newer, device-newer or current in both places: launches copy host-newer parameters to
 * the device and leave the buffers a kernel writes device-newer; the runtime's own reads and
 * writes of s->buffers (tsr_buffer_to_host), the accessors (tsr_state_host_buffer) and the
 * sync calls copy the other way.  Launches are asynchronous on the legacy default stream, and
 * the driver's synchronous copies are ordered after them, so a copy to the host sees every
 * kernel launched before it.  Every driver call makes the state's context current first, so a
 * state may be used from any thread (one thread at a time, as every state).
 *
 * With the NCCL engine (--distributed=nccl, nccl.c) a REDUCE averages the state's device copies
 * in place on the same stream (tsr_gpu_mean), and every wait for the GPU — a synchronize, and the
 * synchronous copies, which wait for the stream too — first polls the stream (cuStreamQuery),
 * asking NCCL for asynchronous errors and giving up after TSR_NCCL_TIMEOUT seconds
 * (tsr_nccl_watch), so a peer that died is a message, not a hang.
 *
 * A routine's kernels between two calls of the runtime run as one CUDA graph, made at their
 * first launch and replayed after (tsr_gpu_launch_run, "Runs of kernels as CUDA graphs" below;
 * TSR_CUDA_GRAPHS=0 launches them one at a time).
 *
 * Requires: glibc's dlopen (libc itself since 2.34); the driver API of CUDA 11 or later. */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_abi.h"
#include "internal.h"

/* ---- The driver's ABI: cuda_abi.h ---------------------------------------------------------------- */

enum { JIT_LOG_BYTES = 4096 };

/* The entry points, resolved from the library: `names` lists the symbol to try first (the
 * _v2 one where the driver has it) and the older one. */
static struct {
    bool loaded;
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*StreamQuery)(CUstream);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    /* CUDA graphs (optional: without them, every launch is one cuLaunchKernel) */
    bool graphs;
    CUresult (*GraphCreate)(CUgraph *, unsigned);
    CUresult (*GraphAddKernelNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CuKernelNodeParams *);
    CUresult (*GraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const CuKernelNodeParams *);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
} cu;

#define CU_ENTRY(field, first, second) {(void **)&cu.field, first, second}
static const struct {
    void **slot;
    const char *first, *second;
} cu_entries[] = {
    CU_ENTRY(Init, "cuInit", NULL),
    CU_ENTRY(DeviceGetCount, "cuDeviceGetCount", NULL),
    CU_ENTRY(DeviceGet, "cuDeviceGet", NULL),
    CU_ENTRY(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    CU_ENTRY(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    CU_ENTRY(CtxSetCurrent, "cuCtxSetCurrent", NULL),
    CU_ENTRY(CtxSynchronize, "cuCtxSynchronize", NULL),
    CU_ENTRY(StreamQuery, "cuStreamQuery", NULL),
    CU_ENTRY(ModuleLoadDataEx, "cuModuleLoadDataEx", NULL),
    CU_ENTRY(ModuleGetFunction, "cuModuleGetFunction", NULL),
    CU_ENTRY(ModuleUnload, "cuModuleUnload", NULL),
    CU_ENTRY(FuncSetAttribute, "cuFuncSetAttribute", NULL),
    CU_ENTRY(MemAlloc, "cuMemAlloc_v2", "cuMemAlloc"),
    CU_ENTRY(MemFree, "cuMemFree_v2", "cuMemFree"),
    CU_ENTRY(MemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD"),
    CU_ENTRY(MemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH"),
    CU_ENTRY(LaunchKernel, "cuLaunchKernel", NULL),
    CU_ENTRY(GetErrorName, "cuGetErrorName", NULL),
    CU_ENTRY(GetErrorString, "cuGetErrorString", NULL),
};
/* CUDA graphs' entry points (CUDA 11.4 and later; the kernel-node calls' _v2 where the driver has
 * them, CUDA 12's, else CUDA 11's, which read the same struct's first fields): where one is
 * missing, routines launch their kernels one at a time. */
static const struct {
    void **slot;
    const char *first, *second;
} cu_graph_entries[] = {
    CU_ENTRY(GraphCreate, "cuGraphCreate", NULL),
    CU_ENTRY(GraphAddKernelNode, "cuGraphAddKernelNode_v2", "cuGraphAddKernelNode"),
    CU_ENTRY(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", NULL),
    CU_ENTRY(GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams"),
    CU_ENTRY(GraphLaunch, "cuGraphLaunch", NULL),
    CU_ENTRY(GraphExecDestroy, "cuGraphExecDestroy", NULL),
    CU_ENTRY(GraphDestroy, "cuGraphDestroy", NULL),
};
#undef CU_ENTRY

static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const needs_gpu =
    "this program was compiled with --target=cuda and needs an NVIDIA GPU and its driver";

/* Record TSR_ERR_GPU: the printf-like context, then the driver's name and text of `result`. */
static int cu_error(CUresult result, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cu_error(CUresult result, const char *fmt, ...) {
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    const char *name = NULL, *text = NULL;
    if (cu.GetErrorName && cu.GetErrorName(result, &name) != CUDA_SUCCESS) name = NULL;
    if (cu.GetErrorString && cu.GetErrorString(result, &text) != CUDA_SUCCESS) text = NULL;
    if (!name) /* a driver that cannot name it (the stub library, CUDA_ERROR_STUB_LIBRARY = 34): its number */
        return tsr_error(TSR_ERR_GPU, "%s: CUDA error %d%s", context, (int)result,
                         result == 34 ? " (CUDA_ERROR_STUB_LIBRARY: the driver loaded is the CUDA toolkit's stub, not "
                                        "a GPU driver's libcuda.so.1)" : "");
    return tsr_error(TSR_ERR_GPU, "%s: %s%s%s%s", context, name, text ? " (" : "", text ? text : "", text ? ")" : "");
}

/* Load and initialise the driver unless it is already; TSR_OK or TSR_ERR_GPU. */
static int driver_load_locked(void) {
    if (cu.loaded) return TSR_OK;
    const char *path = getenv("TSR_CUDA_DRIVER");
    if (!path || !path[0]) path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return tsr_error(TSR_ERR_GPU, "no CUDA driver: cannot load %s (%s); %s", path, why ? why : "not found",
                         needs_gpu);
    }
    for (size_t i = 0; i < sizeof cu_entries / sizeof cu_entries[0]; i++) {
        void *f = dlsym(lib, cu_entries[i].first);
        if (!f && cu_entries[i].second) f = dlsym(lib, cu_entries[i].second);
        if (!f) {
            memset(&cu, 0, sizeof cu);
            dlclose(lib);
            return tsr_error(TSR_ERR_GPU, "the CUDA driver %s is too old or not a CUDA driver: it lacks %s; %s", path,
                             cu_entries[i].first, needs_gpu);
        }
        *cu_entries[i].slot = f;
    }
    cu.graphs = true;
    for (size_t i = 0; i < sizeof cu_graph_entries / sizeof cu_graph_entries[0]; i++) {
        void *f = dlsym(lib, cu_graph_entries[i].first);
        if (!f && cu_graph_entries[i].second) f = dlsym(lib, cu_graph_entries[i].second);
        *cu_graph_entries[i].slot = f;
        cu.graphs = cu.graphs && f;
    }
    CUresult r = cu.Init(0);
    if (r != CUDA_SUCCESS) {
        cu_error(r, "the CUDA driver cannot start (no usable GPU?); %s", needs_gpu);
        memset(&cu, 0, sizeof cu);
        dlclose(lib);
        return TSR_ERR_GPU;
    }
    cu.loaded = true; /* the library stays loaded for the rest of the process */
    return TSR_OK;
}

static int driver_load(void) {
    pthread_mutex_lock(&cu_lock);
    int status = driver_load_locked();
    pthread_mutex_unlock(&cu_lock);
    return status;
}

/* ---- A state's device side ----------------------------------------------------------------------- */

enum { HOST_NEWER, DEVICE_NEWER, BOTH_CURRENT };

/* TSR_CUDA_GRAPHS: unset, graphs where the driver makes them (else launches one at a time);
 * 0, never; 1, always (a graph the driver refuses is an error). */
enum { GRAPHS_WHERE_POSSIBLE, GRAPHS_OFF, GRAPHS_REQUIRED };

/* A run of a routine's consecutive kernels, launched as one CUDA graph (tsr_gpu_launch_run): a
 * chain of kernel nodes, each after the one before.  The driver copied the by-value parameters
 * (the index symbols and the run's key) into the nodes when it made or last refreshed them:
 * `scalars` holds those values, and a replay first refreshes the nodes of the kernels that read
 * one that changed since (tsr_gpu_kernel.scalars). */
typedef struct GpuGraph {
    uint32_t count;    /* kernels first … first + count - 1 */
    CUgraph graph;     /* kept: its nodes name the replay's kernels when they are refreshed */
    CUgraphExec exec;
    CUgraphNode *nodes; /* per kernel of the run */
    int64_t *scalars;   /* symbol_count + TSR_SYMBOL_KEY_WORDS values */
    bool refused;       /* the driver could not make it (GRAPHS_WHERE_POSSIBLE): one at a time */
} GpuGraph;

struct tsr_gpu {
    tsr_state *state;
    const tsr_gpu_section *section;
    CUdevice device;
    CUcontext context; /* the device's primary context, retained; NULL until then */
    CUmodule module;
    CUfunction *functions; /* per kernel */
    void ***params;        /* per kernel: the launch's parameter pointers (symbols and the run's
                            * random key, then buffers) */
    uint32_t buffer_count;
    CUdeviceptr *memory;   /* per buffer: its device copy, or 0 (no kernel uses it) */
    size_t *bytes;         /* per buffer: the size of both copies */
    uint8_t *where;        /* per buffer: HOST_NEWER, DEVICE_NEWER or BOTH_CURRENT */
    int graph_mode;        /* GRAPHS_* (TSR_CUDA_GRAPHS) */
    GpuGraph **graphs;     /* per kernel: the graph of the run that starts there, or NULL */
};

static int gpu_current(const tsr_gpu *g) {
    CUresult r = cu.CtxSetCurrent(g->context);
    return r == CUDA_SUCCESS ? TSR_OK : cu_error(r, "cannot use the GPU's context");
}

/* A process's GPU (internal.h).  Without TSR_CUDA_DEVICE, the processes of a distributed run on
 * one machine take one GPU each in rank order where there are as many; where a launcher shows
 * each process only its own (Slurm's --gpus-per-task, a CUDA_VISIBLE_DEVICES a process), count
 * is 1 and that one is taken; where there are fewer GPUs than processes, they are shared in
 * turn.  A run of one process has local rank 0: GPU 0. */
int tsr_gpu_device_for(int count, const char *chosen, int local_rank) {
    if (count <= 0) {
        tsr_error(TSR_ERR_GPU, "the CUDA driver found no GPU");
        return -1;
    }
    if (!chosen || !chosen[0]) return local_rank >= 0 ? local_rank % count : 0;
    char *end;
    long n = strtol(chosen, &end, 10);
    if (*end || end == chosen) {
        tsr_error(TSR_ERR_GPU, "TSR_CUDA_DEVICE=%s is not a GPU's number (the driver found %d: 0..%d)", chosen, count,
                  count - 1);
        return -1;
    }
    if (n < 0 || n >= count) {
        tsr_error(TSR_ERR_GPU, "TSR_CUDA_DEVICE=%s: there is no such GPU (the driver found %d: 0..%d)", chosen, count,
                  count - 1);
        return -1;
    }
    return (int)n;
}

/* This process's GPU (tsr_gpu_device_for) and its primary context, current on this thread. */
static int open_context(tsr_gpu *g) {
    int count = 0;
    CUresult r = cu.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS) return cu_error(r, "the CUDA driver cannot count the GPUs; %s", needs_gpu);
    if (count <= 0) return tsr_error(TSR_ERR_GPU, "the CUDA driver found no GPU; %s", needs_gpu);
    int ordinal = tsr_gpu_device_for(count, getenv("TSR_CUDA_DEVICE"), tsr_dist_local_rank());
    if (ordinal < 0) return TSR_ERR_GPU;
    if ((r = cu.DeviceGet(&g->device, ordinal)) != CUDA_SUCCESS) return cu_error(r, "cannot open GPU %d", ordinal);
    if ((r = cu.DevicePrimaryCtxRetain(&g->context, g->device)) != CUDA_SUCCESS) {
        g->context = NULL;
        return cu_error(r, "cannot create a context on GPU %d", ordinal);
    }
    return gpu_current(g);
}

/* The module from the section's cubin where the GPU runs it (compiled by ptxas when tsrc ran,
 * for the section's arch), else from its PTX, which the driver compiles (the JIT's log in the
 * message when that fails); and every kernel's function and launch parameters. */
static int open_module(tsr_gpu *g) {
    const tsr_gpu_section *sec = g->section;
    char log[JIT_LOG_BYTES] = "";
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)sizeof log};
    /* (a cubin for another architecture than the GPU's: CUDA_ERROR_NO_BINARY_FOR_GPU; the PTX,
     * compiled for this one, then runs on it) */
    CUresult r = sec->cubin_size ? cu.ModuleLoadDataEx(&g->module, sec->cubin, 0, NULL, NULL) : CUDA_ERROR_INVALID_IMAGE;
    if (r != CUDA_SUCCESS) r = cu.ModuleLoadDataEx(&g->module, sec->ptx, 2, options, values);
    if (r != CUDA_SUCCESS) {
        g->module = NULL;
        log[sizeof log - 1] = 0;
        size_t n = strlen(log);
        while (n && (log[n - 1] == '\n' || log[n - 1] == ' ')) log[--n] = 0;
        return cu_error(r, "the GPU cannot load this program's PTX (arch %s)%s%s", sec->arch, n ? ": " : "", log);
    }
    const tsr_state *s = g->state;
    uint32_t symbols = tsr_model_symbol_count(s->model) + TSR_SYMBOL_KEY_WORDS; /* tsr.h: the key follows */
    for (uint32_t k = 0; k < sec->kernel_count; k++) {
        const tsr_gpu_kernel *kn = &sec->kernels[k];
        if ((r = cu.ModuleGetFunction(&g->functions[k], g->module, kn->name)) != CUDA_SUCCESS)
            return cu_error(r, "the program's PTX has no kernel '%s'", kn->name);
        if (kn->shared_bytes > CUDA_STATIC_SHARED_LIMIT &&
            (r = cu.FuncSetAttribute(g->functions[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     (int)kn->shared_bytes)) != CUDA_SUCCESS)
            return cu_error(r, "GPU kernel '%s' cannot have %" PRIu32 " bytes of shared memory on this GPU", kn->name,
                            kn->shared_bytes);
        void **p = g->params[k] = calloc((size_t)symbols + kn->param_count + 1, sizeof *p);
        if (!p) return tsr_error(TSR_ERR_NOMEM, "out of memory preparing GPU kernel '%s'", kn->name);
        for (uint32_t i = 0; i < symbols; i++) p[i] = &s->symbols[i]; /* by value at launch time */
        for (uint32_t i = 0; i < kn->param_count; i++) p[symbols + i] = &g->memory[kn->buffers[i]];
    }
    return TSR_OK;
}

/* The bytes of a buffer of `cells` cells of `cell_bytes` each, in *bytes; false when they do not
 * fit a size_t (every count of cells and every cell size, 1-byte cells included). */
bool tsr_gpu_buffer_bytes(int64_t cells, size_t cell_bytes, size_t *bytes) {
    if (cells < 0 || cell_bytes == 0 || (uint64_t)cells > SIZE_MAX / cell_bytes) return false;
    *bytes = (size_t)cells * cell_bytes;
    return true;
}

/* Device memory for every buffer a kernel lists (at least one cell: the driver refuses 0 bytes). */
static int open_memory(tsr_gpu *g) {
    const tsr_gpu_section *sec = g->section;
    for (uint32_t k = 0; k < sec->kernel_count; k++)
        for (uint32_t i = 0; i < sec->kernels[k].param_count; i++) {
            uint32_t b = sec->kernels[k].buffers[i];
            if (g->memory[b]) continue;
            uint32_t rank;
            const int64_t *dims;
            int64_t cells;
            uint8_t kind;
            tsr_model_buffer_shape(g->state->model, b, &rank, &dims, &cells, &kind);
            uint8_t dtype = tsr_model_buffer_dtype(g->state->model, b);
            size_t cell_bytes = tsr_dtype_cell_bytes(dtype);
            CUresult r = !tsr_gpu_buffer_bytes(cells, cell_bytes, &g->bytes[b])
                             ? CUDA_ERROR_OUT_OF_MEMORY
                             : cu.MemAlloc(&g->memory[b], g->bytes[b] ? g->bytes[b] : cell_bytes);
            if (r != CUDA_SUCCESS) {
                g->memory[b] = 0;
                return cu_error(r, "cannot allocate tensor '%s' (%" PRId64 " %s cells) on the GPU",
                                tsr_model_buffer_name(g->state->model, b), cells, tsr_dtype_word(dtype));
            }
        }
    return TSR_OK;
}

/* ---- Waits ------------------------------------------------------------------------------------------ */

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Wait for every launched kernel (and collective); a kernel's failure shows here.  With the NCCL
 * engine the wait polls the stream, NCCL's errors and the timeout between looks (tsr_nccl_watch). */
static int gpu_wait(void) {
    if (!tsr_dist_uses_nccl()) {
        CUresult r = cu.CtxSynchronize();
        return r == CUDA_SUCCESS ? TSR_OK : cu_error(r, "the GPU failed running this program's kernels");
    }
    double started = seconds_now();
    for (unsigned looks = 0;; looks++) {
        CUresult r = cu.StreamQuery(NULL);
        if (r == CUDA_SUCCESS) return TSR_OK;
        if (r != CUDA_ERROR_NOT_READY) return cu_error(r, "the GPU failed running this program's kernels or means");
        int status = tsr_nccl_watch(seconds_now() - started);
        if (status != TSR_OK) return status;
        if (looks > 100) nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL); /* past a short spin, 50 µs naps */
    }
}

/* Before a synchronous copy, which waits for the stream: the NCCL engine's polled wait. */
static int wait_before_copy(void) { return tsr_dist_uses_nccl() ? gpu_wait() : TSR_OK; }

/* The host's memory of a graph (the driver's objects are tsr_gpu_close's). */
static void graph_free(GpuGraph *gr) {
    if (!gr) return;
    free(gr->nodes);
    free(gr->scalars);
    free(gr);
}

tsr_gpu *tsr_gpu_open(tsr_state *s, const tsr_gpu_section *section) {
    if (driver_load() != TSR_OK) return NULL;
    tsr_gpu *g = calloc(1, sizeof *g);
    uint32_t n = tsr_model_buffer_count(s->model);
    if (g) {
        g->state = s;
        g->section = section;
        g->buffer_count = n;
        g->functions = calloc(section->kernel_count + 1, sizeof *g->functions);
        g->params = calloc(section->kernel_count + 1, sizeof *g->params);
        g->memory = calloc((size_t)n + 1, sizeof *g->memory);
        g->bytes = calloc((size_t)n + 1, sizeof *g->bytes);
        g->where = calloc((size_t)n + 1, sizeof *g->where); /* HOST_NEWER: creation fills the host copies */
        g->graphs = calloc(section->kernel_count + 1, sizeof *g->graphs);
    }
    if (!g || !g->functions || !g->params || !g->memory || !g->bytes || !g->where || !g->graphs) {
        tsr_gpu_close(g);
        tsr_error(TSR_ERR_NOMEM, "out of memory creating a GPU state");
        return NULL;
    }
    const char *graphs = getenv("TSR_CUDA_GRAPHS");
    if (graphs && graphs[0] && strcmp(graphs, "0") && strcmp(graphs, "1")) {
        tsr_gpu_close(g);
        tsr_error(TSR_ERR_ARGUMENT, "TSR_CUDA_GRAPHS=%s: expected 0 (launch kernels one at a time) or 1 (as graphs)",
                  graphs);
        return NULL;
    }
    g->graph_mode = !graphs || !graphs[0] ? GRAPHS_WHERE_POSSIBLE : graphs[0] == '0' ? GRAPHS_OFF : GRAPHS_REQUIRED;
    if (open_context(g) != TSR_OK || open_memory(g) != TSR_OK || open_module(g) != TSR_OK) {
        tsr_gpu_close(g);
        return NULL;
    }
    return g;
}

void tsr_gpu_close(tsr_gpu *g) {
    if (!g) return;
    if (g->context && tsr_nccl_failed()) { /* NCCL's kernels may never end: leave the GPU to the process's exit */
        tsr_nccl_close(g);
        g->context = NULL;
    }
    if (g->context && gpu_current(g) == TSR_OK) {
        gpu_wait(); /* a kernel still running may use the memory; its error no longer matters */
        tsr_nccl_close(g);
        for (uint32_t k = 0; g->graphs && k < g->section->kernel_count; k++) {
            GpuGraph *gr = g->graphs[k];
            if (gr && gr->exec) cu.GraphExecDestroy(gr->exec);
            if (gr && gr->graph) cu.GraphDestroy(gr->graph);
        }
        for (uint32_t b = 0; g->memory && b < g->buffer_count; b++)
            if (g->memory[b]) cu.MemFree(g->memory[b]);
        if (g->module) cu.ModuleUnload(g->module);
    }
    if (g->context) cu.DevicePrimaryCtxRelease(g->device);
    for (uint32_t k = 0; g->params && k < g->section->kernel_count; k++) free(g->params[k]);
    for (uint32_t k = 0; g->graphs && k < g->section->kernel_count; k++) graph_free(g->graphs[k]);
    free(g->graphs);
    free(g->params);
    free(g->functions);
    free(g->memory);
    free(g->bytes);
    free(g->where);
    free(g);
}

/* ---- Coherence ------------------------------------------------------------------------------------ */

/* Make buffer b's device copy current (it has one, and a host copy). */
static int to_device(tsr_gpu *g, uint32_t b) {
    float *host = g->state->buffers[b];
    if (g->where[b] != HOST_NEWER || !host || !g->bytes[b]) return TSR_OK;
    int status = wait_before_copy();
    if (status != TSR_OK) return status;
    CUresult r = cu.MemcpyHtoD(g->memory[b], host, g->bytes[b]);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cannot copy tensor '%s' to the GPU (a kernel launched before may have failed)",
                        tsr_model_buffer_name(g->state->model, b));
    g->where[b] = BOTH_CURRENT;
    return TSR_OK;
}

/* Make buffer b's host copy current. */
static int to_host(tsr_gpu *g, uint32_t b) {
    float *host = g->state->buffers[b];
    if (g->where[b] != DEVICE_NEWER || !host || !g->bytes[b]) return TSR_OK;
    int status = wait_before_copy();
    if (status != TSR_OK) return status;
    CUresult r = cu.MemcpyDtoH(host, g->memory[b], g->bytes[b]);
    if (r != CUDA_SUCCESS)
        return cu_error(r, "cannot copy tensor '%s' from the GPU (a kernel launched before may have failed)",
                        tsr_model_buffer_name(g->state->model, b));
    g->where[b] = BOTH_CURRENT;
    return TSR_OK;
}

int tsr_buffer_to_host(tsr_state *s, uint32_t b, bool write) {
    tsr_gpu *g = tsr_state_gpu(s);
    if (!g || b >= g->buffer_count || !g->memory[b]) return TSR_OK;
    int status = g->where[b] == DEVICE_NEWER ? gpu_current(g) : TSR_OK;
    if (status == TSR_OK) status = to_host(g, b);
    if (status == TSR_OK && write) g->where[b] = HOST_NEWER;
    return status;
}

float *tsr_state_host_buffer(tsr_state *s, uint32_t buffer) {
    if (!s) {
        tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
        return NULL;
    }
    if (buffer >= tsr_model_buffer_count(s->model)) {
        tsr_error(TSR_ERR_ARGUMENT, "no buffer number %u", buffer);
        return NULL;
    }
    return tsr_buffer_to_host(s, buffer, true) == TSR_OK ? s->buffers[buffer] : NULL;
}

int tsr_state_sync_host(tsr_state *s) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    tsr_gpu *g = tsr_state_gpu(s);
    if (!g) return TSR_OK;
    int status = gpu_current(g);
    if (status == TSR_OK) status = gpu_wait();
    for (uint32_t b = 0; b < g->buffer_count && status == TSR_OK; b++)
        if (g->memory[b]) status = to_host(g, b);
    return status;
}

int tsr_state_sync_device(tsr_state *s) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    tsr_gpu *g = tsr_state_gpu(s);
    if (!g) return TSR_OK;
    int status = gpu_current(g);
    for (uint32_t b = 0; b < g->buffer_count && status == TSR_OK; b++)
        if (g->memory[b]) status = to_device(g, b);
    return status == TSR_OK ? gpu_wait() : status;
}

int tsr_gpu_profile_wait(tsr_state *s) {
    if (!s) return tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
    tsr_gpu *g = tsr_state_gpu(s);
    if (!g) return TSR_OK;
    int status = gpu_current(g);
    return status == TSR_OK ? gpu_wait() : status;
}

/* ---- Launches -------------------------------------------------------------------------------------- */

/* The state's device side for a launch of kernels first … first + count - 1, its context current. */
static tsr_gpu *launch_gpu(tsr_state *s, uint32_t first, uint32_t count, int *status) {
    *status = TSR_OK;
    if (!s) {
        *status = tsr_error(TSR_ERR_ARGUMENT, "the state is NULL");
        return NULL;
    }
    tsr_gpu *g = tsr_state_gpu(s);
    if (!g)
        *status = tsr_error(TSR_ERR_ARGUMENT, "GPU kernel %u: this state has no GPU section", first);
    else if (count == 0 || first >= g->section->kernel_count || count > g->section->kernel_count - first)
        *status = tsr_error(TSR_ERR_ARGUMENT, "no GPU kernel number %u (the program has %u)",
                            count && first < g->section->kernel_count ? first + count - 1 : first,
                            g->section->kernel_count);
    else
        *status = gpu_current(g);
    return *status == TSR_OK ? g : NULL;
}

/* Kernel k's buffers current on the device (the host-newer ones copied). */
static int buffers_to_device(tsr_gpu *g, uint32_t k) {
    const tsr_gpu_kernel *kn = &g->section->kernels[k];
    int status = TSR_OK;
    for (uint32_t i = 0; i < kn->param_count && status == TSR_OK; i++) status = to_device(g, kn->buffers[i]);
    return status;
}

/* After kernel k is launched: the buffers it writes are newer on the device. */
static void mark_written(tsr_gpu *g, uint32_t k) {
    const tsr_gpu_kernel *kn = &g->section->kernels[k];
    for (uint32_t i = 0; i < kn->param_count; i++)
        if (kn->writes[i]) g->where[kn->buffers[i]] = DEVICE_NEWER;
}

static int launch_one(tsr_gpu *g, uint32_t k) {
    const tsr_gpu_kernel *kn = &g->section->kernels[k];
    int status = buffers_to_device(g, k);
    if (status != TSR_OK) return status;
    CUresult r = cu.LaunchKernel(g->functions[k], kn->grid[0], kn->grid[1], kn->grid[2], kn->block[0], kn->block[1],
                                 kn->block[2], kn->shared_bytes, NULL, g->params[k], NULL);
    if (r != CUDA_SUCCESS) return cu_error(r, "cannot launch GPU kernel %u '%s'", k, kn->name);
    mark_written(g, k);
    return TSR_OK;
}

int tsr_gpu_launch(tsr_state *s, uint32_t kernel) {
    int status;
    tsr_gpu *g = launch_gpu(s, kernel, 1, &status);
    return g ? launch_one(g, kernel) : status;
}

/* ---- Runs of kernels as CUDA graphs ---------------------------------------------------------------- *
 *
 * A routine's kernels between two calls of the runtime (a REDUCE, nothing else touches the
 * host's copies there) are one run, and the generated code launches each run with
 * tsr_gpu_launch_run.  Its first launch makes a graph of the run's kernels, each node after the
 * one before (the order and the dependences of launches on one stream), and every launch of
 * the run replays it: one call of the driver instead of one a kernel, and less time between
 * kernels on the GPU.  The parameters' values are the nodes': a replay first gives the kernels
 * that read an index symbol or the run's key (the compiler's tsr_gpu_kernel.scalars) the
 * current values where they changed.  The buffers that any kernel of the run lists are made
 * current on the device before it, which is what the launches one at a time would have done:
 * nothing on the host runs between them.  A graph the driver refuses to make or to launch
 * leaves its run launched one kernel at a time (an error with TSR_CUDA_GRAPHS=1). */

static CuKernelNodeParams node_params(const tsr_gpu *g, uint32_t k) {
    const tsr_gpu_kernel *kn = &g->section->kernels[k];
    return (CuKernelNodeParams){.func = g->functions[k], .gridDimX = kn->grid[0], .gridDimY = kn->grid[1],
                                .gridDimZ = kn->grid[2], .blockDimX = kn->block[0], .blockDimY = kn->block[1],
                                .blockDimZ = kn->block[2], .sharedMemBytes = kn->shared_bytes,
                                .kernelParams = g->params[k]};
}

/* The graph of kernels first … first + count - 1 in *out, or an error (the graph then freed). */
static int graph_make(tsr_gpu *g, uint32_t first, uint32_t count, GpuGraph **out) {
    uint32_t scalars = tsr_model_symbol_count(g->state->model) + TSR_SYMBOL_KEY_WORDS;
    GpuGraph *gr = calloc(1, sizeof *gr);
    if (gr) {
        gr->count = count;
        gr->nodes = calloc(count, sizeof *gr->nodes);
        gr->scalars = calloc(scalars + 1, sizeof *gr->scalars);
    }
    if (!gr || !gr->nodes || !gr->scalars) {
        graph_free(gr);
        return tsr_error(TSR_ERR_NOMEM, "out of memory making a CUDA graph of GPU kernels %u to %u", first,
                         first + count - 1);
    }
    memcpy(gr->scalars, g->state->symbols, scalars * sizeof *gr->scalars);
    CUresult r = cu.GraphCreate(&gr->graph, 0);
    for (uint32_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
        CuKernelNodeParams p = node_params(g, first + i);
        r = cu.GraphAddKernelNode(&gr->nodes[i], gr->graph, i ? &gr->nodes[i - 1] : NULL, i ? 1 : 0, &p);
    }
    if (r == CUDA_SUCCESS) r = cu.GraphInstantiateWithFlags(&gr->exec, gr->graph, 0);
    if (r != CUDA_SUCCESS) {
        if (gr->graph) cu.GraphDestroy(gr->graph);
        graph_free(gr);
        return cu_error(r, "cannot make a CUDA graph of GPU kernels %u to %u", first, first + count - 1);
    }
    *out = gr;
    return TSR_OK;
}

/* The nodes whose kernels read a value that changed since the graph's nodes got theirs, given
 * the current ones. */
static int graph_refresh(tsr_gpu *g, GpuGraph *gr, uint32_t first) {
    uint32_t symbols = tsr_model_symbol_count(g->state->model), scalars = symbols + TSR_SYMBOL_KEY_WORDS;
    const int64_t *now = g->state->symbols;
    uint8_t changed = 0;
    if (memcmp(gr->scalars, now, symbols * sizeof *now)) changed |= TSR_GPU_READS_SYMBOLS;
    if (memcmp(gr->scalars + symbols, now + symbols, TSR_SYMBOL_KEY_WORDS * sizeof *now)) changed |= TSR_GPU_READS_KEY;
    for (uint32_t i = 0; changed && i < gr->count; i++) {
        if (!(g->section->kernels[first + i].scalars & changed)) continue;
        CuKernelNodeParams p = node_params(g, first + i);
        CUresult r = cu.GraphExecKernelNodeSetParams(gr->exec, gr->nodes[i], &p);
        if (r != CUDA_SUCCESS)
            return cu_error(r, "cannot give GPU kernel %u '%s' of a CUDA graph its parameters", first + i,
                            g->section->kernels[first + i].name);
    }
    memcpy(gr->scalars, now, scalars * sizeof *now);
    return TSR_OK;
}

/* The graph to replay for kernels first … first + count - 1, made at the run's first launch;
 * NULL where they are launched one at a time (TSR_CUDA_GRAPHS=0, a lone kernel, a driver
 * without graphs, or one that refused this run's graph), *status an error where
 * TSR_CUDA_GRAPHS=1 makes that one. */
static GpuGraph *graph_of(tsr_gpu *g, uint32_t first, uint32_t count, int *status) {
    *status = TSR_OK;
    GpuGraph *gr = g->graphs[first];
    if (count < 2 || g->graph_mode == GRAPHS_OFF || (gr && (gr->refused || gr->count != count))) return NULL;
    if (gr) return gr;
    if (!cu.graphs) {
        if (g->graph_mode == GRAPHS_REQUIRED)
            *status = tsr_error(TSR_ERR_GPU, "TSR_CUDA_GRAPHS=1, but the CUDA driver has no graphs (CUDA 11.4 or later)");
        return NULL;
    }
    int made = graph_make(g, first, count, &gr);
    if (made == TSR_OK) return g->graphs[first] = gr;
    if (g->graph_mode == GRAPHS_REQUIRED) *status = made;
    else if ((gr = calloc(1, sizeof *gr)) != NULL) /* refused: launched one at a time from now on */
        gr->refused = true, g->graphs[first] = gr;
    return NULL;
}

int tsr_gpu_launch_run(tsr_state *s, uint32_t first, uint32_t count) {
    int status;
    tsr_gpu *g = launch_gpu(s, first, count, &status);
    if (!g) return status;
    GpuGraph *gr = graph_of(g, first, count, &status);
    for (uint32_t k = first; k < first + count && status == TSR_OK; k++) status = buffers_to_device(g, k);
    if (gr && status == TSR_OK && (status = graph_refresh(g, gr, first)) == TSR_OK) {
        CUresult r = cu.GraphLaunch(gr->exec, NULL);
        if (r == CUDA_SUCCESS) {
            for (uint32_t k = first; k < first + count; k++) mark_written(g, k);
            return TSR_OK;
        }
        if (g->graph_mode == GRAPHS_REQUIRED)
            return cu_error(r, "cannot launch the CUDA graph of GPU kernels %u to %u", first, first + count - 1);
        gr->refused = true; /* refused: launched one at a time from now on (an error of the GPU's own
                             * shows at their launches or the next wait) */
    }
    for (uint32_t k = first; k < first + count && status == TSR_OK; k++) status = launch_one(g, k);
    return status;
}

/* ---- Means with NCCL ------------------------------------------------------------------------------ */

bool tsr_gpu_has_copy(const tsr_state *s, uint32_t b) {
    const tsr_gpu *g = tsr_state_gpu(s);
    return g && b < g->buffer_count && g->memory[b];
}

int tsr_gpu_mean(tsr_state *s, const uint32_t *buffers, uint32_t count) {
    tsr_gpu *g = tsr_state_gpu(s);
    if (!g) return tsr_nccl_refuse_cpu_program();
    tsr_nccl_cells *cells = calloc((size_t)count + 1, sizeof *cells);
    if (!cells) return tsr_error(TSR_ERR_NOMEM, "out of memory averaging %u tensors with NCCL", count);
    int status = gpu_current(g);
    if (status == TSR_OK) status = tsr_dist_nccl_open(g, (int)g->device);
    uint32_t n = 0;
    for (uint32_t k = 0; k < count && status == TSR_OK; k++) {
        uint32_t b = buffers[k];
        if (!tsr_gpu_has_copy(s, b)) continue;
        uint8_t dtype = tsr_model_buffer_dtype(s->model, b);
        if (tsr_nccl_type_of(dtype) < 0)
            status = tsr_error(TSR_ERR_IMAGE, "the mean across processes of '%s': %s cells have no mean",
                               tsr_model_buffer_name(s->model, b), tsr_dtype_word(dtype));
        else if ((status = to_device(g, b)) == TSR_OK)
            cells[n++] = (tsr_nccl_cells){(void *)(uintptr_t)g->memory[b],
                                          (int64_t)(g->bytes[b] / tsr_dtype_cell_bytes(dtype)), dtype};
    }
    if (status == TSR_OK) status = tsr_nccl_mean(cells, n);
    free(cells);
    for (uint32_t k = 0; k < count && status == TSR_OK; k++)
        if (tsr_gpu_has_copy(s, buffers[k])) g->where[buffers[k]] = DEVICE_NEWER;
    return status;
}
