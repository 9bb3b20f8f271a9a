/* abi.h — the names generated code and headers share with their callers (abi.c).
 *
 * One source for how a program's names become C identifiers and which names the generated
 * header reserves for itself, so that the code generator (symbol names), the header writer
 * (accessors, macros) and the driver (checking routine names) cannot disagree. */
#ifndef TSR_ABI_H
#define TSR_ABI_H

#include <stdbool.h>

#include "base/arena.h"
#include "ir/ir.h"

/* The C identifier of a routine or tensor name ("l1.w" → "l1_w"), in the arena. */
const char *abi_c_name(Arena *arena, const char *name);

/* Whether `c_name` (compared without case: macros are upper case) is one of the header's own
 * names after the module prefix: MODULE_create, _destroy, _last_error, _state, _image,
 * _image_size, _save, _load, and MODULE__image, MODULE__image_size (the image's symbols: a name
 * `_image`).  Setters are MODULE_set_INDEX (ABI_SETTER_PREFIX). */
bool abi_reserved(const char *c_name);

/* Whether MODULE_c_name is a function or object of the C library that the runtime uses
 * (`pthread` + `create`, `posix` + `memalign`): defined by a model, it would replace the
 * library's for the runtime linked with it. */
bool abi_c_library_name(const char *module, const char *c_name);
#define ABI_SETTER_PREFIX "set_"

/* The exported symbol of routine `c_name` of `module` ("mm" + "matmul" → "mm_matmul"), or of a
 * routine that only `main` runs (internal linkage: "mm__matmul"). */
const char *abi_routine_symbol(Arena *arena, const char *module, const char *c_name, bool exported);

/* The C name of each of the program's functions, indexed as ir->functions: abi_c_name of its
 * name, or, for a function whose C name an earlier one has, that name with the first free
 * suffix _2, _3, …, so that an executable's routines `get'` and `get_` (internal) get symbols
 * and kernels of their own.  Exported routines never meet: abi_check_names refuses them. */
const char **abi_routine_names(const IrProgram *ir);

/* The checks of an exported module's names (-c, --shared), each an error at the name to
 * rename with a note at the other: a routine named as one of the header's own functions
 * (abi_reserved, or starting with set_), two routines of one C name ("get'" and "get_"), and
 * two index symbols or run-time sizes whose setters or macros would be one (compared without
 * case, as the macros are upper case: `kA` and `ka`, or the index `x_b` and the size `x.b`). */
bool abi_check_names(const IrProgram *ir, const char *module);

/* The tsr_state fields that generated code addresses (runtime/tsr.h; abi.c checks the layout):
 * field ABI_STATE_BUFFERS is `float **buffers`, ABI_STATE_SYMBOLS `int64_t *symbols`, of
 * ABI_STATE_FIELDS pointer-sized fields in all.  Past the program's index symbols, `symbols`
 * holds the run's random key that kernels read (tsr_state_begin_run writes it): the seed at
 * ABI_SYMBOL_SEED and the run's number at ABI_SYMBOL_RUN, ABI_SYMBOL_KEY_WORDS words. */
enum { ABI_STATE_BUFFERS = 0, ABI_STATE_SYMBOLS = 1, ABI_STATE_FIELDS = 5 };
enum { ABI_SYMBOL_SEED = 0, ABI_SYMBOL_RUN = 1, ABI_SYMBOL_KEY_WORDS = 2 };

#endif
