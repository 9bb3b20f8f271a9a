/* arena.c — bump allocation in large blocks; see arena.h. */
#include "base/arena.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"

enum { ARENA_BLOCK = 64 * 1024 };

typedef struct Block {
    struct Block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} Block;

struct Arena {
    Block *head;
};

static _Atomic size_t total_bytes; /* in the blocks of every live arena */

size_t arena_total_bytes(void) { return total_bytes; }

Arena *arena_new(void) {
    Arena *arena = calloc(1, sizeof *arena);
    if (!arena) diag_fatal_oom();
    return arena;
}

void arena_free(Arena *arena) {
    if (!arena) return;
    for (Block *b = arena->head, *next; b; b = next) {
        next = b->next;
        total_bytes -= b->size;
        free(b);
    }
    free(arena);
}

void *arena_alloc(Arena *arena, size_t size) {
    size = (size + 15) & ~(size_t)15;
    Block *b = arena->head;
    if (!b || b->size - b->used < size) {
        size_t block_size = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        b = malloc(sizeof *b + block_size);
        if (!b) diag_fatal_oom();
        b->used = 0;
        b->size = block_size;
        total_bytes += block_size;
        b->next = arena->head;
        arena->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

char *arena_strndup(Arena *arena, const char *text, size_t len) {
    char *copy = arena_alloc(arena, len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    return copy;
}

char *arena_printf(Arena *arena, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *out = arena_alloc(arena, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return out;
}
