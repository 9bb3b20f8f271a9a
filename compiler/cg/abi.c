/* abi.c — C names of generated symbols and the names the generated header reserves (abi.h).
 *
 * Also checks, at compile time, the tsr_state layout that generated code addresses, and, when a
 * module is exported, that its routines and symbols get C names of their own.
 * Requires the arena, the IR's function and symbol tables and the runtime's public header. */
#include "cg/abi.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "base/diag.h"
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
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if ((c & 0xc0) == 0x80 && i > 0 && ((unsigned char)name[i - 1] & 0x80)) continue; /* one '_' a character */
        s[k++] = isalnum(c) ? (char)c : '_';
    }
    if (k == 0) s[k++] = '_';
    s[k] = 0;
    return s;
}

bool abi_reserved(const char *c_name) {
    static const char *reserved[] = {"create", "destroy", "last_error", "state", "image", "image_size", "save", "load",
                                     "host_buffer", "sync_host", "sync_device", "profile_report",
                                     "profile_reset", "_image", "_image_size", "set_option", "option", "create_data",
                                     "init_from", "set_num_threads", "num_threads"};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcasecmp(c_name, reserved[i]) == 0) return true;
    return false;
}

/* The C library's functions and objects that the runtime (libtsr.a: `nm -u`) and generated code
 * call: a module's symbol of one of these names would replace it for the runtime in the same
 * program (tests/native/drivers.sh checks the list against libtsr.a's undefined symbols). */
static const char *const c_library_names[] = {
    "access", "atexit", "calloc", "clock_gettime", "close", "cos", "dlclose", "dlerror", "dlopen", "dlsym",
    "duplocale", "exit", "fclose", "fdopen", "ferror", "fflush", "fileno", "fmemopen", "fprintf", "fputc", "fread",
    "free", "freelocale", "fseeko", "fstat", "fsync", "ftello", "fwrite", "getenv", "getpid", "getrandom", "isatty",
    "ldexp", "log", "lstat", "malloc", "memchr", "memcmp", "memcpy", "memmove", "memset", "nanosleep", "newlocale",
    "open", "posix_memalign", "pread", "printf", "pthread_attr_destroy", "pthread_attr_init",
    "pthread_attr_setdetachstate", "pthread_cond_broadcast", "pthread_cond_signal", "pthread_cond_wait",
    "pthread_create", "pthread_mutex_lock", "pthread_mutex_trylock", "pthread_mutex_unlock", "putc", "putchar",
    "qsort", "raise", "readlink", "realloc", "realpath", "rename", "sched_getaffinity", "sched_getcpu",
    "sched_setaffinity", "sched_yield", "sigaction", "sigemptyset", "signal", "sin", "sincos", "snprintf",
    "sprintf", "sqrt", "stat", "stderr", "stdout", "strchr", "strcmp", "strcspn", "strdup", "strerror", "strlen",
    "strncmp", "strndup", "strrchr", "strspn", "strstr", "strtod", "strtol", "strtoll", "sysconf", "time", "unlink",
    "uselocale", "vfprintf", "vsnprintf"};

/* Functions of the C library's headers that a module's names could spell, MODULE_NAME with a
 * module named after a POSIX or C11 facility (timer, sem, mtx, pthread_key, atomic): the
 * generated header would then declare the same function as <time.h>, <semaphore.h>,
 * <threads.h>, <pthread.h> or <stdatomic.h> with other types, and the program would not compile
 * (or a shared library would export it). */
static const char *const c_header_names[] = {
    "aio_cancel", "aio_error", "aio_fsync", "aio_read", "aio_return", "aio_suspend", "aio_write", "atomic_exchange",
    "atomic_fetch_add", "atomic_fetch_sub", "atomic_init", "atomic_load", "atomic_store", "cnd_broadcast",
    "cnd_destroy", "cnd_init", "cnd_signal", "cnd_timedwait", "cnd_wait", "mq_close", "mq_open", "mq_receive",
    "mq_send", "mq_unlink", "mtx_destroy", "mtx_init", "mtx_lock", "mtx_timedlock", "mtx_trylock", "mtx_unlock",
    "posix_spawn_file_actions_destroy", "posix_spawnattr_destroy", "pthread_barrier_destroy", "pthread_barrier_wait",
    "pthread_barrierattr_destroy", "pthread_cond_destroy", "pthread_cond_init", "pthread_condattr_destroy",
    "pthread_key_create", "pthread_key_delete", "pthread_mutex_destroy", "pthread_mutex_init",
    "pthread_mutexattr_destroy", "pthread_rwlock_destroy", "pthread_rwlockattr_destroy", "pthread_spin_destroy",
    "sem_close", "sem_destroy", "sem_getvalue", "sem_init", "sem_open", "sem_post", "sem_timedwait", "sem_trywait",
    "sem_unlink", "sem_wait", "shm_open", "shm_unlink", "thrd_create", "thrd_current", "thrd_detach", "thrd_equal",
    "thrd_exit", "thrd_join", "thrd_sleep", "thrd_yield", "timer_create", "timer_delete", "timer_getoverrun",
    "timer_gettime", "timer_settime", "tss_create", "tss_delete", "tss_get", "tss_set"};

static bool spelled_by(const char *const *names, size_t count, const char *module, const char *c_name) {
    size_t n = strlen(module);
    for (size_t i = 0; i < count; i++) {
        const char *l = names[i];
        if (strncmp(l, module, n) == 0 && l[n] == '_' && strcmp(l + n + 1, c_name) == 0) return true;
    }
    return false;
}

bool abi_c_library_name(const char *module, const char *c_name) {
    return spelled_by(c_library_names, sizeof c_library_names / sizeof *c_library_names, module, c_name) ||
           spelled_by(c_header_names, sizeof c_header_names / sizeof *c_header_names, module, c_name);
}

const char *abi_routine_symbol(Arena *arena, const char *module, const char *c_name, bool exported) {
    return arena_printf(arena, exported ? "%s_%s" : "%s__%s", module, c_name);
}

const char **abi_routine_names(const IrProgram *ir) {
    const char **names = arena_alloc(ir->arena, (ir->function_count + 1) * sizeof *names);
    for (uint32_t f = 0; f < ir->function_count; f++) {
        const char *base = abi_c_name(ir->arena, ir->functions[f].name);
        names[f] = base;
        for (unsigned k = 2;; k++) {
            uint32_t g = 0;
            while (g < f && strcmp(names[g], names[f]) != 0) g++;
            if (g == f) break;
            names[f] = arena_printf(ir->arena, "%s_%u", base, k);
        }
    }
    return names;
}

/* What a settable symbol is, in a message: "index 'k'" or "run-time size 'x.b'". */
static const char *symbol_kind(const IrSymbol *sym) { return sym->size ? "run-time size" : "index"; }

bool abi_check_names(const IrProgram *ir, const char *module) {
    bool ok = true;
    static const char *const own[] = {"create", "destroy", "last_error", "save", "load", "state"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (abi_c_library_name(module, own[i])) {
            diag_error_noloc("the module name '%s' would make the header's function %s_%s, which the C library defines "
                             "(and its headers declare otherwise); name the module otherwise (--name, or the output "
                             "file's name)", module, module, own[i]);
            return false;
        }
    const char **c = arena_alloc(ir->arena, (ir->function_count + 1) * sizeof *c);
    for (uint32_t f = 0; f < ir->function_count; f++) {
        const IrFunction *fn = &ir->functions[f];
        c[f] = abi_c_name(ir->arena, fn->name);
        if (!ir->exported[f] || !fn->span.file) continue;
        if (abi_reserved(c[f]) || !strncmp(c[f], ABI_SETTER_PREFIX, strlen(ABI_SETTER_PREFIX))) {
            diag_error(fn->span, "routine '%s' would clash with the generated function %s_%s of the model's C API; "
                       "rename the routine", fn->name, module, c[f]);
            ok = false;
            continue;
        }
        if (abi_c_library_name(module, c[f])) {
            diag_error(fn->span, "routine '%s' would be the C function %s_%s, which the C library defines; rename the "
                       "routine (or the module)", fn->name, module, c[f]);
            ok = false;
            continue;
        }
        for (uint32_t g = 0; g < f; g++)
            if (ir->exported[g] && ir->functions[g].span.file && strcmp(c[g], c[f]) == 0) {
                diag_error(fn->span, "routines '%s' and '%s' would both be the C function %s_%s; rename one",
                           ir->functions[g].name, fn->name, module, c[f]);
                diag_note(ir->functions[g].span, "'%s' is routine '%s'", c[f], ir->functions[g].name);
                ok = false;
                break;
            }
    }
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        const IrSymbol *sym = &ir->symbols[i];
        if (!sym->settable) continue;
        const char *name = abi_c_name(ir->arena, sym->name);
        for (uint32_t j = 0; j < i; j++) {
            const IrSymbol *other = &ir->symbols[j];
            const char *other_name = abi_c_name(ir->arena, other->name);
            bool same_setter = strcmp(other_name, name) == 0;
            /* An index's macro is MODULE_NAME_RANGE, a size's MODULE_NAME_MIN. */
            if (!other->settable || !(same_setter || (other->size == sym->size && strcasecmp(other_name, name) == 0)))
                continue;
            /* Reported at an index item, which the program names, rather than at a size, named
             * after its input and axis; between two of a kind, at the later. */
            bool at_other = sym->size && !other->size;
            const IrSymbol *at = at_other ? other : sym, *against = at_other ? sym : other;
            if (same_setter)
                diag_error(at->span, "%s '%s' and %s '%s' would both be set by %s_%s%s; rename one",
                           symbol_kind(against), against->name, symbol_kind(at), at->name, module, ABI_SETTER_PREFIX, name);
            else {
                char *macro = arena_printf(ir->arena, "%s_%s_%s", module, name, sym->size ? "MIN" : "RANGE");
                for (char *p = macro; *p; p++) *p = (char)toupper((unsigned char)*p);
                diag_error(at->span, "%s '%s' and %s '%s' would both define the macro %s of the header; rename one",
                           symbol_kind(against), against->name, symbol_kind(at), at->name, macro);
            }
            diag_note(against->span, "%s '%s' is declared here", symbol_kind(against), against->name);
            ok = false;
            break;
        }
    }
    return ok;
}
