/* dlclose.c — a --shared model unloaded after its routine ran on the runtime's worker threads:
 * the process goes on (and exits 0) instead of crashing in a worker whose code was unmapped.
 * Usage: dlclose LIBRARY MODULE ROUTINE (run with TSR_NUM_THREADS=2, so the pool starts). */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static void *symbol(void *library, const char *module, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "%s_%s", module, name);
    void *p = dlsym(library, full);
    if (!p) fprintf(stderr, "no symbol %s\n", full);
    return p;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    for (int round = 0; round < 2; round++) { /* loaded again after the first dlclose */
        void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!library) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        void *(*create)(uint64_t) = (void *(*)(uint64_t))symbol(library, argv[2], "create");
        int (*routine)(void *) = (int (*)(void *))symbol(library, argv[2], argv[3]);
        void (*destroy)(void *) = (void (*)(void *))symbol(library, argv[2], "destroy");
        if (!create || !routine || !destroy) return 1;
        void *state = create(1);
        if (!state || routine(state) != 0) return 1;
        destroy(state);
        if (dlclose(library) != 0) return 1;
        nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL); /* the workers wake and wait again */
    }
    puts("unloaded twice");
    return 0;
}
