/* abi.c — C names of generated symbols and the names the generated header reserves (abi.h).
 *
 * Also checks, at compile time, the tsr_state layout that generated code addresses.
 * Requires nothing but the arena and the runtime's public header. */
#include "cg/abi.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "runtime/tsr.h"

/* Generated code addresses tsr_state as a struct of ABI_STATE_FIELDS pointer-sized fields. */
_Static_assert(offsetof(tsr_state, buffers) == ABI_STATE_BUFFERS * sizeof(void *), "tsr_state.buffers moved");
_Static_assert(offsetof(tsr_state, symbols) == ABI_STATE_SYMBOLS * sizeof(void *), "tsr_state.symbols moved");
_Static_assert(sizeof(tsr_state) == ABI_STATE_FIELDS * sizeof(void *), "tsr_state changed size");
_Static_assert((int)ABI_SYMBOL_SEED == (int)TSR_SYMBOL_SEED && (int)ABI_SYMBOL_RUN == (int)TSR_SYMBOL_RUN &&
                   (int)ABI_SYMBOL_KEY_WORDS == (int)TSR_SYMBOL_KEY_WORDS, "the run's random key moved");

const char *abi_c_name(Arena *arena, const char *name) {
    size_t n = strlen(name);
    char *s = arena_alloc(arena, n + 2);
    size_t k = 0;
    if (n == 0 || isdigit((unsigned char)name[0])) s[k++] = '_';
    for (size_t i = 0; i < n; i++) s[k++] = isalnum((unsigned char)name[i]) ? name[i] : '_';
    s[k] = 0;
    return s;
}

bool abi_reserved(const char *c_name) {
    static const char *reserved[] = {"create", "destroy", "last_error", "state", "image", "image_size", "save", "load",
                                     "host_buffer", "sync_host", "sync_device", "profile_report",
                                     "profile_reset"};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcasecmp(c_name, reserved[i]) == 0) return true;
    return false;
}

const char *abi_routine_symbol(Arena *arena, const char *module, const char *c_name, bool exported) {
    return arena_printf(arena, exported ? "%s_%s" : "%s__%s", module, c_name);
}
