/* main.c — the tsrc driver: command line, then the pipeline stages in order.
 *
 * The driver is the only place that writes output files.  Each stage reports its own errors
 * through diag; the driver stops after the first stage that reported any and exits with
 * status 1.  Output files are written to a temporary name and renamed into place only when
 * everything succeeded, so a failed run never leaves a partial file behind (base/outputs.c,
 * which also runs the linker and --run's program with the signals forwarded to them).
 *
 * Pipeline (docs/cli.md): parse (lexer.re + parser.y + spec_parser.y) → elaborate and infer
 * shapes (elab/ + infer/shape*.c) → assignments and projections (assign.c + proj.c) → loop IR
 * (lower.c, opt.c, verified by ir.c) → the reference executor (interp.c) [→ codegen: later]. */
#include <ctype.h>
#include <strings.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/ErrorHandling.h>

#include "cg/abi.h"
#include "base/arena.h"
#include "front/ast.h"
#include "base/diag.h"
#include "base/outputs.h"
#include "ir/assign.h"
#include "ir/buckets.h"
#include "cg/cg_cpu.h"
#include "cg/cg_ptx.h"
#include "cg/header.h"
#include "elab/elab.h"
#include "infer/explain.h"
#include "ir/interp.h"
#include "ir/ir.h"
#include "ir/lower.h"
#include "ir/image.h"
#include "ir/opt.h"
#include "front/parse.h"
#include "ir/plan.h"
#include "runtime/tsr.h"
#include "sched/sched.h"
#include "sched/target.h"

#ifndef TSRC_VERSION
#define TSRC_VERSION "0.1.0"
#endif

typedef enum {
    MODE_BUILD,
    MODE_PARSE_ONLY,
    MODE_DUMP_AST,
    MODE_CHECK,
    MODE_PRINT_SHAPES,
    MODE_EXPLAIN,   /* --explain=NAME (several allowed) */
    MODE_EMIT_IR,   /* --emit=ir (as lowered and optimised) or --emit=sched-ir (as scheduled) */
    MODE_EMIT_CODE, /* --emit=llvm|asm|obj */
    MODE_OBJECT,    /* -c: object, header, manifest */
    MODE_SHARED,    /* --shared: a shared library with the runtime inside, and its manifest */
    MODE_RUN,
} Mode;

typedef struct Options {
    Mode mode;
    bool interp;
    bool no_opt;
    bool time_stages;   /* --time-stages */
    bool profile;       /* --profile: native code times its kernels (docs/runtime.md §17) */
    bool no_sched;      /* run the reference executor on the unscheduled IR */
    bool sched_ir;      /* --emit=sched-ir */
    bool emit_ptx;      /* --emit=ptx */
    bool reassociate;   /* --reassociate */
    bool tf32;          /* --tf32 */
    const char *arch;   /* --arch=sm_NN (--target=cuda) */
    unsigned gpu_blocks; /* --gpu-blocks=N (--target=cuda; 0: the default) */
    CgFormat emit_format;
    int opt_level;
    const char *cpu;
    const char *triple;
    const char *name;
    uint64_t seed;
    uint64_t bucket_cells; /* --bucket-cells: the buckets of a mean across processes (buckets.c) */
    const char *input;
    const char *output;
    const char *depfile; /* --depfile=FILE: the sources the output depends on, as a Make rule */
    const char **include_dirs;
    int include_count;
    const char **explain; /* --explain=NAME, in order */
    uint32_t explain_count;
    char **program_args; /* after `--`: the command line of the program that --run runs */
    int program_argc;
} Options;

/* The exit status after writing to the standard output: 0, or 1 when it could not be written
 * (a full disk, a closed descriptor), said. */
static int written_out(void) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    diag_error_noloc("cannot write to the standard output: %s", strerror(errno));
    return 1;
}

static void usage(FILE *out) {
    fputs("usage: tsrc [options] FILE.tsr\n"
          "\n"
          "Compile a .tsr tensor program.\n"
          "\n"
          "options:\n"
          "  --parse-only     parse the program (and every spec string in it), report errors\n"
          "  --dump-ast       print the syntax tree (to -o FILE if given)\n"
          "  --check          parse, elaborate, infer every shape and element type and build\n"
          "                   the loops (no code); report all errors\n"
          "  --print-shapes   like --check, then print 'NAME : SHAPE' for every named tensor\n"
          "  --explain=NAME   like --check, then explain tensor NAME (as --print-shapes names\n"
          "                   it; NAME.grad for its gradient): the constraints that decided\n"
          "                   each axis, and which loops of its assignments are summed (may\n"
          "                   be repeated)\n"
          "  (no mode)        compile to an executable (-o FILE, default: FILE without .tsr)\n"
          "  -c               compile to an object file with a C header and a JSON manifest\n"
          "                   (-o MODEL.o also writes MODEL.h and MODEL.json)\n"
          "  --shared         compile to a shared library with the runtime inside, for Python\n"
          "                   and dlopen (-o libMODEL.so also writes libMODEL.json)\n"
          "  --emit=KIND      write KIND: ir (the loop IR, docs/ir.md), sched-ir (the loop IR\n"
          "                   as scheduled for the target), llvm, asm or obj; ptx (the GPU\n"
          "                   kernels, -o MODEL.ptx also writes MODEL.json; implies cuda)\n"
          "  --run            compile and run the program (natively; with --interp, on the\n"
          "                   reference executor)\n"
          "  -O0 .. -O3       optimisation level of the generated code (default -O3)\n"
          "  --cpu=NAME       generate code for CPU NAME (default: this machine's, 'native';\n"
          "                   --cpu=help lists the names)\n"
          "  --target=TRIPLE  generate code for TRIPLE (default: this machine's); 'cuda':\n"
          "                   for NVIDIA GPUs (executables and -c objects run on the GPU)\n"
          "  --arch=sm_NN     the GPU architecture for --target=cuda (default sm_80)\n"
          "  --gpu-blocks=N   the blocks a GPU kernel needs to fill the GPU, about its\n"
          "                   multiprocessors (default 128, for an H100's 132)\n"
          "  --name=NAME      prefix of the exported symbols (default: the output's base name)\n"
          "  --no-opt         skip the loop IR optimisations (virtualisation, folding)\n"
          "  --no-sched       with --run --interp: run the loop IR as lowered, unscheduled\n"
          "  --reassociate    let sums and products be reduced in another order where that\n"
          "                   runs faster (the GPU's block reductions); results then round\n"
          "                   differently from the reference executor's\n"
          "  --tf32           round both factors of every f32 product that a contraction\n"
          "                   sums to tf32 (10 bits after the point), in every executor;\n"
          "                   on --target=cuda those contractions run on the tensor cores\n"
          "  --time-stages    print each stage's time and the peak memory so far (stderr)\n"
          "  --profile        native code times each kernel launch; an executable prints the\n"
          "                   table of kernels by time when main ends (stderr), an object\n"
          "                   exports MODEL_profile_report() and MODEL_profile_reset(); with\n"
          "                   --target=cuda each launch waits for its kernel, so the times\n"
          "                   are the kernels'\n"
          "  --seed N         seed of parameter initialisation (default 0)\n"
          "  --bucket-cells N the mean of gradients across processes begins in buckets of at\n"
          "                   least N cells as the backward pass readies them (262144: 1 MB);\n"
          "                   0, the default: one message after the backward pass (§19 of\n"
          "                   docs/runtime.md)\n"
          "  -o FILE          write the output to FILE\n"
          "  --depfile=FILE   also write FILE, a Make rule of the output on the files the\n"
          "                   program was read from (it and the modules it opened)\n"
          "  -I DIR           add DIR to the module search path (for 'open')\n"
          "  -h, --help       show this help and exit\n"
          "  --version        show the version and exit\n"
          "\n"
          "Diagnostics are printed as 'file:line:col: error: message'; the exit status is 0 on\n"
          "success, 1 when the program has errors, 2 for a bad command line.\n"
          "See docs/cli.md.\n",
          out);
}

static _Noreturn __attribute__((format(printf, 1, 2))) void bad_usage(const char *fmt, ...) {
    fputs("tsrc: error: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see 'tsrc --help')\n", stderr);
    exit(2);
}

static const char **include_dirs;
static char **joined_options; /* the --NAME=VALUE strings made from --NAME VALUE */
static int joined_count;
static void free_include_dirs(void) {
    free(include_dirs);
    include_dirs = NULL;
    for (int k = 0; k < joined_count; k++) free(joined_options[k]);
    free(joined_options);
    joined_options = NULL;
    joined_count = 0;
}

/* Whether `value` is a whole number at least 0 that fits 64 bits, into *out. */
/* A decimal integer: digits only (no sign, no blanks, as the executables' own --seed reads). */
static bool unsigned_number(const char *value, unsigned long long *out) {
    char *end;
    errno = 0;
    *out = strtoull(value, &end, 10);
    return !errno && !*end && isdigit((unsigned char)value[0]);
}

/* The long options that take a value, written --NAME=VALUE or --NAME VALUE. */
/* Why `name` cannot be a module name, or NULL.  It prefixes the model's C symbols and macros:
 * a C identifier starting with a letter (a leading underscore is the C implementation's), and
 * not the runtime's own prefix (tsr_state_create, tsr.h's guard TSR_H: a model named tsr_model
 * would define functions the runtime defines). */
static const char *module_name_problem(const char *name) {
    if (!isalpha((unsigned char)name[0])) return "does not start with a letter";
    for (const char *c = name; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_') return "is not a C identifier";
    if (strncasecmp(name, "tsr", 3) == 0 && (name[3] == 0 || name[3] == '_')) return "is tsr or starts with tsr_ (the runtime's names)";
    return NULL;
}

static const char *const valued_options[] = {"--explain", "--emit", "--cpu", "--target", "--arch", "--gpu-blocks", "--name",
                                             "--depfile"};
/* Every option, for "did you mean" after an unknown one. */
static const char *const known_options[] = {
    "--help", "--version", "--parse-only", "--dump-ast", "--check", "--print-shapes", "--explain", "--emit", "--run",
    "--cpu", "--target", "--arch", "--gpu-blocks", "--name", "--interp", "--no-opt", "--no-sched", "--reassociate", "--tf32", "--time-stages",
    "--profile", "--shared", "--seed", "--bucket-cells", "--depfile", "-O0", "-O1", "-O2", "-O3", "-c", "-o", "-I"};

/* argv[*i] as --NAME=VALUE: itself, or joined with the next argument when it is a valued
 * option written with a space (--explain l2.w).  The join lives as long as the process. */
static const char *joined_option(int argc, char **argv, int *i) {
    const char *a = argv[*i];
    for (size_t k = 0; k < sizeof valued_options / sizeof *valued_options; k++)
        if (strcmp(a, valued_options[k]) == 0) {
            if (*i + 1 >= argc) bad_usage("'%s' needs a value ('%s=VALUE' or '%s VALUE')", a, a, a);
            const char *value = argv[++*i];
            size_t n = strlen(a) + strlen(value) + 2;
            char *j = malloc(n);
            if (!j) diag_fatal_oom();
            snprintf(j, n, "%s=%s", a, value);
            joined_options[joined_count++] = j; /* kept until exit: the options point into it */
            return j;
        }
    return a;
}

/* The mode option `a` (mode m): the first one, or the same option again (`--explain=` may name
 * several tensors); another is an error, `--emit=llvm --emit=asm` too. */
static void set_mode(Options *opt, const char **mode_text, Mode m, const char *a) {
    if (*mode_text && (opt->mode != m || (m != MODE_EXPLAIN && strcmp(a, *mode_text) != 0)))
        bad_usage("'%s' conflicts with an earlier mode option ('%s')", a, *mode_text);
    opt->mode = m;
    if (!*mode_text) *mode_text = a;
}

static Options parse_options(int argc, char **argv) {
    Options opt = {.bucket_cells = BUCKET_CELLS_DEFAULT};
    opt.opt_level = 3;
    opt.include_dirs = include_dirs = calloc(2 * (size_t)argc, sizeof *opt.include_dirs);
    opt.explain = opt.include_dirs + argc; /* the second half: --explain names */
    joined_options = calloc((size_t)argc + 1, sizeof *joined_options);
    atexit(free_include_dirs); /* a bad command line exits from inside this function */
    if (!opt.include_dirs || !joined_options) diag_fatal_oom();
    const char *mode_text = NULL; /* the first mode option, as written */
    for (int i = 1; i < argc; i++) {
        const char *a = strcmp(argv[i], "--") == 0 ? argv[i] : joined_option(argc, argv, &i);
        if (strcmp(a, "--") == 0) { /* the rest is the program's own command line */
            opt.program_args = argv + i + 1;
            opt.program_argc = argc - i - 1;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(written_out());
        } else if (strcmp(a, "--version") == 0) {
            printf("tsrc %s\n", TSRC_VERSION);
            exit(written_out());
        } else if (strcmp(a, "--parse-only") == 0 || strcmp(a, "--dump-ast") == 0 ||
                   strcmp(a, "--check") == 0 || strcmp(a, "--print-shapes") == 0) {
            Mode m = strcmp(a, "--parse-only") == 0 ? MODE_PARSE_ONLY
                   : strcmp(a, "--dump-ast") == 0   ? MODE_DUMP_AST
                   : strcmp(a, "--check") == 0      ? MODE_CHECK
                                                    : MODE_PRINT_SHAPES;
            set_mode(&opt, &mode_text, m, a);
        } else if (strncmp(a, "--explain=", 10) == 0) {
            if (!a[10]) bad_usage("%s", "'--explain' needs a tensor name ('--explain=NAME' or '--explain NAME')");
            set_mode(&opt, &mode_text, MODE_EXPLAIN, a);
            opt.explain[opt.explain_count++] = a + 10;
        } else if (strncmp(a, "--emit=", 7) == 0 || strcmp(a, "--run") == 0 || strcmp(a, "-c") == 0 ||
                   strcmp(a, "--shared") == 0) {
            Mode m = MODE_RUN;
            if (a[1] == 'c') m = MODE_OBJECT;
            else if (strcmp(a, "--shared") == 0) m = MODE_SHARED;
            else if (strcmp(a, "--emit=ir") == 0) m = MODE_EMIT_IR;
            else if (strcmp(a, "--emit=sched-ir") == 0) m = MODE_EMIT_IR, opt.sched_ir = true;
            else if (a[2] == 'e') {
                m = MODE_EMIT_CODE;
                const char *k = a + 7;
                if (strcmp(k, "llvm") == 0) opt.emit_format = CG_LLVM;
                else if (strcmp(k, "asm") == 0) opt.emit_format = CG_ASM;
                else if (strcmp(k, "obj") == 0) opt.emit_format = CG_OBJECT;
                else if (strcmp(k, "ptx") == 0) opt.emit_ptx = true;
                else bad_usage("unknown output kind '%s' (ir, sched-ir, llvm, asm, obj or ptx)", k);
            }
            set_mode(&opt, &mode_text, m, a);
        } else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) {
            opt.opt_level = a[2] - '0';
        } else if (strncmp(a, "--cpu=", 6) == 0 && a[6]) {
            opt.cpu = a + 6;
        } else if (strncmp(a, "--target=", 9) == 0 && a[9]) {
            opt.triple = a + 9;
        } else if (strncmp(a, "--arch=", 7) == 0 && a[7]) {
            opt.arch = a + 7;
        } else if (strncmp(a, "--gpu-blocks=", 13) == 0) {
            unsigned long long blocks;
            if (!unsigned_number(a + 13, &blocks) || blocks < 1 || blocks > 65535)
                bad_usage("'--gpu-blocks' needs a number of blocks from 1 to 65535, not '%s'", a + 13);
            opt.gpu_blocks = (unsigned)blocks;
        } else if (strncmp(a, "--depfile=", 10) == 0) {
            if (!a[10]) bad_usage("%s", "'--depfile' needs a file name");
            opt.depfile = a + 10;
        } else if (strncmp(a, "--name=", 7) == 0) {
            opt.name = a + 7;
            const char *problem = module_name_problem(opt.name);
            if (problem) bad_usage("'--name' needs a C identifier that starts with a letter and is not the runtime's "
                                   "(tsr, tsr_…); '%s' %s", opt.name, problem);
        } else if (strcmp(a, "--interp") == 0) {
            opt.interp = true;
        } else if (strcmp(a, "--no-opt") == 0) {
            opt.no_opt = true;
        } else if (strcmp(a, "--no-sched") == 0) {
            opt.no_sched = true;
        } else if (strcmp(a, "--reassociate") == 0) {
            opt.reassociate = true;
        } else if (strcmp(a, "--tf32") == 0) {
            opt.tf32 = true;
        } else if (strcmp(a, "--time-stages") == 0) {
            opt.time_stages = true;
        } else if (strcmp(a, "--profile") == 0) {
            opt.profile = true;
        } else if (strcmp(a, "--bucket-cells") == 0 || strncmp(a, "--bucket-cells=", 15) == 0) {
            if (!a[14] && i + 1 >= argc) bad_usage("'%s' needs a number", a);
            const char *value = a[14] ? a + 15 : argv[++i];
            unsigned long long cells;
            if (!unsigned_number(value, &cells) || cells > (1ull << 40))
                bad_usage("'--bucket-cells' needs a number of cells from 0 to 2^40, not '%s'", value);
            opt.bucket_cells = cells;
        } else if (strcmp(a, "--seed") == 0 || strncmp(a, "--seed=", 7) == 0) {
            if (!a[6] && i + 1 >= argc) bad_usage("'%s' needs a number", a);
            const char *value = a[6] ? a + 7 : argv[++i];
            unsigned long long seed;
            if (!unsigned_number(value, &seed) || seed > INT64_MAX) /* an executable's --seed takes the same */
                bad_usage("'--seed' needs an integer from 0 to 2^63-1, not '%s'", value);
            opt.seed = seed;
        } else if (strcmp(a, "-o") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) bad_usage("'%s' needs a file name", a);
            opt.output = argv[++i];
        } else if (strncmp(a, "-o", 2) == 0 && a[2]) {
            opt.output = a + 2;
        } else if (strcmp(a, "-I") == 0 && i + 1 < argc && !argv[i + 1][0]) {
            bad_usage("'-I' needs a directory, not an empty name (it would search from /)");
        } else if (strcmp(a, "-I") == 0) {
            if (i + 1 >= argc) bad_usage("'%s' needs a directory", a);
            opt.include_dirs[opt.include_count++] = argv[++i];
        } else if (strncmp(a, "-I", 2) == 0 && a[2]) {
            opt.include_dirs[opt.include_count++] = a + 2;
        } else if (a[0] == '-' && a[1] != '\0') {
            size_t n = strcspn(a, "=");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), a);
            for (size_t k = 0; k < sizeof valued_options / sizeof *valued_options; k++)
                if (strcmp(name, valued_options[k]) == 0 && a[n] == '=' && !a[n + 1]) /* --cpu= */
                    bad_usage("'%s' needs a value ('%s=VALUE' or '%s VALUE')", name, name, name);
            if (a[1] == 'O' && a[2] >= '4' && a[2] <= '9' && !a[3])
                bad_usage("unknown option '%s': the optimisation levels are -O0 to -O3", a);
            const char *near = diag_closest_name(name, known_options, sizeof known_options / sizeof *known_options);
            if (near) bad_usage("unknown option '%s'; did you mean '%s'?", a, near);
            if (opt.input && a[1] == '-') /* after the program: one of its own, meant for --run */
                bad_usage("unknown option '%s' (with --run, the program's own options follow '--': tsrc --run %s -- %s …)",
                          a, opt.input, a);
            bad_usage("unknown option '%s'", a);
        } else {
            if (opt.input) bad_usage("more than one input file ('%s')", a);
            opt.input = a;
        }
    }
    const char *host_triple = target_is_cuda(opt.triple) ? NULL : opt.triple; /* --cpu's */
    if (opt.cpu && strcmp(opt.cpu, "help") == 0 && !target_print_cpus(host_triple, stdout))
        bad_usage("no list of CPUs for target '%s': this tsrc generates x86-64 code (--target=x86_64-pc-linux-gnu) and "
                  "GPU code (--target=cuda)", host_triple ? host_triple : "(the host)");
    if (opt.cpu && strcmp(opt.cpu, "help") == 0) exit(0);
    if (opt.cpu && target_cpu_problem(host_triple, opt.cpu)) bad_usage("%s", target_cpu_problem(host_triple, opt.cpu));
    if (!opt.input) bad_usage("%s", "no input file");
    if (opt.interp && opt.mode != MODE_RUN) bad_usage("%s", "'--interp' goes with '--run'");
    if (opt.no_sched && !opt.interp) bad_usage("%s", "'--no-sched' goes with '--run --interp'");
    if (opt.profile && opt.interp) bad_usage("%s", "'--profile' times native code's kernels; the reference executor ('--interp') has none");
    if (opt.profile && opt.emit_ptx)
        bad_usage("%s", "'--profile' times the launches of the host code; '--emit=ptx' writes none");
    if (opt.profile && (opt.mode == MODE_EMIT_IR || opt.mode == MODE_CHECK || opt.mode == MODE_PARSE_ONLY ||
                        opt.mode == MODE_DUMP_AST || opt.mode == MODE_PRINT_SHAPES || opt.mode == MODE_EXPLAIN))
        bad_usage("%s", "'--profile' goes with compiling (an executable, -c, --run or --emit=llvm|asm|obj)");
    if (opt.emit_ptx && !opt.triple) opt.triple = "cuda";
    if (opt.emit_ptx && !target_is_cuda(opt.triple))
        bad_usage("'--emit=ptx' generates GPU code, which '--target=%s' is not (use --target=cuda)", opt.triple);
    if (opt.mode == MODE_EMIT_CODE && !opt.emit_ptx && target_is_cuda(opt.triple))
        bad_usage("%s", "'--target=cuda' writes --emit=ptx, -c objects and executables, not --emit=llvm, asm or obj");
    if (opt.arch && !target_is_cuda(opt.triple)) bad_usage("%s", "'--arch' goes with '--target=cuda'");
    if (opt.gpu_blocks && !target_is_cuda(opt.triple)) bad_usage("%s", "'--gpu-blocks' goes with '--target=cuda'");
    if (opt.output && strcmp(opt.output, "-") == 0 &&
        (opt.mode == MODE_BUILD || opt.mode == MODE_OBJECT || opt.mode == MODE_SHARED))
        bad_usage("%s", "'-o -' (the standard output) is for the outputs of one stream (--emit=…, --print-shapes, "
                  "--dump-ast); an executable, -c and --shared need a file name");
    if (opt.program_args && opt.mode != MODE_RUN)
        bad_usage("%s", "arguments after '--' are the program's, for '--run'; run the executable with them instead");
    if (opt.mode == MODE_RUN && opt.output) bad_usage("%s", "'--run' prints to the standard output; it takes no '-o'");
    if (opt.depfile && opt.mode != MODE_BUILD && opt.mode != MODE_OBJECT && opt.mode != MODE_SHARED &&
        opt.mode != MODE_EMIT_CODE)
        bad_usage("%s", "'--depfile' goes with an output file: an executable, -c, --shared or --emit=llvm|asm|obj|ptx");
    if (opt.depfile && opt.output && strcmp(opt.output, "-") == 0)
        bad_usage("%s", "'--depfile' names the output in its rule; '-o -' has no name");
    return opt;
}

/* --time-stages: after each stage of the pipeline, one line on stderr with the stage's wall
 * time and the process's peak resident memory so far (docs/cli.md, docs/performance.md). */
static bool stage_timing;
static double stage_start;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void stage_done(const char *stage) {
    if (!stage_timing) return;
    double t = now_seconds();
    struct rusage ru;
    long peak_mb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024 : -1;
    fprintf(stderr, "tsrc: stage %-34s %8.3f s   peak %6ld MB\n", stage, t - stage_start, peak_mb);
    stage_start = t;
}

/* Shapes are closed: build the assignments, lower them to the loop IR, optimise, schedule for
 * the target (unless the IR is wanted as lowered), verify. */
/* --check, --print-shapes and --explain: the program is built as far as its loops, for the
 * errors found there, and no further. */
static bool checks_only(const Options *opt) {
    return opt->mode == MODE_CHECK || opt->mode == MODE_PRINT_SHAPES || opt->mode == MODE_EXPLAIN;
}

static IrProgram *build_ir(Program *program, const Options *opt, const Target *target) {
    /* The GPU schedule sizes grids from the extents: run-time sizes are for the CPU (and the
     * reference executor) in this version. */
    for (uint32_t k = 1; target->kind == TARGET_CUDA && k <= shape_runtime_count(program->solver); k++) {
        uint32_t count;
        const OriginId *decls = shape_runtime_decls(program->solver, k, &count);
        if (!count) continue; /* a class closing made another size */
        diag_error(shape_origin_span(program->solver, decls[0]),
                   "run-time sizes ('?') are not compiled for --target=cuda in this version; compile for the CPU");
        return NULL;
    }
    AssignOptions ao = {opt->seed};
    AssignResult ar;
    if (!assign_build(program, &ao, &ar)) {
        /* Every failure there reports itself; were one not to, the run would end with status 1
         * and no word (or go on without a program): say so rather than stay silent. */
        if (!diag_error_count()) diag_error_noloc("internal error: building the assignments failed without a message");
        return NULL;
    }
    /* The routines are the program's functions; without any, one function computes every
     * named tensor. */
    ar.ir->tf32_products = opt->tf32;
    ar.ir->attention_row_each = target->kind == TARGET_CUDA;
    if (ar.routine_count == 0) lower_function(ar.ir, ar.forward.name, ar.forward.items, ar.forward.count);
    for (uint32_t i = 0; i < ar.routine_count; i++)
        lower_function(ar.ir, ar.routines[i].name, ar.routines[i].items, ar.routines[i].count);
    if (ir_verify(ar.ir, stderr)) {
        diag_error_noloc("internal error: the loop IR is malformed after lowering");
        return ar.ir;
    }
    if (!plan_build(ar.ir, &ar)) {
        if (!diag_error_count()) diag_error_noloc("internal error: planning main failed without a message");
        return ar.ir;
    }
    stage_done("assignments, lowering");
    /* The checking modes stop here: every error a program can have is reported by now
     * (element types, derivatives, lowering, main), and no code is wanted. */
    if (checks_only(opt)) return ar.ir;
    if (!opt->no_opt) {
        optimise(ar.ir, target->kind == TARGET_CUDA);
        bucket_collectives(ar.ir, opt->bucket_cells);
        if (ir_verify(ar.ir, stderr)) {
            diag_error_noloc("internal error: the loop IR is malformed after optimisation");
            return ar.ir;
        }
        stage_done("loop IR optimisation");
    }
    /* After the optimiser's bucketing of collective calls (--bucket-cells), before the schedule
     * (--cpu): what two processes of a distributed run must share. */
    ar.ir->program_hash = plan_program_hash(ar.ir);
    bool as_lowered = (opt->mode == MODE_EMIT_IR && !opt->sched_ir) || opt->no_sched;
    if (!as_lowered) {
        schedule(ar.ir, target);
        if (ir_verify(ar.ir, stderr)) diag_error_noloc("internal error: the loop IR is malformed after scheduling");
        stage_done("schedule");
    }
    return ar.ir;
}

static char *default_output(Arena *arena, const char *input, const char *ext);
static char **program_argv(Arena *arena, const Options *opt, const char *name);

static int run_program(IrProgram *ir, const Options *opt) {
    size_t size;
    unsigned char *image = image_build(ir, "main", (ImageCpu){0}, NULL, &size);
    int status;
    char **argv = program_argv(ir->arena, opt, default_output(ir->arena, opt->input, ""));
    Interp *in = interp_new(ir, image, size, opt->program_argc + 1, argv, &status);
    /* A start that failed in one process of a distributed run (its data file, its --load) ends
     * the others, which would wait for it in the first collective call, as a generated main does. */
    if (!in && status != 0 && tsr_dist_size() > 1) {
        fflush(stderr);
        tsr_dist_abort(status);
    }
    if (!in) return status;
    bool ran = interp_run_main(in);
    status = ran && interp_finish(in) ? 0 : 1;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        diag_error_noloc("cannot write to the standard output: %s", strerror(errno));
        status = 1;
    }
    /* One process of a distributed run that failed on its own (its message is out) ends the
     * others, which would wait for it in their next mean, as a generated main does. */
    if (!ran && tsr_dist_size() > 1) {
        fflush(stderr);
        tsr_dist_abort(1);
    }
    interp_free(in);
    return status;
}

static void ir_free(IrProgram *ir) {
    if (ir) arena_free(ir->arena);
}

/* ---- Native outputs ------------------------------------------------------------------------------ */

/* "dir/prog.tsr" → "prog" + ext (in the current directory). */
/* The command line of the program --run runs: `name`, then the arguments after `--`. */
static char **program_argv(Arena *arena, const Options *opt, const char *name) {
    char **argv = arena_alloc(arena, ((size_t)opt->program_argc + 2) * sizeof *argv);
    argv[0] = (char *)name;
    for (int i = 0; i < opt->program_argc; i++) argv[i + 1] = opt->program_args[i];
    argv[opt->program_argc + 1] = NULL;
    return argv;
}

static char *default_output(Arena *arena, const char *input, const char *ext) {
    const char *base = strrchr(input, '/');
    base = base ? base + 1 : input;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".tsr") == 0) n -= 4;
    return arena_printf(arena, "%.*s%s", (int)n, base, ext);
}

/* The module name the output's base name gives (without extension), made a C identifier. */
static const char *output_module_name(Arena *arena, const char *output) {
    const char *base = strrchr(output, '/');
    base = base ? base + 1 : output;
    const char *dot = strrchr(base, '.');
    return abi_c_name(arena, arena_printf(arena, "%.*s", (int)(dot && dot != base ? dot - base : (long)strlen(base)), base));
}

/* The module name: --name, else the output's.  Where the output's would not do
 * (module_name_problem), an executable's internal symbols take it after "program_"; -c and
 * --shared, which export them, refuse it first (check_exported_module_name). */
static const char *module_name(Arena *arena, const Options *opt, const char *output) {
    if (opt->name) return opt->name;
    const char *name = output_module_name(arena, output);
    return module_name_problem(name) ? arena_printf(arena, "program_%s", name) : name;
}

/* -c and --shared: the module name prefixes every exported symbol and the header's macros, so
 * one the output's name gives that module_name_problem refuses is an error naming --name. */
static bool check_exported_module_name(Arena *arena, const Options *opt, const char *output) {
    if (opt->name) return true;
    const char *name = output_module_name(arena, output);
    const char *problem = module_name_problem(name);
    if (!problem) return true;
    diag_error_noloc("the output '%s' gives the module name '%s', which %s: the exported symbols and the header's "
                     "macros start with it; name the module with --name=NAME (a C identifier that starts with a "
                     "letter and is not tsr or tsr_…)", output, name, problem);
    return false;
}

/* libtsr.a beside tsrc (the build tree) or in ../lib (an installation); $TSR_RUNTIME overrides. */
static const char *runtime_library(Arena *arena) {
    const char *env = getenv("TSR_RUNTIME");
    if (env && *env) return env;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        const char *candidates[2] = {arena_printf(arena, "%s/libtsr.a", self), arena_printf(arena, "%s/../lib/libtsr.a", self)};
        for (int i = 0; i < 2; i++)
            if (access(candidates[i], R_OK) == 0) return candidates[i];
    }
    diag_error_noloc("cannot find the runtime library libtsr.a (looked beside tsrc and in ../lib; set TSR_RUNTIME "
                     "to its path)");
    return NULL;
}

/* LLVM reports some bad requests (an unknown --cpu for the target) by a fatal error: say it as
 * an error of ours, leave no partial output, exit 1. */
static void llvm_fatal(const char *reason) {
    fprintf(stderr, "tsrc: error: LLVM cannot generate this code: %s\n", reason);
    remove_temps();
    _exit(1);
}

/* ---- The GPU module compiled ahead of time -------------------------------------------------------- */

/* ptxas: $TSR_PTXAS (empty or "none": none), else the toolkit's (cg_cuda_toolkit_file) or the
 * first ptxas on PATH; NULL when there is none. */
static const char *find_ptxas(Arena *arena) {
    const char *env = getenv("TSR_PTXAS");
    if (env) return *env && strcmp(env, "none") != 0 ? env : NULL;
    const char *toolkit = cg_cuda_toolkit_file(arena, "bin/ptxas", X_OK);
    if (toolkit) return toolkit;
    const char *path = getenv("PATH");
    for (const char *at = path; at && *at;) {
        const char *colon = strchr(at, ':');
        size_t n = colon ? (size_t)(colon - at) : strlen(at);
        const char *p = arena_printf(arena, "%.*s/ptxas", (int)n, n ? at : ".");
        if (access(p, X_OK) == 0) return p;
        at = colon ? colon + 1 : NULL;
    }
    return NULL;
}

/* The module's PTX compiled by ptxas for its arch (the driver then loads it as it is, where it
 * would otherwise compile the PTX when the program starts: over a minute for GPT-2 124M's 426
 * kernels), into ptx->cubin and ptx->gpu, in a private directory in $TMPDIR.  Without ptxas,
 * nothing; where ptxas fails, a warning, and the program carries its PTX alone.  False after an
 * error (no private directory, a $TSR_PTXAS that cannot run). */
static bool compile_cubin(Arena *arena, PtxModule *ptx) {
    const char *ptxas = find_ptxas(arena);
    if (!ptxas) return true;
    int slot;
    if (temp_create(arena_printf(arena, "%s/tsrc-ptxas", temp_directory()), true, &slot) < 0) {
        diag_note((Span){0, 0, 0}, "ptxas's files go in $TMPDIR (default /tmp): set TMPDIR to a writable directory, "
                  "or TSR_PTXAS=none to carry the PTX alone");
        return false;
    }
    const char *in = arena_printf(arena, "%s/module.ptx", temp_slot_path(slot)), *out = arena_printf(arena, "%s/module.cubin", temp_slot_path(slot));
    const char *arch = arena_printf(arena, "-arch=%s", ptx->gpu.arch);
    FILE *f = fopen(in, "wx");
    bool written = f && fwrite(ptx->ptx.data, 1, ptx->ptx.size, f) == ptx->ptx.size;
    if (f && fclose(f) != 0) written = false;
    char *argv[] = {(char *)ptxas, (char *)arch, "-o", (char *)out, (char *)in, NULL};
    if (!written) diag_error_noloc("cannot write '%s': %s", in, strerror(errno));
    int status = written ? run_command(argv, NULL) : -1;
    char *cubin = NULL;
    size_t cubin_bytes = 0;
    bool read = status == 0 && file_read_all(out, SIZE_MAX, &cubin, &cubin_bytes) == FILE_READ_OK && cubin_bytes;
    if (read) ptx->cubin = (CgBytes){(unsigned char *)cubin, cubin_bytes};
    else free(cubin);
    if (status > 0 || (status == 0 && !read))
        diag_warning((Span){0, 0, 0}, "%s could not compile the PTX for %s%s; the program carries its PTX alone, which "
                     "the driver compiles when the program starts", ptxas, ptx->gpu.arch,
                     status > 0 ? arena_printf(arena, " (exit status %d)", status) : "");
    temp_remove(slot);
    ptx->gpu.cubin = ptx->cubin.data;
    ptx->gpu.cubin_size = ptx->cubin.size;
    return status >= 0;
}

/* Generate code for the target and write it to `fd` (or, fd < 0, to the standard output);
 * errors name `shown`. */
static bool emit_object(IrProgram *ir, const Options *opt, const Target *target, const char *module, CgFormat format,
                        bool with_main, int fd, const char *shown) {
    bool shared_api = opt->mode == MODE_SHARED;
    /* A GPU program: its kernels become PTX that the image carries; the object holds the host
     * side (routines launching them, main) for this machine. */
    PtxModule ptx = {0};
    Target host;
    const Target *gpu_target = NULL;
    if (target->kind == TARGET_CUDA) {
        if (!cg_ptx_emit(ir, target, opt->opt_level, module, &ptx)) return false;
        stage_done("code generation (PTX)");
        if (!compile_cubin(ir->arena, &ptx)) {
            free(ptx.ptx.data);
            return false;
        }
        stage_done("the PTX compiled ahead of time (ptxas)");
        gpu_target = target;
        target_select(NULL, opt->cpu, &host);
        target = &host;
    }
    size_t size;
    /* A program with no kernel at all (only data and prints) needs no GPU. */
    unsigned char *image = image_build(ir, module, (ImageCpu){target->cpu_features, target->cpu_shown},
                                       ptx.gpu.kernel_count ? &ptx.gpu : NULL, &size);
    ir->image_checksum = 0;
    for (int i = 7; image && i >= 0; i--) ir->image_checksum = ir->image_checksum << 8 | image[8 + i]; /* little-endian */
    CgOptions co = {.module = module, .opt_level = opt->opt_level, .target = target, .with_main = with_main,
                    .shared_api = shared_api, .profile = opt->profile, .gpu_first = ptx.function_first,
                    .gpu_target = gpu_target};
    CgBytes bytes;
    bool generated = cg_cpu_emit(ir, image, size, &co, format, &bytes);
    free(ptx.ptx.data);
    free(ptx.cubin.data);
    if (!generated) return false;
    stage_done("code generation (LLVM)");
    bool ok;
    if (fd >= 0) {
        ok = write_all(fd, bytes.data, bytes.size, shown);
    } else {
        ok = fwrite(bytes.data, 1, bytes.size, stdout) == bytes.size && fflush(stdout) == 0;
        if (!ok) diag_error_noloc("cannot write to the standard output: %s", strerror(errno));
    }
    free(bytes.data);
    return ok;
}

/* Put the linked program `linked` at `output`: renamed onto it, or, when `output` is a device,
 * FIFO or descriptor that open_direct() writes as it is, copied into it. */
static bool place_executable(const char *linked, const char *output) {
    Output out = {.path = output, .slot = -1};
    int direct = open_direct(&out, output);
    if (direct == 0) {
        if (rename(linked, output) == 0) return true;
        diag_error_noloc("cannot write '%s': %s", output, strerror(errno));
        return false;
    }
    if (direct < 0) return false;
    bool ok = true;
    int in = open(linked, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        diag_error_noloc("cannot read the linked program '%s': %s", linked, strerror(errno));
        ok = false;
    }
    char buf[65536];
    for (ssize_t n; ok && (n = read(in, buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            diag_error_noloc("cannot read the linked program '%s': %s", linked, strerror(errno));
            ok = false;
        } else {
            ok = write_all(out.fd, buf, (size_t)n, output);
        }
    }
    if (in >= 0) close(in);
    if (close(out.fd) != 0 && ok) {
        diag_error_noloc("cannot write '%s': %s", output, strerror(errno));
        ok = false;
    }
    return ok;
}

/* Compile to an executable at `output`: the object and the link's output are written in a
 * private directory, `workdir` (--run's) or one made beside `output`, and the linked program
 * is renamed onto `output`. */
static bool build_linked(IrProgram *ir, const Options *opt, const Target *target, const char *output,
                         const char *workdir, bool shared) {
    Arena *arena = ir->arena;
    const char *lib = runtime_library(arena);
    if (!lib) return false;
    int dir_slot = -1;
    if (!workdir) {
        /* Beside the output, so that the rename is atomic; but for an output written as it is
         * (a device, a FIFO, /dev/fd/N), in $TMPDIR: nothing is renamed onto it. */
        struct stat st;
        bool direct = named_descriptor(output) >= 0 ||
                      (stat(output, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)));
        const char *beside = direct ? arena_printf(arena, "%s/tsrc-link", temp_directory()) : output;
        /* `-o -foo`: the linker would read the paths made from it as its options */
        if (beside[0] == '-') beside = arena_printf(arena, "./%s", beside);
        if (temp_create(beside, true, &dir_slot) < 0) return false;
        workdir = temp_slot_path(dir_slot);
    }
    const char *object = arena_printf(arena, "%s/object.o", workdir);
    const char *linked = arena_printf(arena, "%s/a.out", workdir);
    int fd = open(object, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool ok = fd >= 0;
    if (!ok) diag_error_noloc("cannot write '%s': %s", output, strerror(errno));
    if (ok) ok = emit_object(ir, opt, target, module_name(arena, opt, output), CG_OBJECT, !shared, fd, output);
    if (fd >= 0 && close(fd) != 0 && ok) {
        diag_error_noloc("cannot write '%s': %s", output, strerror(errno));
        ok = false;
    }
    if (ok) {
        const char *cc = getenv("CC");
        char *exe_argv[] = {(char *)(cc && *cc ? cc : "cc"), "-o", (char *)linked, (char *)object, (char *)lib, "-lm",
                            "-lpthread", "-ldl", NULL};
        /* A shared library: the runtime inside and hidden, only the model's own symbols
         * exported (a version script), so that several models load side by side.  Never
         * unmapped (-z nodelete): the runtime's worker threads run its code, and outlive a
         * dlclose. */
        const char *version_script = arena_printf(arena, "%s/exports.map", workdir);
        const char *version_flag = arena_printf(arena, "-Wl,--version-script=%s", version_script);
        if (shared) {
            const char *module = module_name(arena, opt, output);
            FILE *f = fopen(version_script, "wx");
            if (!f || fprintf(f, "{ global: %s_*; local: *; };\n", module) < 0 || fclose(f) != 0) {
                diag_error_noloc("cannot write '%s': %s", version_script, strerror(errno));
                ok = false;
            }
        }
        char *so_argv[] = {(char *)(cc && *cc ? cc : "cc"), "-shared", "-Wl,-Bsymbolic", "-Wl,-z,nodelete", (char *)version_flag,
                           "-o", (char *)linked, (char *)object, "-Wl,--whole-archive", (char *)lib,
                           "-Wl,--no-whole-archive", "-lm", "-lpthread", "-ldl", NULL};
        char **argv = shared ? so_argv : exe_argv;
        int status = ok ? run_command(argv, NULL) : 0;
        if (shared) unlink(version_script);
        if (status != 0) {
            if (status > 0) diag_error_noloc("linking '%s' failed: '%s' exited with status %d", output, argv[0], status);
            ok = false;
        }
        stage_done("link");
    }
    unlink(object);
    if (ok) ok = place_executable(linked, output);
    if (dir_slot >= 0) temp_remove(dir_slot);
    else unlink(linked);
    return ok;
}

static bool build_executable(IrProgram *ir, const Options *opt, const Target *target, const char *output,
                             const char *workdir) {
    return build_linked(ir, opt, target, output, workdir, false);
}

/* --shared: the library at paths[0] and its manifest at paths[1], both or neither. */
static bool build_shared(IrProgram *ir, const Options *opt, const Target *target, const char *const *paths) {
    if (!check_exported_module_name(ir->arena, opt, paths[0]) ||
        !abi_check_names(ir, module_name(ir->arena, opt, paths[0])))
        return false;
    Output manifest;
    if (!output_open(&manifest, paths[1], true)) return false;
    bool linked = build_linked(ir, opt, target, paths[0], NULL, true), ok = linked;
    if (ok) manifest_write(ir, module_name(ir->arena, opt, paths[0]), manifest.file);
    if (ok && (fflush(manifest.file) != 0 || ferror(manifest.file))) {
        diag_error_noloc("cannot write '%s': %s", paths[1], strerror(errno));
        ok = false;
    }
    if (!output_commit(&manifest, ok)) ok = false;
    if (!ok && linked) unlink(paths[0]); /* a failed link left an earlier library as it was */
    return ok;
}

/* The files of -c: MODEL.o and, beside it, MODEL.h and MODEL.json (from "MODEL.o", or the
 * whole name when it does not end in ".o"). */
static void object_paths(Arena *arena, const char *output, const char *paths[3]) {
    size_t n = strlen(output);
    const char *stem = n > 2 && strcmp(output + n - 2, ".o") == 0 ? arena_printf(arena, "%.*s", (int)(n - 2), output) : output;
    paths[0] = output;
    paths[1] = arena_printf(arena, "%s.h", stem);
    paths[2] = arena_printf(arena, "%s.json", stem);
}

/* --shared: libMODEL.so and, beside it, libMODEL.json (from "libMODEL.so", or the whole name when
 * it does not end in ".so"); by default lib + the input's base name + .so, here. */
static void shared_paths(Arena *arena, const char *output, const char *paths[3]) {
    size_t n = strlen(output);
    paths[0] = output;
    paths[1] = arena_printf(arena, "%.*s.json", (int)(n > 3 && strcmp(output + n - 3, ".so") == 0 ? n - 3 : n), output);
}

static const char *shared_default(Arena *arena, const char *input) {
    const char *stem = default_output(arena, input, "");
    const char *base = strrchr(stem, '/');
    return arena_printf(arena, "lib%s.so", base ? base + 1 : stem);
}

/* Open the `n` files of a mode that writes several, all of them or none (a stream for the
 * manifest and header texts; the first a descriptor unless `first_stream`); *opened says how
 * many are open, for outputs_finish. */
static bool outputs_open(Output *out, const char *const *paths, int n, bool first_stream, int *opened) {
    bool ok = true;
    int i = 0;
    for (; i < n && ok; i++) ok = output_open(&out[i], paths[i], i > 0 || first_stream);
    *opened = ok ? i : i - 1;
    return ok;
}

/* Flush the `opened` files, then rename every one into place when all were written (`ok`), or
 * remove them all: every file is written before any is renamed.  Whether all were written. */
static bool outputs_finish(Output *out, const char *const *paths, int opened, bool ok) {
    for (int i = 0; i < opened; i++) {
        if (ok && out[i].file && (fflush(out[i].file) != 0 || ferror(out[i].file))) {
            diag_error_noloc("cannot write '%s': %s", paths[i], strerror(errno));
            ok = false;
        }
    }
    for (int i = 0; i < opened; i++)
        if (!output_commit(&out[i], ok)) ok = false;
    return ok;
}

/* --emit=ptx: MODEL.ptx and, beside it, MODEL.json (from "MODEL.ptx", or the whole name when
 * it does not end in ".ptx"). */
static void ptx_paths(Arena *arena, const char *output, const char *paths[2]) {
    size_t n = strlen(output);
    paths[0] = output;
    paths[1] = arena_printf(arena, "%.*s.json", (int)(n > 4 && strcmp(output + n - 4, ".ptx") == 0 ? n - 4 : n), output);
}

/* --emit=ptx: the PTX module (to `paths[0]`, or the standard output when there is no path) and
 * its manifest (paths[1]), both or neither. */
static bool emit_ptx(IrProgram *ir, const Options *opt, const Target *target, const char *paths[2], int n) {
    Arena *arena = ir->arena;
    const char *module = module_name(arena, opt, n ? paths[0] : default_output(arena, opt->input, ""));
    PtxModule ptx;
    if (!cg_ptx_emit(ir, target, opt->opt_level, module, &ptx)) return false;
    stage_done("code generation (PTX)");
    bool ok = true;
    if (n == 0) {
        ok = fwrite(ptx.ptx.data, 1, ptx.ptx.size, stdout) == ptx.ptx.size && fflush(stdout) == 0;
        if (!ok) diag_error_noloc("cannot write to the standard output: %s", strerror(errno));
    } else {
        Output out[2];
        int opened;
        ok = outputs_open(out, paths, 2, true, &opened);
        if (ok) {
            fwrite(ptx.ptx.data, 1, ptx.ptx.size, out[0].file);
            const char *base = strrchr(paths[0], '/');
            ptx_manifest_write(ir, module, &ptx, base ? base + 1 : paths[0], out[1].file);
        }
        ok = outputs_finish(out, paths, opened, ok);
    }
    free(ptx.ptx.data);
    return ok;
}

/* -c: MODEL.o, MODEL.h and MODEL.json, all or none. */
static bool build_object(IrProgram *ir, const Options *opt, const Target *target, const char *output) {
    Arena *arena = ir->arena;
    if (!check_exported_module_name(arena, opt, output)) return false;
    const char *module = module_name(arena, opt, output);
    if (!abi_check_names(ir, module)) return false;
    const char *paths[3];
    object_paths(arena, output, paths);
    Output out[3];
    int opened;
    bool ok = outputs_open(out, paths, 3, false, &opened);
    if (ok) ok = emit_object(ir, opt, target, module, CG_OBJECT, false, out[0].fd, paths[0]);
    if (ok) {
        header_write(ir, module, opt->input, target->kind == TARGET_CUDA, opt->profile, out[1].file);
        manifest_write(ir, module, out[2].file);
    }
    return outputs_finish(out, paths, opened, ok);
}

/* --run without --interp: build the executable in a private temporary directory, run it,
 * remove the directory. */
static int run_native(IrProgram *ir, const Options *opt, const Target *target) {
    char *dir = arena_printf(ir->arena, "%s/tsrc-run.XXXXXX", temp_directory());
    sigset_t old;
    signals_block(&old);
    bool made = mkdtemp(dir) != NULL;
    int err = errno, slot = made ? temp_add(dir, TEMP_DIR) : -1;
    signals_restore(&old);
    if (!made) {
        diag_error_noloc("cannot make a temporary directory in '%s': %s (set TMPDIR to a writable directory)",
                         temp_directory(), strerror(err));
        return 1;
    }
    const char *name = default_output(ir->arena, opt->input, "");
    const char *exe = arena_printf(ir->arena, "%s/%s", dir, name);
    int status = 1;
    if (build_executable(ir, opt, target, exe, dir)) {
        fflush(stdout);
        char **argv = program_argv(ir->arena, opt, exe);
        status = run_command(argv, name);
        if (status < 0) status = 1;
    }
    if (slot >= 0) temp_remove(slot);
    else remove_dir(dir);
    return status;
}

/* The files the mode writes (at most 3), without "-" (the standard output). */
static int mode_outputs(Arena *arena, const Options *opt, const char *paths[3]) {
    static const char *ext[] = {[CG_OBJECT] = ".o", [CG_ASM] = ".s", [CG_LLVM] = ".ll"};
    const char *out = opt->output;
    switch (opt->mode) {
    case MODE_DUMP_AST:
    case MODE_EMIT_IR:
    case MODE_PRINT_SHAPES:
    case MODE_EXPLAIN: break;
    case MODE_EMIT_CODE:
        if (opt->emit_ptx) {
            if (!out) out = default_output(arena, opt->input, ".ptx");
            if (strcmp(out, "-") == 0) return 0;
            ptx_paths(arena, out, paths);
            return 2;
        }
        if (!out) out = default_output(arena, opt->input, ext[opt->emit_format]);
        break;
    case MODE_OBJECT:
        object_paths(arena, out ? out : default_output(arena, opt->input, ".o"), paths);
        return 3;
    case MODE_SHARED:
        shared_paths(arena, out ? out : shared_default(arena, opt->input), paths);
        return 2;
    case MODE_BUILD:
        if (!out) out = default_output(arena, opt->input, "");
        break;
    default: return 0;
    }
    if (!out || strcmp(out, "-") == 0) return 0;
    paths[0] = out;
    return 1;
}

/* Whether `a` and `b` name one file: the same text, or the same device and inode. */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (strcmp(a, b) == 0) return true;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* one does not exist yet (an output): the same name in the same directory (`m` and `./m`) */
    const char *base_a = strrchr(a, '/'), *base_b = strrchr(b, '/');
    base_a = base_a ? base_a + 1 : a;
    base_b = base_b ? base_b + 1 : b;
    if (strcmp(base_a, base_b) != 0) return false;
    char dir_a[4096], dir_b[4096];
    snprintf(dir_a, sizeof dir_a, "%.*s", base_a == a ? 1 : (int)(base_a - a), base_a == a ? "." : a);
    snprintf(dir_b, sizeof dir_b, "%.*s", base_b == b ? 1 : (int)(base_b - b), base_b == b ? "." : b);
    return stat(dir_a, &sa) == 0 && stat(dir_b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* No output of the mode (nor the --depfile) may be the input file (the same device and inode,
 * so also through a link), a directory, a block device or a socket, or a name too long for the
 * file system; -c's object must be a regular file (or none yet), and the depfile none of the
 * outputs: refused before anything is compiled or written. */
static bool outputs_allowed(Arena *arena, const Options *opt) {
    static const char *object_files[3] = {"object", "header", "manifest"}, *shared_files[2] = {"library", "manifest"},
                      *ptx_files[2] = {"PTX", "manifest"};
    const char *paths[4];
    int n = mode_outputs(arena, opt, paths), outputs = n;
    struct stat in, st;
    if (stat(opt->input, &in) != 0) return true; /* source_load read it: it exists */
    bool ok = true;
    if (opt->depfile && strcmp(opt->depfile, "-") != 0) {
        for (int i = 0; i < outputs; i++)
            if (same_file(opt->depfile, paths[i])) {
                diag_error_noloc("the --depfile '%s' is also an output of this compile ('%s'): choose another name",
                                 opt->depfile, paths[i]);
                return false;
            }
        paths[n++] = opt->depfile;
    }
    for (int i = 0; i < n; i++) {
        const char *what = i == outputs                ? "--depfile"
                           : opt->mode == MODE_OBJECT ? object_files[i]
                           : opt->mode == MODE_SHARED ? shared_files[i]
                           : opt->emit_ptx && opt->mode == MODE_EMIT_CODE ? ptx_files[i] : "output";
        int fd = named_descriptor(paths[i]);
        if (fd >= 0 ? fstat(fd, &st) != 0 : stat(paths[i], &st) != 0) {
            if (fd < 0 && errno == ENAMETOOLONG) {
                diag_error_noloc("cannot write the %s '%s': %s", what, paths[i], strerror(errno));
                ok = false;
            }
            continue;
        }
        const char *why = unwritable_kind(st.st_mode);
        if (st.st_dev == in.st_dev && st.st_ino == in.st_ino) {
            diag_error_noloc("the %s '%s' is the input file '%s': tsrc does not overwrite its input (choose another "
                             "name%s)", what, paths[i], opt->input, i == outputs ? "" : " with -o");
        } else if (why) {
            diag_error_noloc("cannot write '%s': %s", paths[i], why);
        } else if (opt->mode == MODE_OBJECT && i == 0 && (fd >= 0 || !S_ISREG(st.st_mode))) {
            diag_error_noloc("cannot write '%s': -c writes an object with a header and a manifest named after it, "
                             "and '%s' is not a regular file (--emit=obj writes the object alone)", paths[i], paths[i]);
        } else if (outputs == 2 && i == 0 && (fd >= 0 || !S_ISREG(st.st_mode))) { /* --shared, --emit=ptx */
            diag_error_noloc("cannot write '%s': %s writes a manifest named after it ('%s'), and '%s' is not a regular "
                             "file%s", paths[i], opt->mode == MODE_SHARED ? "--shared" : "--emit=ptx", paths[1], paths[i],
                             opt->mode == MODE_SHARED ? "" : " (-o - writes the PTX alone to standard output)");
        } else {
            continue;
        }
        ok = false;
    }
    return ok;
}

static int generate(IrProgram *ir, const Options *opt, const Target *target) {
    Arena *arena = ir->arena;
    const char *paths[3] = {NULL, NULL, NULL};
    int n = mode_outputs(arena, opt, paths);
    switch (opt->mode) {
    case MODE_RUN:
        return opt->interp ? run_program(ir, opt) : run_native(ir, opt, target);
    case MODE_OBJECT:
        return build_object(ir, opt, target, paths[0]) ? 0 : 1;
    case MODE_SHARED:
        return build_shared(ir, opt, target, paths) ? 0 : 1;
    case MODE_EMIT_CODE: {
        if (opt->emit_ptx) return emit_ptx(ir, opt, target, paths, n) ? 0 : 1;
        const char *module = module_name(arena, opt, n ? paths[0] : default_output(arena, opt->input, ""));
        if (n == 0) return emit_object(ir, opt, target, module, opt->emit_format, false, -1, "-") ? 0 : 1;
        Output out;
        if (!output_open(&out, paths[0], false)) return 1;
        bool ok = emit_object(ir, opt, target, module, opt->emit_format, false, out.fd, paths[0]);
        return output_commit(&out, ok) ? 0 : 1;
    }
    default:
        return build_executable(ir, opt, target, paths[0], NULL) ? 0 : 1;
    }
}

/* A file name in a Make rule: spaces and '#' escaped with '\\', '$' doubled. */
static void make_word(FILE *out, const char *path) {
    for (const char *c = path; *c; c++) {
        if (*c == ' ' || *c == '#' || *c == '\\') fputc('\\', out);
        if (*c == '$') fputc('$', out);
        fputc(*c, out);
    }
}

/* Whether `path` (an output, "-" for standard output) is none of the program's sources: not a
 * module it opened (the program itself is refused before compiling, outputs_allowed), which is
 * known only once it has been elaborated; an error naming both otherwise. */
static bool not_a_source(const char *path, const char *what, const char *hint) {
    if (!path || strcmp(path, "-") == 0) return true;
    uint32_t count;
    const char **files = source_files(&count);
    bool ok = true;
    for (uint32_t i = 0; i < count && ok; i++)
        if (same_file(path, files[i])) {
            diag_error_noloc("the %s '%s' is '%s', which the program opens: tsrc does not overwrite its sources%s", what,
                             path, files[i], hint);
            ok = false;
        }
    free(files);
    return ok;
}

/* Every output of the mode is none of the program's sources (not_a_source). */
static bool outputs_not_sources(Arena *arena, const Options *opt) {
    const char *paths[3] = {NULL, NULL, NULL};
    int n = mode_outputs(arena, opt, paths);
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= not_a_source(paths[i], "output", " (choose another name with -o)");
    return ok;
}

/* --depfile: "OUTPUT: SOURCE MODULE…", the rule a build tool (Make, Ninja, CMake's DEPFILE) reads
 * to rebuild the output when the program or a module it opened changes; written like any
 * output (whole, or not at all), into `out`, open before the outputs are made so that a depfile
 * that cannot be written fails the compile before they are, and renamed into place after them
 * (compile).  The standard library is inside tsrc itself. */
static bool write_depfile(Arena *arena, const Options *opt, Output *out_file) {
    const char *paths[3] = {NULL, NULL, NULL};
    int n = mode_outputs(arena, opt, paths);
    if (!not_a_source(opt->depfile, "--depfile", "")) return false;
    uint32_t count;
    const char **files = source_files(&count);
    if (!output_open(out_file, opt->depfile, true)) {
        free(files);
        return false;
    }
    Output out = *out_file;
    for (int i = 0; i < n; i++) {
        make_word(out.file, paths[i]);
        fputs(i + 1 < n ? " " : ":", out.file);
    }
    for (uint32_t i = 0; i < count; i++) {
        fputc(' ', out.file);
        make_word(out.file, files[i]);
    }
    fputc('\n', out.file);
    free(files);
    if (fflush(out.file) != 0 || ferror(out.file)) {
        diag_error_noloc("cannot write '%s': %s", opt->depfile, strerror(errno));
        output_commit(out_file, false);
        return false;
    }
    return true;
}

static int compile(Options opt) {
    /* This tsrc generates x86-64 code and GPU code: another architecture is refused whatever the
     * mode (the schedule of --emit=sched-ir and --run --interp is a target's too). */
    size_t arch = opt.triple ? strcspn(opt.triple, "-") : 0; /* LLVM's names of x86-64 */
    if (opt.triple && !target_is_cuda(opt.triple) &&
        !((arch == 6 && strncmp(opt.triple, "x86_64", 6) == 0) || (arch == 5 && strncmp(opt.triple, "amd64", 5) == 0) ||
          (arch == 7 && strncmp(opt.triple, "x86_64h", 7) == 0))) {
        diag_error_noloc("unknown target '%s': not an x86-64 triple (this tsrc generates x86-64 code, "
                         "--target=x86_64-pc-linux-gnu, and GPU code, --target=cuda)", opt.triple);
        return 1;
    }
    uint32_t file = source_load(opt.input);
    if (!file) return 1;

    Arena *arena = arena_new();
    if (!outputs_allowed(arena, &opt)) {
        arena_free(arena);
        return 1;
    }
    stage_timing = opt.time_stages;
    stage_start = now_seconds();
    Module *module = parse_module(file, arena);
    stage_done("parse");
    int status = diag_error_count() ? 1 : 0;
    if (status == 0 && module->items.count == 0)
        diag_warning(span_make(file, 0, 0), "'%s' contains no top-level items", opt.input);

    if (status == 0) {
        switch (opt.mode) {
        case MODE_PARSE_ONLY:
            break;
        case MODE_DUMP_AST: {
            Output out;
            if (!output_open(&out, opt.output, true)) {
                status = 1;
                break;
            }
            ast_dump(out.file, module);
            if (!output_commit(&out, true)) status = 1;
            break;
        }
        default: {
            ElabOptions eo = {.include_dirs = opt.include_dirs, .include_count = opt.include_count};
            Program *program = elaborate(module, &eo);
            stage_done("elaboration, shape inference");
            IrProgram *ir = NULL;
            Target target;
            if (target_is_cuda(opt.triple)) target_select_cuda(opt.arch, &target);
            else target_select(opt.triple, opt.cpu, &target);
            target.reassociate = opt.reassociate;
            if (opt.gpu_blocks) target.gpu_blocks = opt.gpu_blocks;
            if (!diag_error_count()) ir = build_ir(program, &opt, &target);
            if (diag_error_count() || !outputs_not_sources(arena, &opt)) {
                status = 1;
            } else if (opt.mode == MODE_EMIT_IR || opt.mode == MODE_PRINT_SHAPES || opt.mode == MODE_EXPLAIN) {
                Output out;
                if (!output_open(&out, opt.output, true)) {
                    status = 1;
                } else {
                    if (opt.mode == MODE_EMIT_IR) ir_dump(ir, out.file);
                    else if (opt.mode == MODE_PRINT_SHAPES) program_print_shapes(program, out.file);
                    else if (!explain_tensors(program, out.file, opt.explain, opt.explain_count, opt.seed)) status = 1;
                    if (!output_commit(&out, status == 0)) status = 1;
                }
            } else if (!checks_only(&opt)) {
                Output depfile;
                bool dep = opt.depfile && write_depfile(arena, &opt, &depfile); /* false: closed */
                status = opt.depfile && !dep ? 1 : generate(ir, &opt, &target);
                if (dep && !output_commit(&depfile, status == 0) && status == 0) status = 1;
            }
            ir_free(ir);
            program_free(program);
            break;
        }
        }
    }
    arena_free(arena);
    return status;
}

/* The compiler recurses over trees and through the evaluation of user functions (bounded by
 * the parser's nesting limit and elaboration's call depth); it runs on a thread with a stack large
 * enough for both, so deep programs get an error message rather than a crash. */
enum { COMPILER_STACK = 512u << 20 };

typedef struct CompileJob {
    Options opt;
    int status;
} CompileJob;

static void *compile_thread(void *arg) {
    CompileJob *job = arg;
    signals_restore(outputs_startup_mask()); /* this thread takes the signals (main blocked them) */
    job->status = compile(job->opt);
    return NULL;
}

int main(int argc, char **argv) {
    CompileJob job = {parse_options(argc, argv), 1};
    LLVMInstallFatalErrorHandler(llvm_fatal);
    outputs_start();
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, COMPILER_STACK) != 0 ||
        pthread_create(&thread, &attr, compile_thread, &job) != 0) {
        signals_restore(outputs_startup_mask());
        job.status = compile(job.opt); /* no thread: run on the main stack */
    } else {
        pthread_join(thread, NULL);
        signals_restore(outputs_startup_mask()); /* a signal that came too late for the thread: taken now */
    }
    return job.status;
}
