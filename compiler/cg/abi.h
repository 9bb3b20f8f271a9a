/* abi.h — the names generated code and headers share with their callers (abi.c).
 *
 * One source for how a program's names become C identifiers and which names the generated
 * header reserves for itself, so that the code generator (symbol names), the header writer
 * (accessors, macros) and the driver (checking routine names) cannot disagree. */
#ifndef TSR_ABI_H
#define TSR_ABI_H

#include <stdbool.h>

#include "base/arena.h"

/* The C identifier of a routine or tensor name ("l1.w" → "l1_w"), in the arena. */
const char *abi_c_name(Arena *arena, const char *name);

/* Whether `c_name` (compared without case: macros are upper case) is one of the header's own
 * names after the module prefix: MODULE_create, _destroy, _last_error, _state, _image,
 * _image_size, _save, _load.  Setters are MODULE_set_INDEX (ABI_SETTER_PREFIX). */
bool abi_reserved(const char *c_name);
#define ABI_SETTER_PREFIX "set_"

/* The exported symbol of routine `c_name` of `module` ("mm" + "matmul" → "mm_matmul"), or of a
 * routine that only `main` runs (internal linkage: "mm__matmul"). */
const char *abi_routine_symbol(Arena *arena, const char *module, const char *c_name, bool exported);

/* The tsr_state fields that generated code addresses (runtime/tsr.h; abi.c checks the layout):
 * field ABI_STATE_BUFFERS is `float **buffers`, ABI_STATE_SYMBOLS `int64_t *symbols`, of
 * ABI_STATE_FIELDS pointer-sized fields in all.  Past the program's index symbols, `symbols`
 * holds the run's random key that kernels read (tsr_state_begin_run writes it): the seed at
 * ABI_SYMBOL_SEED and the run's number at ABI_SYMBOL_RUN, ABI_SYMBOL_KEY_WORDS words. */
enum { ABI_STATE_BUFFERS = 0, ABI_STATE_SYMBOLS = 1, ABI_STATE_FIELDS = 5 };
enum { ABI_SYMBOL_SEED = 0, ABI_SYMBOL_RUN = 1, ABI_SYMBOL_KEY_WORDS = 2 };

#endif
