/* fake_cuda.c — a stand-in for the CUDA driver (libcuda.so.1) that checks how a --target=cuda
 * program's host side uses it, on a machine without a GPU (tests/gpu/fake_driver.sh; loaded
 * through TSR_CUDA_DRIVER, runtime/cuda.c).
 *
 * What it does: implements the driver entry points runtime/cuda.c resolves, with one pretend
 * device whose memory is the host's.  Kernels are not run (a launch changes no memory), so a
 * program's printed values are not its results; what is checked is the host side around them:
 *   - a module is PTX text (".version", ".entry"), and every function asked for by name is an
 *     .entry of it; a cubin (an ELF image, which tsrc makes with ptxas) is refused as a GPU of
 *     another architecture refuses it (CUDA_ERROR_NO_BINARY_FOR_GPU), and each module offered is
 *     a line "cubin" or "ptx" of the file TSR_FAKE_CUDA_MODULES names (if set);
 *   - a launch names a function of the loaded module, with a grid of at least one block a
 *     dimension (at most 2^31 - 1 along x, 65535 along y and z), at most 1024 threads a block,
 *     dynamic shared memory within 48 KiB or what cuFuncSetAttribute allowed that function (at
 *     most 227 KiB), and one non-NULL parameter pointer for each .param of the entry;
 *   - copies stay within one allocation, and frees name a live one.
 * A violation is printed on stderr ("fake CUDA driver: …") and the call fails with an error code,
 * which the runtime turns into the program's error, so the program exits 1.  Each launch is
 * appended to the file TSR_FAKE_CUDA_TRACE names (if set) as one line "NAME", and to the file
 * TSR_FAKE_CUDA_VALUES names as "NAME" and its parameters' values.  CUDA graphs (chains of kernel
 * nodes, the runtime's runs of kernels) are made, checked and replayed in order: each node's
 * replay is a launch of its kernel with the values the node holds ("Graphs" below).  A function named
 * by TSR_FAKE_CUDA_HIDE counts as missing from the module (so a test sees the program fail).
 *
 * Requires: runtime/cuda_abi.h (-Iruntime); built as a shared object (cc -shared -fPIC). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h"

enum {
    OPT_IN_SHARED_LIMIT = 227 << 10, /* a Hopper block's dynamic shared memory, asked for */
    MAX_FUNCTIONS = 8192,
    MAX_ALLOCATIONS = 65536,
};

static int context_token, module_token;

/* The loaded module's text, and the functions asked for: name, .param count, shared memory allowed. */
static char *module_text;
static struct Function {
    char *name;
    unsigned params;
    unsigned char *read; /* per .param: whether the entry's body names it (the others' values cannot matter) */
    int shared_allowed;
} functions[MAX_FUNCTIONS];
static unsigned function_count;

/* Live allocations (device pointers are the host addresses). */
static struct Allocation {
    char *at;
    size_t bytes;
} allocations[MAX_ALLOCATIONS];
static unsigned allocation_count;

static CUresult complain(CUresult code, const char *what, const char *detail) {
    fprintf(stderr, "fake CUDA driver: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return code;
}

CUresult cuInit(unsigned flags) { return flags == 0 ? CUDA_SUCCESS : complain(CUDA_ERROR_INVALID_VALUE, "cuInit flags not 0", NULL); }
CUresult cuDeviceGetCount(int *count) { *count = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (ordinal != 0) return complain(CUDA_ERROR_INVALID_VALUE, "no such device (one pretend GPU, ordinal 0)", NULL);
    *device = 0;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    *context = (CUcontext)&context_token;
    return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) { return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuCtxSetCurrent(CUcontext context) {
    return context == (CUcontext)&context_token ? CUDA_SUCCESS : complain(CUDA_ERROR_INVALID_HANDLE, "an unknown context made current", NULL);
}
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuStreamQuery(CUstream stream) { (void)stream; return CUDA_SUCCESS; }

static CUresult append_to(const char *variable, const char *line);

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned options, int *keys, void **values) {
    (void)options, (void)keys, (void)values;
    const char *text = image;
    /* A cubin (an ELF image: the pretend GPU runs none, as a GPU of another architecture than
     * the cubin's would not): the runtime must then load the PTX. */
    if (text && memcmp(text, "\x7f" "ELF", 4) == 0) {
        CUresult r = append_to("TSR_FAKE_CUDA_MODULES", "cubin");
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    CUresult logged = append_to("TSR_FAKE_CUDA_MODULES", "ptx");
    if (logged != CUDA_SUCCESS) return logged;
    if (!text || !strstr(text, ".version") || !strstr(text, ".entry"))
        return complain(CUDA_ERROR_INVALID_IMAGE, "the module is not PTX text with entries", NULL);
    if (module_text) return complain(CUDA_ERROR_INVALID_VALUE, "a second module loaded (one a program)", NULL);
    module_text = strdup(text);
    *module = (CUmodule)&module_token;
    return module_text ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The .param count of entry `name` in the module, or -1 when it has no such entry. */
static int entry_params(const char *name) {
    size_t n = strlen(name);
    for (const char *at = strstr(module_text, ".entry "); at; at = strstr(at + 1, ".entry ")) {
        const char *p = at + 7;
        while (*p == ' ') p++;
        if (strncmp(p, name, n) != 0 || (p[n] != '(' && p[n] != ' ' && p[n] != '\n')) continue;
        const char *close = strchr(p, ')');
        int count = 0;
        for (const char *q = strstr(p, ".param"); q && close && q < close; q = strstr(q + 1, ".param")) count++;
        return count;
    }
    return -1;
}

/* Which of entry `name`'s `count` parameters its body names (`NAME_param_I`, from its `{` to the
 * next entry): an array of `count` flags. */
static unsigned char *entry_reads(const char *name, unsigned count) {
    unsigned char *read = calloc(count + 1, 1);
    size_t n = strlen(name);
    const char *at = strstr(module_text, ".entry "), *body = NULL;
    for (; at && !body; at = strstr(at + 1, ".entry ")) {
        const char *p = at + 7;
        while (*p == ' ') p++;
        if (strncmp(p, name, n) == 0 && (p[n] == '(' || p[n] == ' ' || p[n] == '\n')) body = strchr(p, '{');
    }
    const char *end = body ? strstr(body, ".entry ") : NULL;
    if (!end && body) end = body + strlen(body);
    for (const char *q = body; read && q && (q = strstr(q, "_param_")) != NULL && q < end; q += 7) {
        char *digits_end;
        unsigned long i = strtoul(q + 7, &digits_end, 10);
        if (digits_end != q + 7 && i < count && (size_t)(q - body) >= n && strncmp(q - n, name, n) == 0) read[i] = 1;
    }
    return read;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    if (module != (CUmodule)&module_token || !module_text) return complain(CUDA_ERROR_INVALID_HANDLE, "no module loaded", NULL);
    const char *hidden = getenv("TSR_FAKE_CUDA_HIDE"); /* a test's: this entry counts as missing */
    int params = hidden && strcmp(hidden, name) == 0 ? -1 : entry_params(name);
    if (params < 0) return complain(CUDA_ERROR_NOT_FOUND, "no .entry in the module named", name);
    if (function_count == MAX_FUNCTIONS) return complain(CUDA_ERROR_OUT_OF_MEMORY, "too many functions", NULL);
    functions[function_count] = (struct Function){strdup(name), (unsigned)params, entry_reads(name, (unsigned)params),
                                                  CUDA_STATIC_SHARED_LIMIT};
    *function = (CUfunction)&functions[function_count++];
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
    if (module != (CUmodule)&module_token || !module_text) return complain(CUDA_ERROR_INVALID_HANDLE, "unloading no module", NULL);
    free(module_text);
    module_text = NULL;
    return CUDA_SUCCESS;
}

static struct Function *function_of(CUfunction f) {
    struct Function *fn = (struct Function *)f;
    return fn >= functions && fn < functions + function_count ? fn : NULL;
}

CUresult cuFuncSetAttribute(CUfunction f, int attribute, int value) {
    struct Function *fn = function_of(f);
    if (!fn) return complain(CUDA_ERROR_INVALID_HANDLE, "an attribute of an unknown function", NULL);
    if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (value < 0 || value > OPT_IN_SHARED_LIMIT)
            return complain(CUDA_ERROR_INVALID_VALUE, "more dynamic shared memory than a Hopper GPU has, for", fn->name);
        fn->shared_allowed = value;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
    if (bytes == 0) return complain(CUDA_ERROR_INVALID_VALUE, "an allocation of 0 bytes", NULL);
    if (allocation_count == MAX_ALLOCATIONS) return complain(CUDA_ERROR_OUT_OF_MEMORY, "too many allocations", NULL);
    char *at = malloc(bytes);
    if (!at) return CUDA_ERROR_OUT_OF_MEMORY;
    allocations[allocation_count++] = (struct Allocation){at, bytes};
    *pointer = (CUdeviceptr)(uintptr_t)at;
    return CUDA_SUCCESS;
}

/* The allocation holding [pointer, pointer + bytes), or NULL. */
static struct Allocation *allocation_of(CUdeviceptr pointer, size_t bytes) {
    for (unsigned i = 0; i < allocation_count; i++) {
        uintptr_t start = (uintptr_t)allocations[i].at;
        if (pointer >= start && pointer - start <= allocations[i].bytes && bytes <= allocations[i].bytes - (pointer - start))
            return &allocations[i];
    }
    return NULL;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
    for (unsigned i = 0; i < allocation_count; i++)
        if (allocations[i].at == (char *)(uintptr_t)pointer) {
            free(allocations[i].at);
            allocations[i] = allocations[--allocation_count];
            return CUDA_SUCCESS;
        }
    return complain(CUDA_ERROR_INVALID_VALUE, "freeing memory that is not a live allocation", NULL);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr to, const void *from, size_t bytes) {
    if (!allocation_of(to, bytes)) return complain(CUDA_ERROR_INVALID_VALUE, "a copy to the device past its allocation", NULL);
    memcpy((void *)(uintptr_t)to, from, bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *to, CUdeviceptr from, size_t bytes) {
    if (!allocation_of(from, bytes)) return complain(CUDA_ERROR_INVALID_VALUE, "a copy from the device past its allocation", NULL);
    memcpy(to, (const void *)(uintptr_t)from, bytes);
    return CUDA_SUCCESS;
}

/* Whether a launch of fn with this grid, block, shared memory and parameters is one the driver
 * takes; complains (and returns the error) when not. */
static CUresult check_launch(const struct Function *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, void **params, void **extra) {
    if (!gx || !gy || !gz || gx > 0x7fffffffu || gy > 65535 || gz > 65535)
        return complain(CUDA_ERROR_INVALID_VALUE, "a grid out of range, launching", fn->name);
    if (!bx || !by || !bz || (unsigned long long)bx * by * bz > 1024 || bz > 64)
        return complain(CUDA_ERROR_INVALID_VALUE, "a block out of range, launching", fn->name);
    if (shared > (unsigned)fn->shared_allowed)
        return complain(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "more dynamic shared memory than allowed, launching", fn->name);
    if (extra) return complain(CUDA_ERROR_INVALID_VALUE, "parameters through `extra`, launching", fn->name);
    if (fn->params && !params) return complain(CUDA_ERROR_INVALID_VALUE, "no parameters, launching", fn->name);
    for (unsigned i = 0; i < fn->params; i++)
        if (!params[i]) return complain(CUDA_ERROR_INVALID_VALUE, "a NULL parameter pointer, launching", fn->name);
    return CUDA_SUCCESS;
}

/* Appends `line` to the file that environment variable `variable` names, if set. */
static CUresult append_to(const char *variable, const char *line) {
    const char *path = getenv(variable);
    if (!path || !path[0]) return CUDA_SUCCESS;
    FILE *out = fopen(path, "a");
    if (!out) return complain(CUDA_ERROR_INVALID_VALUE, "cannot append to the file of", variable);
    fprintf(out, "%s\n", line);
    fclose(out);
    return CUDA_SUCCESS;
}

/* A kernel ran: its name into TSR_FAKE_CUDA_TRACE, and into TSR_FAKE_CUDA_VALUES its name and
 * the values of the parameters its code reads (every parameter is 8 bytes: an index symbol, a
 * word of the run's key, or a device pointer, written `*` since allocations differ from run to
 * run; a parameter the code never reads is `-`). */
static CUresult record_launch(const struct Function *fn, const int64_t *values) {
    CUresult r = append_to("TSR_FAKE_CUDA_TRACE", fn->name);
    const char *path = getenv("TSR_FAKE_CUDA_VALUES");
    if (r != CUDA_SUCCESS || !path || !path[0]) return r;
    size_t cap = strlen(fn->name) + 24 * (size_t)fn->params + 2, used;
    char *line = malloc(cap);
    if (!line) return CUDA_ERROR_OUT_OF_MEMORY;
    used = (size_t)snprintf(line, cap, "%s", fn->name);
    for (unsigned i = 0; i < fn->params; i++)
        used += (size_t)(!fn->read[i]                              ? snprintf(line + used, cap - used, " -")
                         : allocation_of((CUdeviceptr)values[i], 0) ? snprintf(line + used, cap - used, " *")
                                                                   : snprintf(line + used, cap - used, " %lld", (long long)values[i]));
    r = append_to("TSR_FAKE_CUDA_VALUES", line);
    free(line);
    return r;
}

/* The parameters' values at this moment (the driver copies them when a launch or a node is made). */
static int64_t *values_of(const struct Function *fn, void **params) {
    int64_t *values = calloc(fn->params + 1, sizeof *values);
    for (unsigned i = 0; values && i < fn->params; i++) memcpy(&values[i], params[i], sizeof *values);
    return values;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream stream, void **params, void **extra) {
    (void)stream;
    struct Function *fn = function_of(f);
    if (!fn) return complain(CUDA_ERROR_INVALID_HANDLE, "a launch of an unknown function", NULL);
    CUresult r = check_launch(fn, gx, gy, gz, bx, by, bz, shared, params, extra);
    int64_t *values = r == CUDA_SUCCESS ? values_of(fn, params) : NULL;
    if (r == CUDA_SUCCESS && !values) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) r = record_launch(fn, values);
    free(values);
    return r;
}

#ifndef FAKE_NO_GRAPHS /* -DFAKE_NO_GRAPHS: a driver older than CUDA 11.4, without them */
/* ---- Graphs: a chain of kernel nodes, replayed in order -------------------------------------------- *
 *
 * A node keeps its function and its parameters' values as they were when it was made (or, in an
 * instantiated graph, last set), as the driver does.  The runtime makes each graph a chain, every
 * node after the one made before it: anything else is refused, since replaying in the order of
 * making is right only for a chain.  TSR_FAKE_CUDA_VALUES gets a line "instantiate N" for each
 * instantiated graph of N nodes and "graph N" for each launch of one, before its kernels' lines;
 * TSR_FAKE_CUDA_REFUSE_GRAPHS=1 makes every instantiation fail, TSR_FAKE_CUDA_REFUSE_GRAPH_LAUNCHES=1
 * every launch of a graph. */

struct CUgraphNode_st {
    struct CUgraph_st *graph;
    unsigned index;
    const struct Function *fn;
    int64_t *values;
};
struct CUgraph_st {
    struct CUgraphNode_st **nodes;
    unsigned count;
};
struct CUgraphExec_st {
    struct CUgraph_st *from;
    int64_t **values; /* per node: the exec's own copy */
    unsigned count;
};

CUresult cuGraphCreate(CUgraph *graph, unsigned flags) {
    if (flags) return complain(CUDA_ERROR_INVALID_VALUE, "cuGraphCreate flags not 0", NULL);
    *graph = calloc(1, sizeof **graph);
    return *graph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *after, size_t after_count,
                                 const CuKernelNodeParams *p) {
    struct Function *fn = p ? function_of(p->func) : NULL;
    if (!graph || !fn) return complain(CUDA_ERROR_INVALID_HANDLE, "a kernel node of an unknown graph or function", NULL);
    CUresult r = check_launch(fn, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
                              p->sharedMemBytes, p->kernelParams, p->extra);
    if (r != CUDA_SUCCESS) return r;
    if (after_count != (graph->count ? 1u : 0u) || (graph->count && after[0] != graph->nodes[graph->count - 1]))
        return complain(CUDA_ERROR_INVALID_VALUE, "a kernel node not after the one made before it (not a chain)", fn->name);
    struct CUgraphNode_st **grown = realloc(graph->nodes, (graph->count + 1) * sizeof *grown);
    struct CUgraphNode_st *n = calloc(1, sizeof *n);
    if (grown) graph->nodes = grown;
    if (!grown || !n || !(n->values = values_of(fn, p->kernelParams))) return CUDA_ERROR_OUT_OF_MEMORY;
    *n = (struct CUgraphNode_st){graph, graph->count, fn, n->values};
    graph->nodes[graph->count++] = n;
    *node = n;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    const char *refuse = getenv("TSR_FAKE_CUDA_REFUSE_GRAPHS");
    if (refuse && strcmp(refuse, "1") == 0) return complain(CUDA_ERROR_INVALID_VALUE, "graphs refused (TSR_FAKE_CUDA_REFUSE_GRAPHS)", NULL);
    if (!graph || flags) return complain(CUDA_ERROR_INVALID_VALUE, "instantiating no graph, or with flags", NULL);
    struct CUgraphExec_st *e = calloc(1, sizeof *e);
    if (!e || !(e->values = calloc(graph->count + 1, sizeof *e->values))) return CUDA_ERROR_OUT_OF_MEMORY;
    e->from = graph;
    e->count = graph->count;
    for (unsigned i = 0; i < graph->count; i++) {
        const struct CUgraphNode_st *n = graph->nodes[i];
        if (!(e->values[i] = malloc((n->fn->params + 1) * sizeof **e->values))) return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(e->values[i], n->values, n->fn->params * sizeof **e->values);
    }
    char line[64];
    snprintf(line, sizeof line, "instantiate %u", e->count);
    *exec = e;
    return append_to("TSR_FAKE_CUDA_VALUES", line);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node, const CuKernelNodeParams *p) {
    if (!exec || !node || node->graph != exec->from || node->index >= exec->count)
        return complain(CUDA_ERROR_INVALID_HANDLE, "setting the parameters of a node not in the graph", NULL);
    if (!p || function_of(p->func) != node->fn)
        return complain(CUDA_ERROR_INVALID_VALUE, "a node's parameters set with another function", node->fn->name);
    CUresult r = check_launch(node->fn, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
                              p->sharedMemBytes, p->kernelParams, p->extra);
    int64_t *values = r == CUDA_SUCCESS ? values_of(node->fn, p->kernelParams) : NULL;
    if (r != CUDA_SUCCESS || !values) return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    free(exec->values[node->index]);
    exec->values[node->index] = values;
    return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    const char *refuse = getenv("TSR_FAKE_CUDA_REFUSE_GRAPH_LAUNCHES");
    if (refuse && strcmp(refuse, "1") == 0) return complain(CUDA_ERROR_INVALID_VALUE, "graph launches refused (TSR_FAKE_CUDA_REFUSE_GRAPH_LAUNCHES)", NULL);
    if (!exec) return complain(CUDA_ERROR_INVALID_HANDLE, "launching no graph", NULL);
    if (stream) return complain(CUDA_ERROR_INVALID_HANDLE, "a graph launched on a stream the runtime never made", NULL);
    char line[64];
    snprintf(line, sizeof line, "graph %u", exec->count);
    CUresult r = append_to("TSR_FAKE_CUDA_VALUES", line);
    for (unsigned i = 0; i < exec->count && r == CUDA_SUCCESS; i++) r = record_launch(exec->from->nodes[i]->fn, exec->values[i]);
    return r;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
    if (!exec) return complain(CUDA_ERROR_INVALID_HANDLE, "destroying no graph", NULL);
    for (unsigned i = 0; i < exec->count; i++) free(exec->values[i]);
    free(exec->values);
    free(exec);
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
    if (!graph) return complain(CUDA_ERROR_INVALID_HANDLE, "destroying no graph", NULL);
    for (unsigned i = 0; i < graph->count; i++) {
        free(graph->nodes[i]->values);
        free(graph->nodes[i]);
    }
    free(graph->nodes);
    free(graph);
    return CUDA_SUCCESS;
}
#endif

CUresult cuGetErrorName(CUresult code, const char **name) {
    *name = code == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult code, const char **text) {
    *text = code == CUDA_SUCCESS ? "no error" : "refused by the fake CUDA driver (see its message above)";
    return CUDA_SUCCESS;
}
