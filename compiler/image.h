/* image.h — the model image: the loop IR's buffers, data sets, symbols and prints as the byte
 * array that generated objects carry and the runtime's tsr_state_create() reads (image.c;
 * the format is documented in runtime/internal.h). */
#ifndef TSR_IMAGE_H
#define TSR_IMAGE_H

#include <stddef.h>

#include "ir.h"

/* The image of `ir` (after optimisation: virtual buffers get no storage), allocated in its
 * arena. */
unsigned char *image_build(const IrProgram *ir, const char *module, size_t *size);

#endif
