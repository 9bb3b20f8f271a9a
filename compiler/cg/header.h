/* header.h — what object mode exports, and the C header and JSON manifest that describe it
 * (header.c). */
#ifndef TSR_HEADER_H
#define TSR_HEADER_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/ir.h"

/* Write MODULE.h: the state type, create/destroy/last_error, one function per routine (and,
 * `profile`, MODULE_profile_report), setters of index symbols, accessors and shape constants of
 * every named tensor and gradient. */
void header_write(const IrProgram *ir, const char *module, const char *source, bool gpu, bool profile, FILE *out);
/* Write MODULE.json: routines, tensors (kind, shape, dims, dtype, accessor), index symbols. */
void manifest_write(const IrProgram *ir, const char *module, FILE *out);
/* Write the manifest of --emit=ptx (docs/gpu.md): the PTX file's name and arch, index symbols,
 * the state buffers the kernels use (sizes in floats and bytes), every kernel with its launch
 * (grid, block, shared bytes) and parameters, and each routine's launches in order. */
struct PtxModule;
void ptx_manifest_write(const IrProgram *ir, const char *module, const struct PtxModule *ptx, const char *ptx_file,
                        FILE *out);

#endif
