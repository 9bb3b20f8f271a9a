/* args.c — the command line of a generated executable (docs/cli.md "Running an executable").
 *
 * A generated `main` hands its argc/argv to tsr_main_start() with the model image; the
 * reference executor (`tsrc --run --interp prog.tsr -- ARGS`) does the same, so both accept the
 * same options and answer them with the same words.  The options come from a table, not from
 * generated code: the built-in ones (--help, --seed, --threads, --data, --load, --init-from, --save, --size,
 * --distributed, --reduce, --check-replicas) and the
 * program's `option` items, which the image lists with their kinds and defaults.  A bad command
 * line is a one-line message "PROGRAM: error: …" on stderr and exit status 2; --help prints
 * every option with its default to stdout and exit status 0.  The state is then created with
 * the seed, the option values and the data files the command line chose, after the processes
 * of a distributed run are started (dist.c: the data sets are split among them); then the
 * processes check that they agree on the seed, the options and the run-time sizes
 * (tsr_state_check_agreement).
 *
 * Requires: an image from the same version of tsrc (model.c checks it). */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <signal.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct Parser {
    const char *program;
    tsr_model *model;
    tsr_run_args args;
    uint64_t seed;
    const char *distributed; /* --distributed: "auto", "mpi", "nccl" or "none" */
    bool threads_given;      /* --threads: TSR_NUM_THREADS does not count */
    char said[1024];         /* the usage error, kept: a process other than the first of several says
                              * it only when the others' command lines are not as bad (begin_together) */
} Parser;

static int usage_error(Parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(Parser *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->said, sizeof p->said, fmt, ap);
    va_end(ap);
    if (tsr_dist_launcher_rank() != 0) return 2; /* several processes: said once, by the first */
    fflush(stdout);
    fprintf(stderr, "%s: error: %s (%s --help lists the options)\n", p->program, p->said, p->program);
    return 2;
}

/* How a process begins, for the message that the processes began differently (a vote's low 3
 * bits: a bad command line's vote carries its message's hash above them). */
static const char *begins_as(int64_t begins, int64_t other) {
    if ((begins & 7) == TSR_BEGIN_BAD && (other & 7) == TSR_BEGIN_BAD) return "has another bad command line";
    switch (begins & 7) {
    case TSR_BEGIN_HELP: return "was asked for --help";
    case TSR_BEGIN_BAD: return "has a bad command line";
    case TSR_BEGIN_ALONE: return "was started with --distributed=none";
    default: return "runs";
    }
}

/* Processes a launcher started together begin together: each says how it begins (parse's
 * `parsed`: -1 after --help, 0 to run, else a bad command line; `alone` for --distributed=none)
 * once MPI is started — a process that will not run with the others starts MPI for this alone —
 * so that one ending before the others' MPI_Init (--help, a bad command line, --distributed=none
 * among processes of MPI) no longer leaves them waiting in it.  Processes that begin alike go on
 * as they would alone (those of --distributed=none each alone, MPI finalized); otherwise every
 * one ends with status 2, process 0 saying which began otherwise and each with a bad command line
 * saying what.  Returns false when the process is to end (*status set: 0 after --help, `parsed`
 * after a bad command line, 2 when the processes began differently), true to go on (MPI started
 * for a run with the others). */
static bool begin_together(Parser *p, int parsed, bool alone, int *status) {
    int begins = parsed < 0 ? TSR_BEGIN_HELP : parsed > 0 ? TSR_BEGIN_BAD : alone ? TSR_BEGIN_ALONE : TSR_BEGIN_RUN;
    bool go_on = begins == TSR_BEGIN_RUN || begins == TSR_BEGIN_ALONE;
    if (!go_on) *status = parsed < 0 ? 0 : parsed; /* (a state that fails later is status 1) */
    if (!tsr_dist_launched_together()) return go_on;
    if (begins != TSR_BEGIN_RUN && tsr_dist_start("mpi") != TSR_OK) /* no MPI library: nobody waits in it */
        return go_on;
    bool same;
    int other;
    int64_t begins0, begins_other;
    /* Two bad command lines differ when their messages do: each process then says its own. */
    int64_t vote = begins == TSR_BEGIN_BAD ? (int64_t)(tsr_fnv1a_extend(TSR_FNV_BASIS, p->said, strlen(p->said)) << 3) | begins
                                           : begins;
    if (tsr_dist_active() && tsr_dist_vote(vote, &same, &other, &begins0, &begins_other) == TSR_OK && !same) {
        fflush(stdout);
        if (tsr_dist_rank() == 0)
            fprintf(stderr, "%s: error: the processes began differently: process 0 %s, process %d %s; every process "
                    "of a distributed run is started with the same command line\n", p->program, begins_as(begins0, -1),
                    other, begins_as(begins_other, begins0));
        if (begins == TSR_BEGIN_BAD && tsr_dist_launcher_rank() != 0 && p->said[0])
            fprintf(stderr, "%s: error: process %d: %s (%s --help lists the options)\n", p->program, tsr_dist_rank(),
                    p->said, p->program);
        *status = 2;
        return false;
    }
    if (begins == TSR_BEGIN_ALONE) tsr_dist_leave(); /* every one alone */
    return go_on;
}

/* A signed or unsigned decimal integer, the whole string. */
static bool parse_integer(const char *text, bool allow_negative, int64_t lo, int64_t hi, int64_t *out) {
    if (!text[0] || (!allow_negative && text[0] == '-') || text[0] == '+' || text[0] == ' ') return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Whether `text` is an optional '-' and decimal digits, however many. */
static bool decimal_digits(const char *text) {
    const char *digits = text + (text[0] == '-');
    return digits[0] && strspn(digits, "0123456789") == strlen(digits);
}

static void print_help(const Parser *p, uint64_t default_seed) {
    const tsr_model *m = p->model;
    printf("usage: %s [options]\n\noptions:\n", p->program);
    printf("  %-22s %s\n", "--help", "show this help and exit");
    printf("  %-22s seed of parameter initialisation, 'shuffle' and dropout (default %" PRIu64 ")\n", "--seed N",
           default_seed);
    printf("  %-22s %s\n", "--threads N", "threads of parallel loops (default: TSR_NUM_THREADS, or one per CPU)");
    printf("  %-22s %s\n", "--load PATH", "read the parameters and training state from checkpoint PATH (.npz) before main runs");
    printf("  %-22s %s\n", "--init-from PATH", "start from the parameters checkpoint PATH shares with this model (fine-tuning), "
           "the others as initialised");
    printf("  %-22s %s\n", "--save PATH", "write the parameters and training state to checkpoint PATH when main has run");
    printf("  %-22s %s\n", "--distributed ENGINE",
           "auto (default: MPI when a launcher such as mpirun started several processes), mpi, nccl (GPU "
           "programs: the means on the GPUs), or none");
    printf("  %-22s %s\n", "--reduce MODE",
           "fast (default), or ordered: the mean of several processes' gradients in rank order, the same bits each run");
    printf("  %-22s %s\n", "--check-replicas", "at the end, check that every process holds the same parameters");
    if (tsr_model_data_field(m, 0)) {
        printf("  %-22s %s\n", "--data NAME=PATH", "read data NAME from PATH (.npy or .csv; a token file for tokens, any file for bytes), of the same shape;");
        printf("  %-22s NAME is one of:", "");
        for (uint32_t k = 0; tsr_model_data_field(m, k); k++) printf(" %s", tsr_model_data_field(m, k));
        printf("\n");
    }
    /* Sizes the caller sets, then those a data file gives (which --size can only repeat). */
    for (int from_file = 0; from_file < 2; from_file++) {
        bool first = true;
        for (uint32_t k = 0; tsr_model_size_at(m, k) >= 0; k++) {
            uint32_t symbol = (uint32_t)tsr_model_size_at(m, k);
            if (tsr_model_size_from_file(m, symbol) != from_file) continue;
            if (first && !from_file) {
                printf("  %-22s %s\n", "--size NAME=N", "the run-time size NAME (a '?' of an input) is N;");
                printf("  %-22s NAME is one of:", "");
            } else if (first) {
                printf("  %-22s sizes that data files give (the length of their first axis):", "");
            }
            printf(" %s", tsr_model_symbol_name(m, symbol));
            first = false;
        }
        if (!first) printf("\n");
    }
    uint32_t n;
    const tsr_option *o = tsr_model_options(p->model, &n);
    for (uint32_t i = 0; i < n; i++) {
        char left[256];
        snprintf(left, sizeof left, "--%s %s", o[i].name, o[i].is_float ? "X" : "N");
        if (o[i].is_float) {
            char shortest[32]; /* the fewest digits that read back as the default: 0.1, not 0.10000000000000001 */
            for (int digits = 1; digits <= 17; digits++) {
                snprintf(shortest, sizeof shortest, "%.*g", digits, o[i].value);
                if (strtod(shortest, NULL) == o[i].value) break;
            }
            printf("  %-22s a number (default %s)\n", left, shortest);
        }
        else printf("  %-22s an integer (default %" PRId64 ")\n", left, (int64_t)o[i].value);
    }
}

/* The value of a user option from `text`, or an error (status 2). */
static int set_option(Parser *p, tsr_option *o, const char *text) {
    if (o->is_float) {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (!text[0] || *end || !isfinite(v) || (errno == ERANGE && fabs(v) > 1))
            return usage_error(p, "option '--%s' needs a finite number%s, not '%s'", o->name,
                               text[0] && !*end && errno == ERANGE ? " (at most about ±1.8e308)" : "", text);
        const char *beyond = tsr_option_beyond(o, v);
        if (beyond) return usage_error(p, "option '--%s' = %s is %s", o->name, text, beyond);
        o->value = v;
        return 0;
    }
    int64_t v;
    if (!parse_integer(text, true, -(INT64_C(1) << 53), INT64_C(1) << 53, &v))
        return usage_error(p, "option '--%s' needs an integer%s, not '%s'", o->name,
                           decimal_digits(text) ? " from -2^53 to 2^53 (9007199254740992)" : "", text);
    const char *beyond = tsr_option_beyond(o, (double)v);
    if (beyond) return usage_error(p, "option '--%s' = %s is %s", o->name, text, beyond);
    o->value = (double)v;
    return 0;
}

static int add_data(Parser *p, const char *text) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || !eq[1]) return usage_error(p, "'--data' takes NAME=PATH, not '%s'", text);
    size_t n = (size_t)(eq - text);
    const char *name = NULL;
    for (uint32_t k = 0; tsr_model_data_field(p->model, k) && !name; k++) {
        const char *f = tsr_model_data_field(p->model, k);
        if (strlen(f) == n && memcmp(f, text, n) == 0) name = f;
    }
    if (!name) return usage_error(p, "'--data %s': the program has no data named '%.*s'", text, (int)n, text);
    const char **names = realloc(p->args.data_names, (p->args.data_count + 1) * sizeof *names);
    if (names) p->args.data_names = names;
    const char **paths = realloc(p->args.data_paths, (p->args.data_count + 1) * sizeof *paths);
    if (paths) p->args.data_paths = paths;
    if (!names || !paths) {
        fprintf(stderr, "%s: error: out of memory\n", p->program);
        return 1;
    }
    p->args.data_names[p->args.data_count] = name;
    p->args.data_paths[p->args.data_count++] = eq + 1;
    return 0;
}

static int add_size(Parser *p, const char *text) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text) return usage_error(p, "'--size' takes NAME=N, not '%s'", text);
    int64_t symbol = tsr_model_size_symbol(p->model, text, (size_t)(eq - text)), v;
    if (symbol < 0) return usage_error(p, "'--size %s': the program has no run-time size named '%.*s'", text, (int)(eq - text), text);
    if (!parse_integer(eq + 1, false, 1, INT64_MAX, &v))
        return usage_error(p, "'--size %s' needs a positive integer size", text);
    uint32_t *symbols = realloc(p->args.size_symbols, (p->args.size_count + 1) * sizeof *symbols);
    if (symbols) p->args.size_symbols = symbols;
    int64_t *values = realloc(p->args.size_values, (p->args.size_count + 1) * sizeof *values);
    if (values) p->args.size_values = values;
    if (!symbols || !values) {
        fprintf(stderr, "%s: error: out of memory\n", p->program);
        return 1;
    }
    p->args.size_symbols[p->args.size_count] = (uint32_t)symbol;
    p->args.size_values[p->args.size_count++] = v;
    return 0;
}

/* Whether `a` (n bytes) is one edit from `b`: a letter inserted, deleted, changed, or two
 * neighbours swapped (a misspelt option). */
static bool one_edit(const char *a, size_t n, const char *b) {
    size_t m = strlen(b), i = 0;
    if (n + 1 < m || m + 1 < n || (n == m && memcmp(a, b, n) == 0)) return false;
    while (i < n && i < m && a[i] == b[i]) i++;
    if (n == m)
        return memcmp(a + i + 1, b + i + 1, n - i - 1) == 0 ||
               (i + 1 < n && a[i] == b[i + 1] && a[i + 1] == b[i] && memcmp(a + i + 2, b + i + 2, n - i - 2) == 0);
    return n < m ? memcmp(a + i, b + i + 1, n - i) == 0 : memcmp(a + i + 1, b + i, m - i) == 0;
}

/* Parse argv; 0 to go on, or the exit status (-1: --help was printed, exit 0). */
static int parse(Parser *p, int argc, char **argv, uint64_t default_seed) {
    uint32_t option_count;
    tsr_option *options = tsr_model_options(p->model, &option_count);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (tsr_dist_launcher_rank() != 0) return -1; /* several processes: printed once, by the first */
            print_help(p, default_seed);
            if (fflush(stdout) != 0 || ferror(stdout)) /* status 1: main prints the error */
                return tsr_error(TSR_ERR_IO, "cannot write to the standard output"), 1;
            return -1;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) return usage_error(p, "unexpected argument '%s'", a);
        /* --NAME VALUE or --NAME=VALUE */
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        const char *value = eq ? eq + 1 : NULL;
        if (n == strlen("help") && memcmp(name, "help", n) == 0) /* --help=… */
            return usage_error(p, "'--help' takes no value");
        if (n == strlen("check-replicas") && memcmp(name, "check-replicas", n) == 0) { /* a flag, without value */
            if (value) return usage_error(p, "'--check-replicas' takes no value");
            p->args.check_replicas = true;
            continue;
        }
        bool known = false;
        static const char *const builtin[] = {TSR_BUILTIN_OPTIONS}; /* --help was handled above */
        for (size_t b = 0; b < sizeof builtin / sizeof *builtin; b++)
            known = known || (strlen(builtin[b]) == n && memcmp(builtin[b], name, n) == 0);
        tsr_option *o = NULL;
        for (uint32_t k = 0; k < option_count && !known && !o; k++)
            if (strlen(options[k].name) == n && memcmp(options[k].name, name, n) == 0) o = &options[k];
        if (!known && !o) {
            const char *near = NULL;
            for (size_t b = 0; b < sizeof builtin / sizeof *builtin && !near; b++)
                if (one_edit(name, n, builtin[b])) near = builtin[b];
            for (uint32_t k = 0; k < option_count && !near && n > 2; k++)
                if (one_edit(name, n, options[k].name)) near = options[k].name;
            if (near) return usage_error(p, "unknown option '--%.*s'; did you mean '--%s'?", (int)n, name, near);
            return usage_error(p, "unknown option '--%.*s'", (int)n, name);
        }
        if (!value) {
            if (i + 1 >= argc) return usage_error(p, "option '--%.*s' needs a value", (int)n, name);
            value = argv[++i];
        }
        int status = 0;
        int64_t v;
        if (o) status = set_option(p, o, value);
        else if (strncmp(name, "seed", n) == 0) {
            if (!parse_integer(value, false, 0, INT64_MAX, &v))
                return usage_error(p, "'--seed' needs a non-negative integer, not '%s'", value);
            p->seed = (uint64_t)v;
            p->args.seed_given = true;
        } else if (strncmp(name, "threads", n) == 0) {
            if (!parse_integer(value, false, 1, 4096, &v))
                return usage_error(p, "'--threads' needs a number of threads from 1 to 4096, not '%s'", value);
            tsr_set_num_threads((int)v);
            p->threads_given = true;
        } else if (strncmp(name, "load", n) == 0) {
            if (!value[0]) return usage_error(p, "'--load' needs the path of a checkpoint");
            p->args.load = value;
        } else if (strncmp(name, "init-from", n) == 0) {
            if (!value[0]) return usage_error(p, "'--init-from' needs the path of a checkpoint");
            p->args.init_from = value;
        } else if (strncmp(name, "save", n) == 0) {
            if (!value[0]) return usage_error(p, "'--save' needs the path of a checkpoint");
            p->args.save = value;
        } else if (strncmp(name, "distributed", n) == 0) {
            if (strcmp(value, "auto") && strcmp(value, "mpi") && strcmp(value, "nccl") && strcmp(value, "none"))
                return usage_error(p, "'--distributed' takes auto, mpi, nccl or none, not '%s'", value);
            p->distributed = value;
        } else if (strncmp(name, "reduce", n) == 0) {
            if (strcmp(value, "fast") && strcmp(value, "ordered"))
                return usage_error(p, "'--reduce' takes fast or ordered, not '%s'", value);
            p->args.reduce_ordered = !strcmp(value, "ordered");
        } else if (strncmp(name, "size", n) == 0) {
            status = add_size(p, value);
        } else if (strncmp(name, "data", n) == 0) {
            status = add_data(p, value);
        } else {
            return usage_error(p, "option '--%.*s' is not handled by this runtime", (int)n, name);
        }
        if (status) return status;
    }
    if (p->args.load && p->args.init_from)
        return usage_error(p, "'--load' and '--init-from' both given: '--load' resumes the run a checkpoint saved, "
                           "'--init-from' starts a new one from a checkpoint's weights");
    return 0;
}

/* SIGINT, SIGTERM or SIGHUP during a save: the temporary goes, then the signal does what it would
 * have done (SA_RESETHAND: the default action, once the handler returns). */
static void remove_partial_and_stop(int sig) {
    tsr_checkpoint_remove_partial();
    raise(sig);
}

tsr_state *tsr_main_start(const unsigned char *image, size_t image_size, uint64_t seed, int argc, char **argv,
                          int *status) {
    if (!status) {
        tsr_error(TSR_ERR_ARGUMENT, "tsr_main_start: the status pointer is NULL");
        return NULL;
    }
    *status = 1;
    /* Past the file-size limit (`ulimit -f`) a write fails (EFBIG), and the save says so and
     * removes its temporary, where the default signal killed the program mid-save. */
    struct sigaction xfsz;
    if (sigaction(SIGXFSZ, NULL, &xfsz) == 0 && xfsz.sa_handler == SIG_DFL) signal(SIGXFSZ, SIG_IGN);
    tsr_checkpoint_guard_saves();
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        struct sigaction old, partial = {.sa_handler = remove_partial_and_stop, .sa_flags = SA_RESETHAND};
        sigemptyset(&partial.sa_mask);
        if (sigaction(stops[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(stops[i], &partial, NULL);
    }
    tsr_model *m = tsr_model_read(image, image_size);
    if (!m) return NULL;
    Parser p = {.program = argc > 0 && argv[0] ? argv[0] : "tsr", .model = m, .seed = seed};
    int parsed = parse(&p, argc, argv, seed);
    const char *env_threads = getenv("TSR_NUM_THREADS");
    if (parsed == 0 && !p.threads_given && env_threads && *env_threads && tsr_env_threads() == 0 &&
        tsr_dist_launcher_rank() == 0)
        fprintf(stderr, "%s: warning: TSR_NUM_THREADS='%.40s' is not a number of threads (a whole number, 1 or more): "
                "one thread per CPU\n", p.program, env_threads);
    tsr_state *s = NULL;
    bool nccl_without_gpu = parsed == 0 && p.distributed && !strcmp(p.distributed, "nccl") && !tsr_model_gpu(m);
    bool alone = parsed == 0 && p.distributed && !strcmp(p.distributed, "none");
    if (nccl_without_gpu || (parsed == 0 && !alone && tsr_dist_start(p.distributed) != TSR_OK)) { /* before the data sets, which it splits */
        if (nccl_without_gpu) tsr_nccl_refuse_cpu_program(); /* said before the library is looked for */
        tsr_model_free(m);
    } else if (!begin_together(&p, parsed, alone, status) || (alone && tsr_dist_start("none") != TSR_OK)) {
        tsr_model_free(m);
    } else if (p.args.save && tsr_dist_rank() == 0 && tsr_checkpoint_writable(p.args.save) != TSR_OK) {
        tsr_model_free(m); /* --save to a directory, a device or a missing directory: said now, not after main */
    } else {
        s = tsr_state_create_model(m, p.seed, &p.args);
        if (s && p.args.load && tsr_state_load(s, p.args.load) != TSR_OK) { /* the error is recorded */
            tsr_state_destroy(s);
            s = NULL;
        }
        char *note = NULL;
        if (s && p.args.init_from && tsr_checkpoint_init_from(s, p.args.init_from, NULL, &note) != TSR_OK) {
            tsr_state_destroy(s);
            s = NULL;
        } else if (note && tsr_dist_rank() == 0) { /* what was kept and what was left: a partial load says so */
            fflush(stdout);
            fprintf(stderr, "%s: note: %s\n", p.program, note);
        }
        free(note);
        /* After --load, which brings a run's seed and parameters: checkpoints read from each
         * machine's own disk must be the same one. */
        if (s && tsr_state_check_agreement(s) != TSR_OK) { /* the error is recorded, on every process */
            tsr_state_destroy(s);
            s = NULL;
        }
        /* Again now that the data is read: --save must not name a file a data item came from
         * (in a distributed run, the save itself refuses it, on every process). */
        if (s && p.args.save && !tsr_dist_active() && tsr_checkpoint_writable(p.args.save) != TSR_OK) {
            tsr_state_destroy(s);
            s = NULL;
        }
    }
    if (s) *status = 0;
    free(p.args.data_names);
    free(p.args.data_paths);
    free(p.args.size_symbols);
    free(p.args.size_values);
    return s;
}
