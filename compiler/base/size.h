/* size.h — how the stages after shape inference carry a size: 64 bits, a compile-time size (at
 * most 32 bits), or run-time size class k (a `?`, docs/inference.md §4.9) as
 * SIZE_RUNTIME_BASE + k.  That is above every compile-time size, so an axis of a run-time size
 * iterates, equals only an axis of the same class, and an index in 0 … size-1 of it stays below
 * it in the IR verifier's arithmetic.  A stage that needs the number itself asks
 * size_is_runtime first (the loop IR: IrProgram.class_symbol says which symbol holds it). */
#ifndef TSR_SIZE_H
#define TSR_SIZE_H

#include <stdbool.h>
#include <stdint.h>

#define SIZE_RUNTIME_BASE ((uint64_t)1 << 40)

static inline bool size_is_runtime(uint64_t n) { return n >= SIZE_RUNTIME_BASE; }
/* The class of a run-time size. */
static inline uint32_t size_class(uint64_t n) { return (uint32_t)(n - SIZE_RUNTIME_BASE); }

#endif
