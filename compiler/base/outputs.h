/* outputs.h — how tsrc writes files and runs programs (outputs.c): output files written under a
 * temporary name and renamed into place only when everything succeeded, registered temporaries
 * that a signal, exit() or LLVM's fatal error removes, and children run with the signals
 * forwarded to them.  The driver (main.c) is the one caller. */
#ifndef TSR_OUTPUTS_H
#define TSR_OUTPUTS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* What a registered temporary is. */
enum { TEMP_FREE, TEMP_FILE, TEMP_DIR };

/* How an output is written: to the standard output (-o -); through a temporary renamed onto
 * the output; or directly, without replacing it, to an existing output that is not a regular
 * file (a character device such as /dev/null, a FIFO, a descriptor named by /dev/stdout). */
typedef enum { OUT_STDOUT, OUT_TEMP, OUT_DIRECT } OutputKind;

typedef struct Output {
    const char *path; /* the output as named */
    OutputKind kind;
    int fd;
    int slot;         /* OUT_TEMP: the temporary's registration */
    FILE *file;       /* with `stream`: a stream on fd */
} Output;

/* Once, in main: the mode of the files written (0666 less the umask), removal of temporaries at
 * exit, the signal handlers, and the caught signals blocked in the calling thread (the mask it
 * had is the one children start with: outputs_startup_mask). */
void outputs_start(void);
const sigset_t *outputs_startup_mask(void);

/* Block the caught signals in this thread (the old mask in *old), and restore it. */
void signals_block(sigset_t *old);
void signals_restore(const sigset_t *old);

/* Temporaries: a new file or private directory beside `path`, registered (the descriptor, or 0
 * for a directory; the slot in *slot; -1 after an error naming `path`); registering one made
 * elsewhere (its slot, or -1); removing one; the path of a slot; removing a directory with its
 * entries; removing every registered one (async-signal-safe). */
int temp_create(const char *path, bool dir, int *slot);
int temp_add(const char *path, int kind);
void temp_remove(int slot);
const char *temp_slot_path(int slot);
void remove_dir(const char *path);
void remove_temps(void);
/* Where --run and links for device outputs make their private directories: $TMPDIR, or /tmp. */
const char *temp_directory(void);

/* Write all of `data` to `fd`; errors name `shown`. */
bool write_all(int fd, const void *data, size_t size, const char *shown);
/* The descriptor /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N names, or -1. */
int named_descriptor(const char *path);
/* Why an existing file of mode `m` cannot be an output, or NULL. */
const char *unwritable_kind(mode_t m);
/* An existing `path` that is not a regular file, opened as it is (1), refused (-1, an error), or
 * 0 for a regular file or none. */
int open_direct(Output *out, const char *path);
/* Open the output `path` (NULL or "-": the standard output), as a stream on out->file if
 * `stream`; finish it, renaming the temporary into place with `keep` and no error.  False after
 * an error. */
bool output_open(Output *out, const char *path, bool stream);
bool output_commit(Output *out, bool keep);

/* Run argv (argv[0] looked up on PATH), shown to the program as `name` (or argv[0]), with the
 * signals tsrc catches forwarded to it; its exit status, or -1 after reporting an error. */
int run_command(char *const argv[], const char *name);

#endif
