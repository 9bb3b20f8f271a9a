/* cuda_test.c — unit tests of GPU states (runtime/cuda.c and the GPU section of model.c).
 *
 * What it does: writes model images byte by byte (two buffers x and y of 256 floats, one index
 * symbol k, and a GPU section with a hand-written PTX kernel y = 2x + k), then checks that
 * (a) with TSR_CUDA_DRIVER naming a missing library, state creation fails with TSR_ERR_GPU and a
 * message naming the library and --target=cuda; (b) malformed GPU sections (a buffer out of
 * range, too many threads a block, a zero grid, no kernels, has_gpu 2, every truncation of the
 * section) give TSR_ERR_IMAGE "the model image is malformed"; (c) for an image without a GPU
 * section, tsr_state_host_buffer returns s->buffers[b], the sync calls return TSR_OK and a launch
 * is refused; (d) the GPU a process opens (TSR_CUDA_DEVICE, else its rank on its machine modulo
 * the GPUs it sees).  When the real driver (libcuda.so.1) loads and finds a GPU, it also runs the kernel:
 * values cross both ways only as the coherence says (launch, host writes, checkpoint save and
 * load of device-newer buffers, more than 48 KiB of dynamic shared memory), a PTX that does not
 * assemble names the arch and the JIT's log, and a kernel that traps fails at the next
 * synchronising call with TSR_ERR_GPU; two kernels launched as a run (tsr_gpu_launch_run: a CUDA
 * graph, replayed) read the index symbol's value of each replay.  Without a GPU that part is
 * skipped (and says so).
 * Requires libtsr (-Iruntime: internal.h for the image format).  Writes and removes one file
 * in /tmp.  One line per failure; last line "N passed, N failed"; exits 1 on any failure. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#include "check.h"

/* ---- Images ------------------------------------------------------------------------------------ */

enum { CELLS = 256 };

typedef struct Image {
    unsigned char bytes[8192];
    size_t size, gpu_at; /* gpu_at: where the has_gpu byte is */
} Image;

static void put(Image *im, const void *p, size_t n) {
    if (im->size + n > sizeof im->bytes) abort();
    memcpy(im->bytes + im->size, p, n);
    im->size += n;
}
static void u8(Image *im, uint8_t v) { put(im, &v, 1); }
static void u32(Image *im, uint32_t v) { put(im, &v, 4); }
static void u64(Image *im, uint64_t v) { put(im, &v, 8); }
static void f64(Image *im, double v) { put(im, &v, 8); }
static void str(Image *im, const char *s) {
    u32(im, (uint32_t)strlen(s));
    put(im, s, strlen(s));
}

static void buffer(Image *im, const char *name, uint8_t kind, uint8_t init, double fill) {
    str(im, name);
    str(im, "256");
    u8(im, kind);
    u8(im, init);
    u8(im, 0); /* not virtual */
    u8(im, 0); /* flags */
    u8(im, 0); /* dtype: f32 */
    u32(im, 1);
    u64(im, CELLS);
    f64(im, fill);
    f64(im, 0);
    u64(im, 0);
}

/* x (a constant 1.5) and y (a parameter, 0) and symbol k (range 10); no data, prints, options
 * or actions.  The GPU section is added by the caller. */
static void image_start(Image *im) {
    im->size = 0;
    put(im, TSR_IMAGE_MAGIC, 4);
    u32(im, TSR_IMAGE_VERSION);
    u64(im, 0);
    str(im, "gputest");
    u64(im, 0);     /* the program's hash */
    u32(im, 0);     /* needs no CPU extension */
    str(im, "");
    u32(im, 1);
    str(im, "k");
    u64(im, 10);
    put(im, "", 1); /* not a run-time size */
    u32(im, 0);     /* its own leader */
    u32(im, 2);
    buffer(im, "x", TSR_BUF_CONSTANT, TSR_INIT_FILL, 1.5);
    buffer(im, "y", TSR_BUF_PARAM, TSR_INIT_FILL, 0);
    for (int i = 0; i < 4; i++) u32(im, 0); /* data, prints, options, actions */
    im->gpu_at = im->size;
}

static void image_finish(Image *im) {
    uint64_t sum = tsr_image_checksum(im->bytes + TSR_IMAGE_HEADER, im->size - TSR_IMAGE_HEADER);
    memcpy(im->bytes + TSR_IMAGE_HEADER - 8, &sum, 8);
}

/* y[i] = 2 x[i] + k for i < 256: parameters k (the symbol, by value), the run's random key
 * (seed and run number, unused here), x, y. */
static const char axpy_ptx[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry axpy(.param .u64 p_k, .param .u64 p_seed, .param .u64 p_run, .param .u64 p_x, .param .u64 p_y)\n{\n"
    "  .reg .pred %p<2>;\n  .reg .b32 %r<4>;\n  .reg .f32 %f<4>;\n  .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [p_k];\n  ld.param.u64 %rd2, [p_x];\n  ld.param.u64 %rd3, [p_y];\n"
    "  cvta.to.global.u64 %rd2, %rd2;\n  cvta.to.global.u64 %rd3, %rd3;\n"
    "  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n"
    "  mad.lo.s32 %r1, %r2, %r3, %r1;\n  setp.ge.u32 %p1, %r1, 256;\n  @%p1 bra DONE;\n"
    "  mul.wide.u32 %rd4, %r1, 4;\n  add.s64 %rd5, %rd2, %rd4;\n  ld.global.f32 %f1, [%rd5];\n"
    "  cvt.rn.f32.s64 %f2, %rd1;\n  fma.rn.f32 %f3, %f1, 0f40000000, %f2;\n"
    "  add.s64 %rd6, %rd3, %rd4;\n  st.global.f32 [%rd6], %f3;\nDONE:\n  ret;\n}\n"
    ".visible .entry boom(.param .u64 p_k, .param .u64 p_seed, .param .u64 p_run)\n{\n  trap;\n}\n";

typedef struct Kernel {
    const char *name;
    uint32_t grid[3], block[3], shared, param_count, buffers[2];
    uint8_t writes[2];
    uint8_t scalars; /* TSR_GPU_READS_* */
} Kernel;

/* axpy over x and y in one block of 256 threads; then the same with 64 KiB of dynamic shared
 * memory; then the kernel that traps. */
static const Kernel good_kernels[] = {
    {"axpy", {1, 1, 1}, {256, 1, 1}, 0, 2, {0, 1}, {0, 1}, TSR_GPU_READS_SYMBOLS},
    {"axpy", {2, 1, 1}, {128, 1, 1}, 64 << 10, 2, {0, 1}, {0, 1}, TSR_GPU_READS_SYMBOLS},
    {"boom", {1, 1, 1}, {1, 1, 1}, 0, 0, {0, 0}, {0, 0}, 0},
};

static void gpu_section(Image *im, const char *ptx, const Kernel *kernels, uint32_t count) {
    u8(im, 1);
    str(im, ptx);
    str(im, "sm_52");
    /* A cubin no GPU runs (not an ELF image): the runtime falls back to the PTX, as on a GPU of
     * another architecture than the cubin's. */
    u64(im, 8);
    put(im, "notcubin", 8);
    u32(im, count);
    for (uint32_t k = 0; k < count; k++) {
        const Kernel *kn = &kernels[k];
        str(im, kn->name);
        for (int d = 0; d < 3; d++) u32(im, kn->grid[d]);
        for (int d = 0; d < 3; d++) u32(im, kn->block[d]);
        u32(im, kn->shared);
        u8(im, kn->scalars);
        u32(im, kn->param_count);
        for (uint32_t p = 0; p < kn->param_count; p++) {
            u32(im, kn->buffers[p]);
            u8(im, kn->writes[p]);
        }
    }
}

static void build(Image *im, const char *ptx, const Kernel *kernels, uint32_t count) {
    image_start(im);
    if (kernels) gpu_section(im, ptx, kernels, count);
    else u8(im, 0);
    image_finish(im);
}

/* ---- Errors -------------------------------------------------------------------------------------- */

static int last_status;
static void hook(int status, const char *message, void *user) { last_status = status; }

/* Creating a state from `im` fails with `status` and a message containing `text`. */
static void expect_failure(const Image *im, int status, const char *text, const char *what) {
    last_status = TSR_OK;
    tsr_state *s = tsr_state_create(im->bytes, im->size, 1);
    char detail[1200];
    snprintf(detail, sizeof detail, "status %d, message '%s'", last_status, tsr_last_error());
    check(!s && last_status == status && strstr(tsr_last_error(), text), what, detail);
    tsr_state_destroy(s);
}

static void test_no_driver(void) {
    Image im;
    build(&im, axpy_ptx, good_kernels, 1);
    setenv("TSR_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    expect_failure(&im, TSR_ERR_GPU, "no CUDA driver: cannot load /nonexistent/libcuda.so.1", "missing driver");
    expect_failure(&im, TSR_ERR_GPU, "--target=cuda", "missing driver: says why it is needed");
    setenv("TSR_CUDA_DRIVER", "libc.so.6", 1); /* a library, but no driver */
    expect_failure(&im, TSR_ERR_GPU, "lacks cuInit", "a library that is not the driver");
    unsetenv("TSR_CUDA_DRIVER");
    check(strcmp(tsr_status_text(TSR_ERR_GPU), "GPU error") == 0, "status text", tsr_status_text(TSR_ERR_GPU));
}

/* A GPU buffer's bytes (no GPU needed): every cell size, 1-byte cells (u8, bool) included, which
 * an earlier bound check cast to -1 and refused as out of memory; sizes past a size_t refused. */
static void test_buffer_bytes(void) {
    size_t bytes = 0;
    check(tsr_gpu_buffer_bytes(6, 1, &bytes) && bytes == 6, "6 u8 cells are 6 bytes", NULL);
    check(tsr_gpu_buffer_bytes(0, 1, &bytes) && bytes == 0, "no cells, no bytes", NULL);
    check(tsr_gpu_buffer_bytes(5, 2, &bytes) && bytes == 10, "5 bf16 cells are 10 bytes", NULL);
    check(tsr_gpu_buffer_bytes(1 << 20, 4, &bytes) && bytes == 4u << 20, "2^20 f32 cells are 4 MiB", NULL);
    check(tsr_gpu_buffer_bytes(3, 8, &bytes) && bytes == 24, "3 f64 cells are 24 bytes", NULL);
    check(tsr_gpu_buffer_bytes(INT64_MAX, 1, &bytes) && bytes == (size_t)INT64_MAX, "the largest count of bytes", NULL);
    check(!tsr_gpu_buffer_bytes(INT64_MAX, 4, &bytes), "2^63 - 1 f32 cells do not fit", NULL);
    check(!tsr_gpu_buffer_bytes((int64_t)(SIZE_MAX / 8) + 1, 8, &bytes), "past SIZE_MAX in f64 cells", NULL);
    check(!tsr_gpu_buffer_bytes(-1, 4, &bytes), "a negative count", NULL);
}

/* Which GPU a process opens (no GPU needed): TSR_CUDA_DEVICE's number for every process;
 * else its rank among its machine's processes, modulo the GPUs it sees. */
static void test_device_choice(void) {
    check(tsr_gpu_device_for(8, NULL, 0) == 0 && tsr_gpu_device_for(8, "", 0) == 0, "one process: GPU 0", NULL);
    bool each_own = true;
    for (int local = 0; local < 8; local++) each_own = each_own && tsr_gpu_device_for(8, NULL, local) == local;
    check(each_own, "eight processes on a machine of eight GPUs: one each, in rank order", NULL);
    check(tsr_gpu_device_for(1, NULL, 5) == 0, "a process that sees only its own GPU (--gpus-per-task) takes it", NULL);
    check(tsr_gpu_device_for(2, NULL, 2) == 0 && tsr_gpu_device_for(2, NULL, 3) == 1,
          "four processes on two GPUs share them in turn", NULL);
    check(tsr_gpu_device_for(8, "3", 5) == 3, "TSR_CUDA_DEVICE wins over the local rank", NULL);
    last_status = TSR_OK;
    check(tsr_gpu_device_for(2, "2", 0) == -1 && last_status == TSR_ERR_GPU &&
              strcmp(tsr_last_error(), "TSR_CUDA_DEVICE=2: there is no such GPU (the driver found 2: 0..1)") == 0,
          "TSR_CUDA_DEVICE past the last GPU is an error naming the range", tsr_last_error());
    check(tsr_gpu_device_for(2, "one", 0) == -1 &&
              strcmp(tsr_last_error(), "TSR_CUDA_DEVICE=one is not a GPU's number (the driver found 2: 0..1)") == 0 &&
              tsr_gpu_device_for(2, "-1", 0) == -1 && tsr_gpu_device_for(2, "1x", 0) == -1,
          "TSR_CUDA_DEVICE that is not a GPU's number is an error that says so", NULL);
    check(tsr_gpu_device_for(0, NULL, 0) == -1, "no GPU at all is an error", NULL);
}

static void test_malformed(void) {
    static const struct {
        const char *what;
        Kernel kernel;
    } bad[] = {
        {"buffer out of range", {"axpy", {1, 1, 1}, {256, 1, 1}, 0, 2, {0, 2}, {0, 1}, 0}},
        {"too many threads a block", {"axpy", {1, 1, 1}, {32, 32, 2}, 0, 2, {0, 1}, {0, 1}, 0}},
        {"block z over 64", {"axpy", {1, 1, 1}, {1, 1, 128}, 0, 2, {0, 1}, {0, 1}, 0}},
        {"zero grid", {"axpy", {1, 0, 1}, {256, 1, 1}, 0, 2, {0, 1}, {0, 1}, 0}},
        {"zero block", {"axpy", {1, 1, 1}, {0, 1, 1}, 0, 2, {0, 1}, {0, 1}, 0}},
        {"grid y over 65535", {"axpy", {1, 70000, 1}, {1, 1, 1}, 0, 2, {0, 1}, {0, 1}, 0}},
        {"writes not 0 or 1", {"axpy", {1, 1, 1}, {256, 1, 1}, 0, 2, {0, 1}, {0, 7}, 0}},
        {"no name", {"", {1, 1, 1}, {256, 1, 1}, 0, 2, {0, 1}, {0, 1}, 0}},
        {"huge shared memory", {"axpy", {1, 1, 1}, {256, 1, 1}, 64u << 20, 2, {0, 1}, {0, 1}, 0}},
        {"scalars with an unknown bit", {"axpy", {1, 1, 1}, {256, 1, 1}, 0, 2, {0, 1}, {0, 1}, 4}},
    };
    Image im;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        build(&im, axpy_ptx, &bad[i].kernel, 1);
        expect_failure(&im, TSR_ERR_IMAGE, "the model image is malformed", bad[i].what);
    }
    build(&im, axpy_ptx, good_kernels, 0);
    expect_failure(&im, TSR_ERR_IMAGE, "the model image is malformed", "no kernels");
    build(&im, "", good_kernels, 1);
    expect_failure(&im, TSR_ERR_IMAGE, "the model image is malformed", "no PTX");
    image_start(&im);
    u8(&im, 2);
    image_finish(&im);
    expect_failure(&im, TSR_ERR_IMAGE, "the model image is malformed", "has_gpu 2");
    /* Every cut of the section (the checksum made right): malformed, never a crash. */
    Image whole;
    build(&whole, axpy_ptx, good_kernels, 3);
    unsigned cuts_ok = 0, cuts = 0;
    for (size_t n = whole.gpu_at; n < whole.size; n++, cuts++) {
        im = whole;
        im.size = n;
        image_finish(&im);
        last_status = TSR_OK;
        tsr_state *s = tsr_state_create(im.bytes, im.size, 1);
        cuts_ok += !s && last_status == TSR_ERR_IMAGE && strstr(tsr_last_error(), "malformed");
        tsr_state_destroy(s);
    }
    char detail[64];
    snprintf(detail, sizeof detail, "%u of %u", cuts_ok, cuts);
    check(cuts_ok == cuts, "every truncation of the GPU section is malformed", detail);
}

static void test_cpu_state(void) {
    Image im;
    build(&im, NULL, NULL, 0);
    tsr_state *s = tsr_state_create(im.bytes, im.size, 1);
    check(s != NULL, "CPU state", tsr_last_error());
    if (!s) return;
    check(tsr_state_host_buffer(s, 0) == s->buffers[0] && tsr_state_host_buffer(s, 1) == s->buffers[1],
          "CPU state: host_buffer is buffers[b]", NULL);
    last_status = TSR_OK;
    check(tsr_state_host_buffer(s, 2) == NULL && last_status == TSR_ERR_ARGUMENT, "CPU state: bad buffer index",
          tsr_last_error());
    check(tsr_state_sync_host(s) == TSR_OK && tsr_state_sync_device(s) == TSR_OK, "CPU state: syncs are no-ops",
          NULL);
    check(tsr_gpu_launch(s, 0) == TSR_ERR_ARGUMENT, "CPU state: a launch is refused", tsr_last_error());
    check(tsr_gpu_launch_run(s, 0, 2) == TSR_ERR_ARGUMENT && tsr_gpu_launch_run(NULL, 0, 2) == TSR_ERR_ARGUMENT,
          "CPU state: a run of launches is refused", tsr_last_error());
    check(tsr_gpu_launch(NULL, 0) == TSR_ERR_ARGUMENT && tsr_state_sync_host(NULL) == TSR_ERR_ARGUMENT &&
              tsr_state_sync_device(NULL) == TSR_ERR_ARGUMENT && tsr_state_host_buffer(NULL, 0) == NULL,
          "NULL state", NULL);
    tsr_state_destroy(s);
}

/* ---- A real GPU (skipped without one) ------------------------------------------------------------- */

/* Whether y holds 2·x + k everywhere (read through the accessor). */
static bool y_is(tsr_state *s, float x, float k) {
    const float *y = tsr_state_host_buffer(s, 1);
    for (int i = 0; y && i < CELLS; i++)
        if (y[i] != 2 * x + k) return false;
    return y != NULL;
}

static void test_gpu(void) {
    Image im;
    build(&im, axpy_ptx, good_kernels, 3);
    last_status = TSR_OK;
    tsr_state *s = tsr_state_create(im.bytes, im.size, 1);
    if (!s) {
        check(last_status == TSR_ERR_GPU, "GPU state: fails only for want of a GPU", tsr_last_error());
        printf("skipped the GPU tests: %s\n", tsr_last_error());
        return;
    }
    printf("running the GPU tests\n");
    tsr_state_set_symbol(s, 0, 3);
    check(tsr_gpu_launch(s, 0) == TSR_OK, "launch", tsr_last_error());
    check(s->buffers[1][0] == 0, "a launch leaves the host copy alone", NULL);
    check(y_is(s, 1.5f, 3), "device→host on access", tsr_last_error());
    float *x = tsr_state_host_buffer(s, 0);
    for (int i = 0; x && i < CELLS; i++) x[i] = 4;
    tsr_state_set_symbol(s, 0, 5);
    check(tsr_gpu_launch(s, 1) == TSR_OK, "launch with 64 KiB of shared memory", tsr_last_error());
    check(tsr_state_sync_host(s) == TSR_OK && s->buffers[1][7] == 13, "host writes go to the device; sync_host",
          tsr_last_error());
    /* save must read the device's y; load must reach the device. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/tsr_cuda_test_%d.npz", (int)getpid());
    tsr_state_set_symbol(s, 0, 1);
    check(tsr_gpu_launch(s, 0) == TSR_OK && tsr_state_save(s, path) == TSR_OK, "save after a launch", tsr_last_error());
    float *y = tsr_state_host_buffer(s, 1);
    for (int i = 0; y && i < CELLS; i++) y[i] = -1;
    check(tsr_state_sync_device(s) == TSR_OK, "sync_device", tsr_last_error());
    check(tsr_state_load(s, path) == TSR_OK && y_is(s, 4, 1), "load: the saved values, not the device's",
          tsr_last_error());
    unlink(path);
    check(tsr_gpu_launch(s, 3) == TSR_ERR_ARGUMENT, "kernel number out of range", tsr_last_error());
    check(tsr_gpu_launch_run(s, 1, 3) == TSR_ERR_ARGUMENT && tsr_gpu_launch_run(s, 0, 0) == TSR_ERR_ARGUMENT,
          "a run of kernels out of range", tsr_last_error());
    /* Kernels 0 and 1 as one CUDA graph (made at the first launch, then replayed): each replay
     * gives the kernels, which read k, its value then; a host write between replays reaches the
     * device. */
    bool graphs_ok = true;
    for (int k = 2; k <= 6 && graphs_ok; k += 2) {
        tsr_state_set_symbol(s, 0, k);
        graphs_ok = tsr_gpu_launch_run(s, 0, 2) == TSR_OK && y_is(s, 4, (float)k);
    }
    check(graphs_ok, "a run of kernels as a CUDA graph, replayed with the index symbol's new values", tsr_last_error());
    x = tsr_state_host_buffer(s, 0);
    for (int i = 0; x && i < CELLS; i++) x[i] = 0.5f;
    check(tsr_gpu_launch_run(s, 0, 2) == TSR_OK && y_is(s, 0.5f, 6), "a replay after a host write reads it",
          tsr_last_error());
    Image bad;
    build(&bad, "this is not PTX", good_kernels, 1);
    expect_failure(&bad, TSR_ERR_GPU, "cannot load this program's PTX (arch sm_52)", "bad PTX");
    printf("bad PTX: %s\n", tsr_last_error());
    /* A kernel that traps (last: it spoils the context): the launch succeeds, the next wait fails and says so. */
    check(tsr_gpu_launch(s, 2) == TSR_OK, "launching a kernel that traps", tsr_last_error());
    last_status = TSR_OK;
    check(tsr_state_sync_host(s) == TSR_ERR_GPU && strstr(tsr_last_error(), "CUDA_ERROR"),
          "a trap surfaces at the next sync", tsr_last_error());
    tsr_state_destroy(s);
}

int main(void) {
    tsr_set_error_hook(hook, NULL);
    test_no_driver();
    test_device_choice();
    test_buffer_bytes();
    test_malformed();
    test_cpu_state();
    test_gpu();
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
