/* arena.h — region allocation for everything one compilation builds.
 *
 * The AST, parsed specs, constraints and IR live in arenas that are released with one call.
 * Allocation never fails from the caller's point of view: running out of memory is reported
 * as an internal error and the process exits.  Memory is zeroed. */
#ifndef TSR_ARENA_H
#define TSR_ARENA_H

#include <stddef.h>

typedef struct Arena Arena;

Arena *arena_new(void);
void arena_free(Arena *arena);
void *arena_alloc(Arena *arena, size_t size);                  /* zeroed, 16-byte aligned */
char *arena_strndup(Arena *arena, const char *text, size_t len); /* NUL-terminated copy */
char *arena_printf(Arena *arena, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The bytes held by all live arenas together (what a compilation has built so far): elab.c
 * bounds compile-time evaluation with it.  Arenas belong to the compiling thread. */
size_t arena_total_bytes(void);

/* A growable array whose storage is taken from an arena (old blocks are simply abandoned). */
#define ARENA_PUSH(arena, items, count, cap, value)                                          \
    do {                                                                                     \
        if ((count) == (cap)) {                                                              \
            size_t new_cap_ = (cap) ? (size_t)(cap) * 2 : 4;                                 \
            void *grown_ = arena_alloc((arena), new_cap_ * sizeof *(items));                 \
            if (count) memcpy(grown_, (items), (size_t)(count) * sizeof *(items));           \
            (items) = grown_;                                                                \
            (cap) = new_cap_;                                                                \
        }                                                                                    \
        (items)[(count)++] = (value);                                                        \
    } while (0)

#endif
