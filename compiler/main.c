/* main.c — the tsrc driver: command line, then the pipeline stages in order.
 *
 * The driver is the only place that writes output files.  Each stage reports its own errors
 * through diag; the driver stops after the first stage that reported any and exits with
 * status 1.  Output files are written to a temporary name and renamed into place only when
 * everything succeeded, so a failed run never leaves a partial file behind.
 *
 * Pipeline (docs/cli.md): parse (lexer.re + parser.y + spec_parser.y) → elaborate and infer
 * shapes (elab.c + shape.c) → assignments and projections (assign.c + proj.c) → loop IR
 * (lower.c, opt.c, verified by ir.c) → the reference executor (interp.c) [→ codegen: later]. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "ast.h"
#include "diag.h"
#include "assign.h"
#include "elab.h"
#include "interp.h"
#include "ir.h"
#include "lower.h"
#include "opt.h"
#include "parse.h"

#ifndef TSRC_VERSION
#define TSRC_VERSION "0.1.0"
#endif

typedef enum {
    MODE_BUILD,
    MODE_PARSE_ONLY,
    MODE_DUMP_AST,
    MODE_CHECK,
    MODE_PRINT_SHAPES,
    MODE_EMIT_IR,
    MODE_RUN,
} Mode;

typedef struct Options {
    Mode mode;
    bool interp;
    bool no_opt;
    uint64_t seed;
    const char *input;
    const char *output;
    const char **include_dirs;
    int include_count;
} Options;

static void usage(FILE *out) {
    fputs("usage: tsrc [options] FILE.tsr\n"
          "\n"
          "Compile a .tsr tensor program.\n"
          "\n"
          "options:\n"
          "  --parse-only     parse the program (and every spec string in it), report errors\n"
          "  --dump-ast       print the syntax tree (to -o FILE if given)\n"
          "  --check          parse, elaborate and infer every shape; report all errors\n"
          "  --print-shapes   like --check, then print 'NAME : SHAPE' for every named tensor\n"
          "  --emit=ir        print the loop IR (docs/ir.md)\n"
          "  --run --interp   run the program with the reference executor and print every\n"
          "                   named tensor\n"
          "  --no-opt         skip the loop IR optimisations (virtualisation, folding)\n"
          "  --seed N         seed of parameter initialisation (default 0)\n"
          "  -o FILE          write the output to FILE\n"
          "  -I DIR           add DIR to the module search path (for 'open')\n"
          "  --help           show this help and exit\n"
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
static void free_include_dirs(void) {
    free(include_dirs);
    include_dirs = NULL;
}

static Options parse_options(int argc, char **argv) {
    Options opt = {0};
    opt.include_dirs = include_dirs = calloc((size_t)argc, sizeof *opt.include_dirs);
    atexit(free_include_dirs); /* a bad command line exits from inside this function */
    if (!opt.include_dirs) diag_fatal_oom();
    bool seen_mode = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--version") == 0) {
            printf("tsrc %s\n", TSRC_VERSION);
            exit(0);
        } else if (strcmp(a, "--parse-only") == 0 || strcmp(a, "--dump-ast") == 0 ||
                   strcmp(a, "--check") == 0 || strcmp(a, "--print-shapes") == 0) {
            Mode m = strcmp(a, "--parse-only") == 0 ? MODE_PARSE_ONLY
                   : strcmp(a, "--dump-ast") == 0   ? MODE_DUMP_AST
                   : strcmp(a, "--check") == 0      ? MODE_CHECK
                                                    : MODE_PRINT_SHAPES;
            if (seen_mode && opt.mode != m) bad_usage("'%s' conflicts with an earlier mode option", a);
            opt.mode = m;
            seen_mode = true;
        } else if (strcmp(a, "--emit=ir") == 0 || strcmp(a, "--run") == 0) {
            Mode m = a[2] == 'e' ? MODE_EMIT_IR : MODE_RUN;
            if (seen_mode && opt.mode != m) bad_usage("'%s' conflicts with an earlier mode option", a);
            opt.mode = m;
            seen_mode = true;
        } else if (strncmp(a, "--emit=", 7) == 0) {
            bad_usage("unknown output kind '%s' (this version emits 'ir')", a + 7);
        } else if (strcmp(a, "--interp") == 0) {
            opt.interp = true;
        } else if (strcmp(a, "--no-opt") == 0) {
            opt.no_opt = true;
        } else if (strcmp(a, "--seed") == 0) {
            if (i + 1 >= argc) bad_usage("'%s' needs a number", a);
            char *end;
            errno = 0;
            opt.seed = strtoull(argv[++i], &end, 10);
            if (errno || *end || !argv[i][0] || argv[i][0] == '-') bad_usage("'--seed' needs a non-negative integer, not '%s'", argv[i]);
        } else if (strcmp(a, "-o") == 0) {
            if (i + 1 >= argc) bad_usage("'%s' needs a file name", a);
            opt.output = argv[++i];
        } else if (strncmp(a, "-o", 2) == 0 && a[2]) {
            opt.output = a + 2;
        } else if (strcmp(a, "-I") == 0) {
            if (i + 1 >= argc) bad_usage("'%s' needs a directory", a);
            opt.include_dirs[opt.include_count++] = argv[++i];
        } else if (strncmp(a, "-I", 2) == 0 && a[2]) {
            opt.include_dirs[opt.include_count++] = a + 2;
        } else if (a[0] == '-' && a[1] != '\0') {
            bad_usage("unknown option '%s'", a);
        } else {
            if (opt.input) bad_usage("more than one input file ('%s')", a);
            opt.input = a;
        }
    }
    if (!opt.input) bad_usage("%s", "no input file");
    if (opt.interp && opt.mode != MODE_RUN) bad_usage("%s", "'--interp' goes with '--run'");
    if (opt.mode == MODE_RUN && !opt.interp)
        bad_usage("%s", "'--run' needs '--interp' in this version (the native backend comes later)");
    return opt;
}

/* Write through a temporary file renamed into place on success. */
typedef struct Output {
    FILE *file;
    char *temp_path;
    const char *final_path;
} Output;

static bool output_open(Output *out, const char *path) {
    memset(out, 0, sizeof *out);
    if (!path || strcmp(path, "-") == 0) {
        out->file = stdout;
        return true;
    }
    size_t n = strlen(path) + 32;
    out->temp_path = malloc(n);
    if (!out->temp_path) diag_fatal_oom();
    snprintf(out->temp_path, n, "%s.tmp%ld", path, (long)getpid());
    out->final_path = path;
    out->file = fopen(out->temp_path, "w");
    if (!out->file) {
        diag_error_noloc("cannot write '%s': %s", path, strerror(errno));
        free(out->temp_path);
        return false;
    }
    return true;
}

static bool output_commit(Output *out, bool keep) {
    if (out->file == stdout) return fflush(stdout) == 0;
    bool ok = fclose(out->file) == 0;
    if (ok && keep && rename(out->temp_path, out->final_path) != 0) {
        diag_error_noloc("cannot write '%s': %s", out->final_path, strerror(errno));
        ok = false;
    }
    if (!ok || !keep) remove(out->temp_path);
    free(out->temp_path);
    return ok && keep;
}

/* Shapes are closed: build the assignments, lower them to the loop IR, optimise, verify. */
static IrProgram *build_ir(Program *program, const Options *opt) {
    AssignOptions ao = {opt->seed};
    AssignResult ar;
    if (!assign_build(program, &ao, &ar)) return NULL;
    /* The routines are the program's functions; without any, one function computes every
     * named tensor. */
    if (ar.routine_count == 0) lower_function(ar.ir, ar.forward.name, ar.forward.items, ar.forward.count);
    for (uint32_t i = 0; i < ar.routine_count; i++)
        lower_function(ar.ir, ar.routines[i].name, ar.routines[i].items, ar.routines[i].count);
    if (ir_verify(ar.ir, stderr)) {
        diag_error_noloc("internal error: the loop IR is malformed after lowering");
        return ar.ir;
    }
    if (!opt->no_opt) {
        optimise(ar.ir);
        if (ir_verify(ar.ir, stderr)) diag_error_noloc("internal error: the loop IR is malformed after optimisation");
    }
    return ar.ir;
}

static int run_program(IrProgram *ir, Program *program, FILE *out) {
    if (program->has_main) {
        diag_error_noloc("the reference executor does not run 'main' in this version; without 'main', "
                         "--run --interp runs the routines in order and prints every named tensor");
        return 1;
    }
    Interp *in = interp_new(ir);
    if (!in) return 1;
    int status = 0;
    for (uint32_t f = 0; f < ir->function_count && status == 0; f++)
        if (!interp_run(in, &ir->functions[f])) status = 1;
    for (uint32_t i = 0; i < program->named_count && status == 0; i++) {
        uint32_t b = ir->value_buffer[program->named[i]->id];
        if (b != UINT32_MAX && !ir->buffers[b].is_virtual) interp_print(in, b, program->shown_names[i], out);
        b = ir->grad_buffer[program->named[i]->id];
        if (b != UINT32_MAX && !ir->buffers[b].is_virtual)
            interp_print(in, b, arena_printf(ir->arena, "%s.grad", program->shown_names[i]), out);
    }
    interp_free(in);
    return status;
}

static void ir_free(IrProgram *ir) {
    if (ir) arena_free(ir->arena);
}

static int compile(Options opt) {
    uint32_t file = source_load(opt.input);
    if (!file) return 1;

    Arena *arena = arena_new();
    Module *module = parse_module(file, arena);
    int status = diag_error_count() ? 1 : 0;
    if (status == 0 && module->items.count == 0)
        diag_warning(span_make(file, 0, 0), "'%s' contains no top-level items", opt.input);

    if (status == 0) {
        switch (opt.mode) {
        case MODE_PARSE_ONLY:
            break;
        case MODE_DUMP_AST: {
            Output out;
            if (!output_open(&out, opt.output)) {
                status = 1;
                break;
            }
            ast_dump(out.file, module);
            if (!output_commit(&out, true)) status = 1;
            break;
        }
        case MODE_CHECK:
        case MODE_PRINT_SHAPES:
        case MODE_EMIT_IR:
        case MODE_RUN: {
            ElabOptions eo = {opt.include_dirs, opt.include_count};
            Program *program = elaborate(module, &eo);
            IrProgram *ir = NULL;
            if (!diag_error_count() && (opt.mode == MODE_EMIT_IR || opt.mode == MODE_RUN))
                ir = build_ir(program, &opt);
            if (diag_error_count()) {
                status = 1;
            } else if (opt.mode == MODE_EMIT_IR || opt.mode == MODE_RUN) {
                Output out;
                if (!output_open(&out, opt.output)) {
                    status = 1;
                } else {
                    if (opt.mode == MODE_EMIT_IR) ir_dump(ir, out.file);
                    else status = run_program(ir, program, out.file);
                    if (!output_commit(&out, status == 0)) status = 1;
                }
            } else if (opt.mode == MODE_PRINT_SHAPES) {
                Output out;
                if (!output_open(&out, opt.output)) {
                    status = 1;
                } else {
                    program_print_shapes(program, out.file);
                    if (!output_commit(&out, true)) status = 1;
                }
            }
            ir_free(ir);
            program_free(program);
            break;
        }
        case MODE_BUILD:
            diag_error_noloc("code generation is not available in this version yet; "
                             "use --run --interp, --emit=ir, --check, --print-shapes, --parse-only or --dump-ast");
            status = 1;
            break;
        }
    }
    arena_free(arena);
    return status;
}

/* The compiler recurses over trees and through the evaluation of user functions (bounded by
 * the parser's nesting limit and elab.c's call depth); it runs on a thread with a stack large
 * enough for both, so deep programs get an error message rather than a crash. */
enum { COMPILER_STACK = 512u << 20 };

typedef struct CompileJob {
    Options opt;
    int status;
} CompileJob;

static void *compile_thread(void *arg) {
    CompileJob *job = arg;
    job->status = compile(job->opt);
    return NULL;
}

int main(int argc, char **argv) {
    CompileJob job = {parse_options(argc, argv), 1};
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, COMPILER_STACK) != 0 ||
        pthread_create(&thread, &attr, compile_thread, &job) != 0) {
        job.status = compile(job.opt); /* no thread: run on the main stack */
    } else {
        pthread_join(thread, NULL);
    }
    return job.status;
}
