/* replay.c — run a libFuzzer target's entry point over files, without libFuzzer: `make check`
 * replays every target over its seeds and over the inputs of tests/fuzz/regress/TARGET/ (past
 * findings), built with the ordinary compiler (and sanitizers under SAN=1).
 *
 * usage: replay [--cycle N] PATH…   (a directory stands for the files in it, in name order)
 * With --cycle N, the k-th file is given a first byte k mod N before its contents, as tools/
 * fuzz.sh does when it seeds a corpus with plain .tsr programs (parse: N 1, the whole-module
 * entry; compile: N 32, every -O level, CPU and mode).  A crash or an abort is the finding;
 * otherwise it prints "replay: N inputs, M compiled" (M: the programs that went through every
 * stage the target asks for, fuzz_common.c) and exits 0. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned long cycle, count;

static void replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open '%s'\n", path);
        exit(1);
    }
    size_t cap = 1 << 16, len = cycle ? 1 : 0;
    unsigned char *data = malloc(cap);
    if (!data) abort();
    if (cycle) data[0] = (unsigned char)(count % cycle);
    size_t got;
    while ((got = fread(data + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap && !(data = realloc(data, cap *= 2))) abort();
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    count++;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cycle") == 0 && i + 1 < argc) {
            cycle = strtoul(argv[++i], NULL, 10);
            continue;
        }
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            struct dirent **names;
            int n = scandir(argv[i], &names, NULL, by_name);
            for (int k = 0; k < n; k++) {
                if (names[k]->d_name[0] != '.') {
                    size_t size = strlen(argv[i]) + strlen(names[k]->d_name) + 2;
                    char *path = malloc(size);
                    if (!path) abort();
                    snprintf(path, size, "%s/%s", argv[i], names[k]->d_name);
                    replay_file(path);
                    free(path);
                }
                free(names[k]);
            }
            free(names);
        } else {
            replay_file(argv[i]);
        }
    }
    printf("replay: %lu inputs, %lu compiled\n", count, fuzz_compiled_total);
    return 0;
}
