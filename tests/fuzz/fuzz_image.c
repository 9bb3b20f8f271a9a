/* fuzz_image.c — libFuzzer target over the runtime's model image reader (runtime/model.c).
 *
 * The checksum (runtime/image_format.h) refuses a damaged image before anything else is read, so a
 * fuzzer that flips bytes of an image only ever meets that check.  This target recomputes the
 * checksum after its changes, so that every table of the image is read as if a compiler had
 * written it: what is tested is that an image with a valid checksum but crafted contents is
 * refused (TSR_ERR_IMAGE, or another status with a message) or gives a state that works, and
 * never crashes, reads out of bounds, leaks or hangs.
 *
 * The images come from real programs, built once per process (fuzz_common.c's FUZZ_IMAGE stage)
 * from test and example programs that together use every table: data sets of every generator
 * and file kind, run-time sizes, prints (grids and formats), options, actions (save, load,
 * shuffle, record, plot, progress) and index loops.  An input is
 *     byte 0       which image (modulo their number)
 *     then 6-byte edits { u32 offset (modulo the image's size), u8 mode, u8 value }:
 *                  mode 0 sets the byte to value, 1 xors it, 2 writes a 32-bit count there
 *                  (0, 1, value, 0xffffffff, 0x7fffffff, 0x80000000, image size, … by value),
 *                  3 cuts the image at the offset
 * applied after the 16-byte header (magic, version, checksum), whose checksum is then set.
 * When a state results, the harness sets its run-time sizes, checks its symbols and sizes, runs
 * its prints (to /dev/null) and its shuffle, record, plot and progress actions (not save and load:
 * they name files), and destroys it.  Built and run by `make fuzz` (tools/fuzz.sh) with ASan and
 * UBSan; `make check` replays the inputs of tests/fuzz/regress/image/ through it (replay.c). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "internal.h"

/* Programs whose images seed the target (read from the source tree: make fuzz and make check
 * run at its top). */
static const char *const programs[] = {
    "docs/examples/checkpoint.tsr",   /* a generator's batches, options, save, loops */
    "tests/native/record_plot.tsr",   /* record, plot, progress, index loops */
    "tests/native/runtime_data.tsr",  /* a .npy file that gives a run-time size */
    "tests/native/runtime_train.tsr", /* run-time sizes of inputs, classes */
    "tests/native/data_files.tsr",    /* .npy and CSV data, prints */
    "tests/native/shuffle_together.tsr",  /* shuffles of several data items */
    "tests/native/generators.tsr",        /* every generator */
    "tests/native/options.tsr",           /* options read by prints and loops */
    "tests/native/print_format_limits.tsr", /* formats at their limits */
    "docs/examples/digits.tsr",           /* shuffles of data sets, formatted prints */
};
enum { PROGRAM_COUNT = sizeof programs / sizeof programs[0], EDIT = 6, MAX_CELLS = 1 << 18 };

static unsigned char *images[PROGRAM_COUNT];
static size_t image_sizes[PROGRAM_COUNT];
static unsigned image_count;

static void build_images(void) {
    static bool built;
    if (built) return;
    built = true;
    fuzz_quiet();
    for (unsigned i = 0; i < PROGRAM_COUNT; i++) {
        FILE *f = fopen(programs[i], "rb");
        if (!f) continue; /* a program renamed: the others still seed the target */
        char text[1 << 16];
        size_t len = fread(text, 1, sizeof text, f);
        fclose(f);
        FuzzJob job = {.text = text, .len = len, .stage = FUZZ_IMAGE};
        fuzz_compile(&job);
        if (!job.image) continue;
        images[image_count] = job.image;
        image_sizes[image_count++] = job.image_size;
    }
    if (image_count < 3) { /* the harness would test next to nothing */
        fprintf(stderr, "fuzz_image: only %u of the seed programs gave an image (run from the source tree)\n",
                image_count);
        abort();
    }
}

static uint32_t count_for(uint8_t value, size_t size) {
    static const uint32_t special[] = {0, 1, 2, 0xffffffffu, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 255, 65536};
    enum { SPECIAL = sizeof special / sizeof special[0] };
    if (value < SPECIAL) return special[value];
    if (value == SPECIAL) return (uint32_t)size;
    return value;
}

/* Use a state as a program would: sizes, checks, prints and the actions that touch no file. */
static void exercise(tsr_state *s) {
    const tsr_model *m = s->model;
    for (uint32_t i = 0; i < tsr_model_symbol_count(m); i++) tsr_state_set_symbol(s, i, 3);
    uint32_t sizes[64], n = 0;
    for (uint32_t i = 0; i < tsr_model_symbol_count(m) && n < 64; i++) sizes[n++] = i;
    tsr_state_check_sizes(s, sizes, n); /* a non-size symbol is an error, not a crash */
    tsr_state_check_symbols(s);
    tsr_state_begin_run(s);
    for (uint32_t p = 0; tsr_state_print(s, p) != TSR_ERR_ARGUMENT || strncmp(tsr_last_error(), "no print", 8) != 0; p++)
        if (p > 4096) abort(); /* the statuses must end in "no print statement" */
    for (uint32_t a = 0; a < 4096; a++) {
        const tsr_action *action = tsr_model_action(m, a);
        if (!action) break;
        if (action->kind == TSR_ACTION_SAVE || action->kind == TSR_ACTION_LOAD) continue;
        if (action->kind == TSR_ACTION_PROGRESS) tsr_state_progress(s, a, 1, 2);
        else tsr_state_action(s, a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    build_images();
    if (size < 1) return 0;
    unsigned which = data[0] % image_count;
    size_t n = image_sizes[which];
    unsigned char *image = malloc(n);
    if (!image) abort();
    memcpy(image, images[which], n);
    for (size_t e = 1; e + EDIT <= size; e += EDIT) {
        uint32_t at;
        memcpy(&at, data + e, 4);
        uint8_t mode = data[e + 4] % 4, value = data[e + 5];
        if (n <= TSR_IMAGE_HEADER) break;
        size_t offset = TSR_IMAGE_HEADER + at % (n - TSR_IMAGE_HEADER);
        if (mode == 0) image[offset] = value;
        else if (mode == 1) image[offset] ^= value;
        else if (mode == 2) {
            uint32_t c = count_for(value, n);
            memcpy(image + offset, &c, offset + 4 <= n ? 4 : n - offset);
        } else n = offset;
    }
    if (n >= TSR_IMAGE_HEADER) {
        uint64_t sum = tsr_image_checksum(image + TSR_IMAGE_HEADER, n - TSR_IMAGE_HEADER);
        memcpy(image + 8, &sum, 8);
    }
    /* tsr_state_create, in its two steps: an image whose tensors would need more than
     * MAX_CELLS floats is skipped between them (the runtime reports a failed allocation as
     * TSR_ERR_NOMEM, but the sanitizers and the fuzzer's memory limit count a huge one as a
     * finding, and printing a large one as a grid outlasts the fuzzer's time limit). */
    tsr_model *m = tsr_model_read(image, n);
    tsr_state *s = NULL;
    if (m) {
        uint64_t cells = 0;
        for (uint32_t b = 0; b < tsr_model_buffer_count(m); b++) {
            uint32_t rank;
            const int64_t *dims;
            int64_t count;
            uint8_t kind;
            if (!tsr_model_buffer_shape(m, b, &rank, &dims, &count, &kind)) continue;
            if (rank > 0 && dims[0] == 0) { /* a run-time length, which exercise() sets to 3 */
                count = 3;
                for (uint32_t a = 1; a < rank && count <= MAX_CELLS; a++)
                    count = dims[a] <= MAX_CELLS ? count * dims[a] : MAX_CELLS + 1;
            }
            cells += (uint64_t)count < MAX_CELLS ? (uint64_t)count : MAX_CELLS; /* no wrap-around */
        }
        if (cells > MAX_CELLS) {
            tsr_model_free(m);
            free(image);
            return 0;
        }
        s = tsr_state_create_model(m, 1, NULL);
    }
    if (s) { /* its prints and plots go to /dev/null, not the fuzzer's (or replay's) output */
        static int null_fd = -1;
        if (null_fd < 0 && (null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) abort();
        fflush(stdout);
        int saved = dup(1);
        if (saved < 0 || dup2(null_fd, 1) < 0) abort();
        exercise(s);
        fflush(stdout);
        if (dup2(saved, 1) < 0) abort();
        close(saved);
    } else if (!tsr_last_error()[0]) {
        abort(); /* a refusal says why */
    }
    tsr_state_destroy(s);
    free(image);
    return 0;
}
