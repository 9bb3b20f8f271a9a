/* wgmma_layout_test.c — the core-matrix layouts of the warpgroup products (compiler/ir/ir.h
 * IrCoreLayout, ir_core_cell, ir_core_descriptor, ir_swizzle_byte) against PTX's own definition
 * of what a wgmma.mma_async operand descriptor names, written out here from the PTX ISA's table
 * of canonical layouts (in elements of B bytes, T = 16/B elements a 16-byte unit: 8 of bf16 or f16,
 * 4 of tf32's f32 cells):
 *     K-major,  no swizzle:  ((8,m),(T,2k)):((1T,SBO),(1,LBO))
 *     K-major,  W bytes:     ((8,m),(T,2k)):((W/16·T,SBO),(1,T))
 *     MN-major, no swizzle:  ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
 *     MN-major, W bytes:     ((T,W/16,m),(8,k)):((1,T,LBO),(W/16·T,SBO))
 * each swizzled layout's bytes then moved by PTX's swizzle of W bytes (bits 4… of the address
 * exclusive-ored with bits 7…, log2(W/16) of them), on an address whose swizzle period starts
 * the panel.  For every layout of the kinds the GPU schedule builds (sched_mma.c: K-major and
 * MN-major, unswizzled and swizzled by 32, 64 and 128 bytes, several strides; tf32's K-major
 * alone) and every wgmma of 64 rows × 32 bytes of steps the code generator issues on it
 * (cg_tensor.c: 16 steps of 2 bytes or 8 of 4, K = ir_wgmma_k, its start at
 * ir_core_cell(l, 64h, K·k)), the byte PTX's definition reads for row r and step k, from the
 * start and the descriptor's fields, is the byte where the reference executor (ir_core_cell)
 * and the panel's stores (ir_swizzle_byte) put that cell; and a panel's cells land on distinct
 * bytes.  A layout or descriptor that disagreed with the hardware's reading would fail here,
 * not only on a GPU.  Requires build/libtsrc.a.  Last line "N passed, N failed". */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#include "check.h"

/* PTX's swizzle of `width` bytes on a shared-memory byte address (none for 0). */
static int64_t ptx_swizzle(int64_t address, uint32_t width) {
    int bits = width == 128 ? 3 : width == 64 ? 2 : width == 32 ? 1 : 0;
    return address ^ ((address >> 7 & ((1 << bits) - 1)) << 4);
}

/* The byte a wgmma reads for row r (< 64 or n) and step k (< 32/bytes) of an operand of
 * `bytes` cells whose descriptor has this start, leading and stride byte offsets and mode, by
 * the table above. */
static int64_t ptx_operand_byte(int64_t start, int64_t lbo, int64_t sbo, int mode, bool mn_major, int64_t bytes, int64_t r, int64_t k) {
    const int64_t t = 16 / bytes; /* elements of 16 bytes */
    uint32_t width = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
    int64_t element;
    if (!width && !mn_major) element = r % 8 * t + r / 8 * (sbo / bytes) + k % t + k / t * (lbo / bytes);
    else if (!width) element = r % t + r / t * (sbo / bytes) + k % 8 * t + k / 8 * (lbo / bytes);
    else {
        int64_t units = width / 16; /* 16-byte units a row */
        if (!mn_major) element = r % 8 * units * t + r / 8 * (sbo / bytes) + k % t + k / t * t;
        else element = r % t + r / t % units * t + r / (t * units) * (lbo / bytes) + k % 8 * units * t + k / 8 * (sbo / bytes);
    }
    return ptx_swizzle(start + bytes * element, width);
}

/* Checks layout l of a panel of `rows` × `steps` cells (of l.bytes) based at byte `base`. */
static void check_layout(const char *what, IrCoreLayout l, int64_t base, uint32_t rows, uint32_t steps) {
    int64_t lbo, sbo;
    int mode;
    ir_core_descriptor(&l, &lbo, &sbo, &mode);
    char detail[160];
    unsigned wrong = 0;
    /* Each wgmma: rows 64h…, steps 16c…; the panel's cells on distinct bytes. */
    int64_t bytes = l.bytes, kstep = 32 / bytes; /* steps of one wgmma */
    size_t span = (size_t)bytes * (size_t)(ir_core_cell(&l, rows - 1, steps - 1) + 1);
    unsigned char *seen = calloc(span + 128, 1); /* a swizzle moves bytes within their 128 */
    if (!seen) abort();
    bool distinct = true;
    for (uint32_t h = 0; h < rows / 64 || (h == 0 && rows < 64); h++)
        for (uint32_t c = 0; c < steps / kstep; c++) {
            int64_t start = base + bytes * ir_core_cell(&l, 64 * (int64_t)h, kstep * c);
            for (int64_t r = 0; r < 64 && 64 * h + r < rows; r++)
                for (int64_t k = 0; k < kstep; k++) {
                    int64_t cell = ir_core_cell(&l, 64 * (int64_t)h + r, kstep * c + k);
                    int64_t stored = base + ir_swizzle_byte(bytes * cell, l.swizzle);
                    int64_t read = ptx_operand_byte(start, lbo, sbo, mode, l.mn_major, bytes, r, k);
                    if (read != stored && !wrong++)
                        snprintf(detail, sizeof detail, "row %" PRId64 " step %" PRId64 ": PTX reads byte %" PRId64 ", stored at %" PRId64,
                                 64 * h + r, kstep * c + k, read, stored);
                    int64_t at = stored - base;
                    /* (each cell's first byte: a cell of 4 bytes marks its first alone) */
                    if (at < 0 || (size_t)at >= span + 128 || seen[at]++) distinct = false;
                }
        }
    free(seen);
    check(wrong == 0, what, wrong ? detail : NULL);
    check(distinct, what, "two cells on one byte, or a cell outside the panel");
}

int main(void) {
    char what[128];
    /* The unswizzled layouts (sm_90a before the swizzle, still PTX's interleaved mode). */
    check_layout("K-major, no swizzle", (IrCoreLayout){.leading = 64, .stride = 256, .bytes = 2}, 0, 128, 32);
    check_layout("MN-major, no swizzle", (IrCoreLayout){.leading = 1024, .stride = 64, .mn_major = true, .bytes = 2}, 0, 128, 32);
    check_layout("tf32 K-major, no swizzle", (IrCoreLayout){.leading = 32, .stride = 256, .bytes = 4}, 0, 128, 32);
    /* K-major: rows of W bytes, one a row of the panel (steps = W/2), 8 rows a group. */
    const uint32_t widths[3] = {32, 64, 128}, tiles[3] = {64, 128, 256};
    for (int w = 0; w < 3; w++)
        for (int t = 0; t < 3; t++) {
            uint32_t width = widths[w], steps = width / 2;
            if (steps < 16) continue;
            for (int64_t stage = 0; stage < 2; stage++) {
                IrCoreLayout l = {.at = stage * tiles[t] * steps, .leading = 8, .stride = 8 * (int64_t)steps, .swizzle = width, .bytes = 2};
                snprintf(what, sizeof what, "K-major, swizzled %u bytes, %u rows, stage %" PRId64, width, tiles[t], stage);
                check_layout(what, l, 0, tiles[t], steps);
                /* tf32's f32 cells: W/4 steps a row (the schedule's rows of 128 or 64 bytes) */
                uint32_t f32_steps = width / 4;
                IrCoreLayout f = {.at = stage * tiles[t] * f32_steps, .leading = 4, .stride = 8 * (int64_t)f32_steps, .swizzle = width, .bytes = 4};
                snprintf(what, sizeof what, "tf32 K-major, swizzled %u bytes, %u rows, stage %" PRId64, width, tiles[t], stage);
                check_layout(what, f, 0, tiles[t], f32_steps);
            }
        }
    /* MN-major: rows of W bytes along the tile, one a step, [m / (W/2)][k][m mod W/2]. */
    for (int w = 0; w < 3; w++)
        for (int t = 0; t < 3; t++)
            for (uint32_t steps = 32; steps <= 64; steps *= 2) {
                uint32_t width = widths[w];
                int64_t row = width / 2;
                IrCoreLayout l = {.at = tiles[t] * (int64_t)steps, .leading = row * steps, .stride = 8 * row, .mn_major = true, .swizzle = width, .bytes = 2};
                snprintf(what, sizeof what, "MN-major, swizzled %u bytes, %u rows, %u steps", width, tiles[t], steps);
                check_layout(what, l, 1024 * 5, tiles[t], steps);
                /* (k groups outermost: the other order of the same blocks) */
                IrCoreLayout o = {.leading = 8 * row, .stride = 8 * row * (tiles[t] / row), .mn_major = true, .swizzle = width, .bytes = 2};
                snprintf(what, sizeof what, "MN-major, swizzled %u bytes, %u rows, %u steps, blocks of 8 steps outermost", width, tiles[t], steps);
                check_layout(what, o, 0, tiles[t], steps);
            }
    /* A wrong descriptor is caught: an MN-major layout read with its offsets swapped. */
    IrCoreLayout l = {.leading = 64 * 64, .stride = 512, .mn_major = true, .swizzle = 128, .bytes = 2};
    int64_t lbo, sbo;
    int mode;
    ir_core_descriptor(&l, &lbo, &sbo, &mode);
    check(ptx_operand_byte(0, sbo, lbo, mode, true, 2, 64, 0) != ir_swizzle_byte(2 * ir_core_cell(&l, 64, 0), 128),
          "the model tells the leading from the stride byte offset", NULL);
    /* A tf32 layout read as if of 2-byte cells (the descriptor's offsets halved) is caught too. */
    IrCoreLayout f = {.leading = 4, .stride = 256, .swizzle = 128, .bytes = 4};
    ir_core_descriptor(&f, &lbo, &sbo, &mode);
    check(ptx_operand_byte(0, lbo, sbo / 2, mode, false, 4, 8, 0) != ir_swizzle_byte(4 * ir_core_cell(&f, 8, 0), 128),
          "the model tells a tf32 layout's stride from a half layout's", NULL);
    printf("%u passed, %u failed\n", passed, failed);
    return failed != 0;
}
