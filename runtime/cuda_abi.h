/* cuda_abi.h — the CUDA driver API's types and the codes tsrc uses, declared from the driver's
 * ABI (cuda.h) so that nothing needs the CUDA toolkit: runtime/cuda.c calls the driver it loads
 * with them, and tests/gpu/fake_cuda.c implements a stand-in driver with them.
 *
 * Requires: nothing. */
#ifndef TSR_CUDA_ABI_H
#define TSR_CUDA_ABI_H

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;

/* A kernel node's launch (CUDA_KERNEL_NODE_PARAMS_v2): the fields up to `extra` are v1's, so
 * the driver's v1 entry points (CUDA 11) read this struct too.  `kern` and `ctx` stay NULL: the
 * node launches `func` in the current context.  The driver copies the parameters' values when
 * the node is made or its parameters set. */
typedef struct CuKernelNodeParams {
    CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ;
    unsigned blockDimX, blockDimY, blockDimZ;
    unsigned sharedMemBytes;
    void **kernelParams;
    void **extra;
    void *kern;
    CUcontext ctx;
} CuKernelNodeParams;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CUDA_STATIC_SHARED_LIMIT = 48 << 10, /* a block's shared memory without asking for more */
};

#endif
