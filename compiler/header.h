/* header.h — what object mode exports, and the C header and JSON manifest that describe it
 * (header.c). */
#ifndef TSR_HEADER_H
#define TSR_HEADER_H

#include <stdio.h>

#include "ir.h"

/* Write MODULE.h: the state type, create/destroy/last_error, one function per routine, setters
 * of index symbols, accessors and shape constants of every named tensor and gradient. */
void header_write(const IrProgram *ir, const char *module, const char *source, FILE *out);
/* Write MODULE.json: routines, tensors (kind, shape, dims, dtype, accessor), index symbols. */
void manifest_write(const IrProgram *ir, const char *module, FILE *out);

#endif
