/* outputs.c — how tsrc writes files and runs programs: output files, temporaries, the children
 * it starts (the linker, --run's program) and the signals that may stop it.
 *
 * docs/cli.md "Output files".  An output FILE is written under a temporary name in FILE's own
 * directory and renamed onto FILE only when everything succeeded, so a failed run leaves no
 * partial file.  The temporary is made by mkostemp: O_CREAT|O_EXCL, mode 0600 and a random
 * suffix, so nothing planted in the directory (a link, a file, a FIFO under a guessed name) is
 * opened, followed or overwritten; it gets mode 0666 & ~umask before the rename.  An
 * executable is linked inside a private directory that mkdtemp makes beside FILE (mode 0700):
 * the linker writes its output itself, and in a directory no one else can write to, it cannot
 * be led elsewhere.
 *
 * Every temporary file and directory is registered in fixed storage, so that LLVM's
 * fatal-error handler, exit() and the signal handler can remove them; registering and removing
 * happen with the caught signals blocked, so the handler never sees half a change.
 *
 * Signals (SIGINT, SIGTERM, SIGHUP, unless ignored when tsrc started): an async-signal-safe
 * handler forwards the signal to the running child (the linker, or --run's program) and waits
 * for it, removes the registered temporaries (--run's directory included), restores the
 * default action and raises the signal again, so tsrc dies of it as if it had none.  Only the
 * compiling thread takes these signals (main blocks them), so the handler never runs beside
 * the code that registers temporaries.
 *
 * Requires: outputs_start() once, in main, before the compiling thread starts. */
#include "base/outputs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/diag.h"

enum { MAX_TEMPS = 8, TEMP_PATH_MAX = 4096 };
static char temp_path[MAX_TEMPS][TEMP_PATH_MAX];
static volatile sig_atomic_t temp_kind[MAX_TEMPS];
static mode_t file_mode = 0644; /* of the files tsrc writes: 0666 & ~umask (outputs_start) */
static volatile sig_atomic_t child_pid; /* the running child, not yet reaped, or 0 */
static sigset_t startup_mask;            /* the signal mask tsrc started with: its children's */
static const int caught_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { CAUGHT_SIGNALS = sizeof caught_signals / sizeof caught_signals[0] };

/* Block the caught signals in this thread (the old mask in *old), and restore it. */
void signals_block(sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < CAUGHT_SIGNALS; i++) sigaddset(&set, caught_signals[i]);
    pthread_sigmask(SIG_BLOCK, &set, old);
}
void signals_restore(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* Remove the entries of directory `path` (one level: what tsrc and the linker put there) and
 * the directory.  Async-signal-safe: open, getdents64, unlinkat, no allocation. */
void remove_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        _Alignas(8) char buf[4096];
        for (int pass = 0; pass < 4; pass++) {
            bool removed = false;
            ssize_t n;
            lseek(fd, 0, SEEK_SET);
            while ((n = getdents64(fd, buf, sizeof buf)) > 0)
                for (ssize_t off = 0; off < n;) {
                    const struct dirent64 *d = (const struct dirent64 *)(void *)(buf + off);
                    off += d->d_reclen;
                    const char *name = d->d_name;
                    if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
                    if (unlinkat(fd, name, 0) == 0 || unlinkat(fd, name, AT_REMOVEDIR) == 0) removed = true;
                }
            if (!removed) break;
        }
        close(fd);
    }
    rmdir(path);
}

/* Remove every registered temporary.  Async-signal-safe. */
void remove_temps(void) {
    for (int i = 0; i < MAX_TEMPS; i++)
        if (temp_kind[i] == TEMP_FILE) unlink(temp_path[i]);
    for (int i = 0; i < MAX_TEMPS; i++)
        if (temp_kind[i] == TEMP_DIR) remove_dir(temp_path[i]);
}

/* SIGINT, SIGTERM, SIGHUP: stop the child, remove the temporaries, die of the signal. */
static void on_signal(int sig) {
    pid_t pid = (pid_t)child_pid;
    if (pid > 0) { /* a second, different signal (nested) goes to the child too */
        kill(pid, sig);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        child_pid = 0;
    }
    remove_temps();
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns, with the signal unblocked again */
}

static void install_signal_handlers(void) {
    for (int i = 0; i < CAUGHT_SIGNALS; i++) {
        struct sigaction old, sa;
        if (sigaction(caught_signals[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue; /* nohup &c. */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(caught_signals[i], &sa, NULL);
    }
}

/* Register `path`; its slot, or -1 (a name too long, or no free slot).  Signals blocked. */
int temp_add(const char *path, int kind) {
    if (strlen(path) >= TEMP_PATH_MAX) return -1;
    for (int i = 0; i < MAX_TEMPS; i++)
        if (temp_kind[i] == TEMP_FREE) {
            strcpy(temp_path[i], path);
            temp_kind[i] = kind;
            return i;
        }
    return -1;
}

/* Remove temporary `slot` (a file, or a directory with its files) and forget it. */
void temp_remove(int slot) {
    sigset_t old;
    signals_block(&old);
    if (temp_kind[slot] == TEMP_DIR) remove_dir(temp_path[slot]);
    else unlink(temp_path[slot]);
    temp_kind[slot] = TEMP_FREE;
    signals_restore(&old);
}

/* The template of a temporary beside `path`: "DIR/BASE.tmpXXXXXX", or "DIR/.tsrc.tmpXXXXXX"
 * when BASE is too long to take the suffix (malloc'd). */
static char *temp_template(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0, base = strlen(path) - dir;
    size_t n = strlen(path) + 32;
    char *t = malloc(n);
    if (!t) diag_fatal_oom();
    if (base == 0 || base + 10 > NAME_MAX) snprintf(t, n, "%.*s.tsrc.tmpXXXXXX", (int)dir, path);
    else snprintf(t, n, "%s.tmpXXXXXX", path);
    return t;
}

/* Make a new temporary beside `path`, registered: a file (its descriptor; the slot in *slot)
 * or, `dir` set, a private directory (0 and the slot; its path is temp_path[*slot]).  -1
 * after an error that names `path`. */
int temp_create(const char *path, bool dir, int *slot) {
    char *t = temp_template(path);
    sigset_t old;
    signals_block(&old);
    int fd = dir ? (mkdtemp(t) ? 0 : -1) : mkostemp(t, O_CLOEXEC);
    int err = errno;
    *slot = fd >= 0 ? temp_add(t, dir ? TEMP_DIR : TEMP_FILE) : -1;
    if (fd >= 0 && *slot < 0) {
        if (dir) rmdir(t);
        else close(fd), unlink(t);
        fd = -1;
        err = ENAMETOOLONG;
    }
    signals_restore(&old);
    if (fd < 0) {
        /* ENOENT from a directory that exists (/proc): it is the temporary that cannot be made */
        char *slash = strrchr(t, '/');
        if (slash) *slash = 0;
        const char *where = !slash ? "." : slash == t ? "/" : t;
        struct stat st;
        if (err == ENOENT && stat(where, &st) == 0 && S_ISDIR(st.st_mode))
            diag_error_noloc("cannot write '%s': its directory '%s' takes no new files (tsrc writes a new file "
                             "beside the output, then renames it onto it)", path, where);
        else
            diag_error_noloc("cannot write '%s': %s", path, strerror(err));
    }
    free(t);
    return fd;
}

/* Write all of `data` to `fd`; errors name `shown`. */
bool write_all(int fd, const void *data, size_t size, const char *shown) {
    const unsigned char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            diag_error_noloc("cannot write '%s': %s", shown, n < 0 ? strerror(errno) : "nothing written");
            return false;
        }
        p += n;
        size -= (size_t)n;
    }
    return true;
}

/* Where --run and links for device outputs make their private directories: $TMPDIR, or /tmp. */
const char *temp_directory(void) {
    const char *dir = getenv("TMPDIR");
    return dir && *dir ? dir : "/tmp";
}

/* The descriptor that `path` names when it is one of /dev/stdout, /dev/stderr, /dev/fd/N or
 * /proc/self/fd/N (written as it is, at its offset: it may be a regular file the shell opened),
 * or -1. */
int named_descriptor(const char *path) {
    if (strcmp(path, "/dev/stdout") == 0) return 1;
    if (strcmp(path, "/dev/stderr") == 0) return 2;
    const char *n = strncmp(path, "/dev/fd/", 8) == 0 ? path + 8 : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14 : NULL;
    if (!n || !isdigit((unsigned char)*n)) return -1;
    long fd = 0;
    for (; isdigit((unsigned char)*n) && fd < INT_MAX / 10; n++) fd = fd * 10 + (*n - '0');
    return *n ? -1 : (int)fd;
}

/* Why an existing file of mode `m` cannot be an output, or NULL: it can (a regular file,
 * replaced; a character device or FIFO, written as it is). */
const char *unwritable_kind(mode_t m) {
    if (S_ISREG(m) || S_ISCHR(m) || S_ISFIFO(m)) return NULL;
    if (S_ISDIR(m)) return "it is a directory";
    if (S_ISBLK(m)) return "it is a block device (tsrc writes regular files, and character devices and pipes as they are)";
    if (S_ISSOCK(m)) return "it is a socket";
    return "it is not a regular file";
}


/* An existing `path` that is not a regular file is not replaced: a descriptor named by
 * /dev/stdout & co., a character device or a FIFO is opened for writing as it is (1, out->fd
 * set); a directory, block device or socket is an error (-1).  0: `path` is a regular file, or
 * does not exist. */
int open_direct(Output *out, const char *path) {
    struct stat st;
    int fd = named_descriptor(path);
    if (fd >= 0) {
        if (fstat(fd, &st) != 0 || (fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
            diag_error_noloc("cannot write '%s': %s", path, strerror(errno));
            return -1;
        }
    } else {
        if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
        const char *why = unwritable_kind(st.st_mode);
        if (why) {
            diag_error_noloc("cannot write '%s': %s", path, why);
            return -1;
        }
        fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC); /* never O_CREAT or O_TRUNC */
        if (fd < 0) {
            diag_error_noloc("cannot write '%s': %s", path, strerror(errno));
            return -1;
        }
        if (fstat(fd, &st) != 0 || S_ISREG(st.st_mode)) { /* replaced by a file meanwhile */
            close(fd);
            return 0;
        }
    }
    out->kind = OUT_DIRECT;
    out->fd = fd;
    return 1;
}

/* Open the output `path` (NULL or "-": the standard output) for writing, as a stream on
 * out->file if `stream`.  False after an error. */
bool output_open(Output *out, const char *path, bool stream) {
    memset(out, 0, sizeof *out);
    out->path = path;
    out->slot = -1;
    if (!path || strcmp(path, "-") == 0) {
        out->kind = OUT_STDOUT;
        out->fd = 1;
        out->file = stdout;
        return true;
    }
    int direct = open_direct(out, path);
    if (direct < 0) return false;
    if (direct == 0) {
        out->kind = OUT_TEMP;
        out->fd = temp_create(path, false, &out->slot);
        if (out->fd < 0) return false;
    }
    if (stream && !(out->file = fdopen(out->fd, "w"))) { /* a descriptor open for reading: /dev/fd/0 */
        diag_error_noloc("cannot write '%s': %s", path, strerror(errno));
        return false;
    }
    return true;
}

/* Finish the output: flush and close; with `keep` and no error, rename the temporary onto the
 * output, else remove it (what was written directly stays written).  True when the output was
 * written. */
bool output_commit(Output *out, bool keep) {
    if (out->kind == OUT_STDOUT) {
        if (!keep) return false;
        if (fflush(stdout) == 0 && !ferror(stdout)) return true;
        diag_error_noloc("cannot write to the standard output: %s", strerror(errno));
        return false;
    }
    bool ok = true;
    int err = 0;
    if (keep && out->kind == OUT_TEMP && fchmod(out->fd, file_mode) != 0) ok = false, err = errno;
    if (out->file) {
        if ((fflush(out->file) != 0 || ferror(out->file)) && ok) ok = false, err = errno;
        if (fclose(out->file) != 0 && ok) ok = false, err = errno;
    } else if (close(out->fd) != 0 && ok) {
        ok = false, err = errno;
    }
    if (keep && !ok) diag_error_noloc("cannot write '%s': %s", out->path, strerror(err ? err : EIO));
    keep = keep && ok;
    if (out->kind == OUT_DIRECT) return keep;
    sigset_t old;
    signals_block(&old);
    if (keep && rename(temp_path[out->slot], out->path) != 0) {
        err = errno;
        keep = false;
        diag_error_noloc("cannot write '%s': %s", out->path, strerror(err));
    }
    if (!keep) unlink(temp_path[out->slot]);
    temp_kind[out->slot] = TEMP_FREE;
    signals_restore(&old);
    return keep;
}

extern char **environ;

/* Run argv (argv[0] looked up on PATH), shown to the program as `name` (or argv[0]); its exit
 * status, or -1 after reporting an error. */
int run_command(char *const argv[], const char *name) {
    pid_t pid;
    size_t n = 0;
    while (argv[n]) n++;
    char **shown = calloc(n + 1, sizeof *shown);
    if (!shown) diag_fatal_oom();
    memcpy(shown, argv, n * sizeof *shown);
    if (name) shown[0] = (char *)name;
    /* The child starts with tsrc's own signal mask, and is known to the signal handler from
     * the moment it exists until it is reaped. */
    posix_spawnattr_t attr;
    if (posix_spawnattr_init(&attr) != 0) diag_fatal_oom();
    posix_spawnattr_setsigmask(&attr, &startup_mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    sigset_t old;
    signals_block(&old);
    int err = posix_spawnp(&pid, argv[0], NULL, &attr, shown, environ);
    if (!err) child_pid = pid;
    signals_restore(&old);
    posix_spawnattr_destroy(&attr);
    free(shown);
    if (err) {
        diag_error_noloc("cannot run '%s': %s", argv[0], strerror(err));
        return -1;
    }
    /* Wait for it to end without reaping it (so the handler can never signal a recycled pid),
     * then forget it and reap it with the signals blocked. */
    siginfo_t info;
    int waited;
    while ((waited = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT)) < 0 && errno == EINTR) {
    }
    int wait_err = errno;
    signals_block(&old);
    child_pid = 0;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    signals_restore(&old);
    if (waited < 0) {
        diag_error_noloc("cannot wait for '%s': %s", argv[0], strerror(wait_err));
        return -1;
    }
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

void outputs_start(void) {
    mode_t mask = umask(0);
    umask(mask);
    file_mode = 0666 & ~mask;
    atexit(remove_temps); /* an exit on the way (out of memory) leaves no temporary behind */
    install_signal_handlers();
    signals_block(&startup_mask);
}

const sigset_t *outputs_startup_mask(void) { return &startup_mask; }

const char *temp_slot_path(int slot) { return temp_path[slot]; }
