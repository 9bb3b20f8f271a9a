/* fake_cuda.c — a stand-in for the CUDA driver (libcuda.so.1) that checks how a --target=cuda
 * program's host side uses it, on a machine without a GPU (tests/gpu/fake_driver.sh; loaded
 * through TSR_CUDA_DRIVER, runtime/cuda.c).
 *
 * What it does: implements the driver entry points runtime/cuda.c resolves, with one pretend
 * device whose memory is the host's.  Kernels are not run (a launch changes no memory), so a
 * program's printed values are not its results; what is checked is the host side around them:
 *   - a module is PTX text (".version", ".entry"), and every function asked for by name is an
 *     .entry of it;
 *   - a launch names a function of the loaded module, with a grid of at least one block a
 *     dimension (at most 2^31 - 1 along x, 65535 along y and z), at most 1024 threads a block,
 *     dynamic shared memory within 48 KiB or what cuFuncSetAttribute allowed that function (at
 *     most 227 KiB), and one non-NULL parameter pointer for each .param of the entry;
 *   - copies stay within one allocation, and frees name a live one.
 * A violation is printed on stderr ("fake CUDA driver: …") and the call fails with an error code,
 * which the runtime turns into the program's error, so the program exits 1.  Each launch is
 * appended to the file TSR_FAKE_CUDA_TRACE names (if set) as one line "NAME".  A function named
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

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned options, int *keys, void **values) {
    (void)options, (void)keys, (void)values;
    const char *text = image;
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

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    if (module != (CUmodule)&module_token || !module_text) return complain(CUDA_ERROR_INVALID_HANDLE, "no module loaded", NULL);
    const char *hidden = getenv("TSR_FAKE_CUDA_HIDE"); /* a test's: this entry counts as missing */
    int params = hidden && strcmp(hidden, name) == 0 ? -1 : entry_params(name);
    if (params < 0) return complain(CUDA_ERROR_NOT_FOUND, "no .entry in the module named", name);
    if (function_count == MAX_FUNCTIONS) return complain(CUDA_ERROR_OUT_OF_MEMORY, "too many functions", NULL);
    functions[function_count] = (struct Function){strdup(name), (unsigned)params, CUDA_STATIC_SHARED_LIMIT};
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

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream stream, void **params, void **extra) {
    (void)stream;
    struct Function *fn = function_of(f);
    if (!fn) return complain(CUDA_ERROR_INVALID_HANDLE, "a launch of an unknown function", NULL);
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
    const char *trace = getenv("TSR_FAKE_CUDA_TRACE");
    if (trace && trace[0]) {
        FILE *out = fopen(trace, "a");
        if (!out) return complain(CUDA_ERROR_INVALID_VALUE, "cannot append to TSR_FAKE_CUDA_TRACE", trace);
        fprintf(out, "%s\n", fn->name);
        fclose(out);
    }
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult code, const char **name) {
    *name = code == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult code, const char **text) {
    *text = code == CUDA_SUCCESS ? "no error" : "refused by the fake CUDA driver (see its message above)";
    return CUDA_SUCCESS;
}
