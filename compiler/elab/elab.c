/* elab.c — elaboration: evaluate the compile-time language, build the tensor graph, emit
 * shape constraints (see elab.h; the relations of each logic are logic.c's table,
 * docs/inference.md §2 lists them).  This file is the stage's driver: elaborate() binds the
 * built-ins, opens the prelude, elaborates each item of the module (and of the modules it
 * opens), solves the scopes' size equations, settles paddings, checks what must be known before
 * the shapes close, and names the tensors for --print-shapes.  The rest of the stage is in the
 * files elab_internal.h lists.
 *
 * Values are arena-allocated and immutable.  An environment is a linked list of bindings.  A
 * closure is a parameter list, a body, the environment it was made in, the parameters bound so
 * far (partial application) and the parameter scope its inline definitions go to.
 *
 * Two evaluation modes: in a `let%op` body (tensor mode) numbers and containers are tensor
 * literals and arithmetic on numbers makes tensors (`0. + 0.` is a tensor whose shape the
 * context decides); everywhere else (value mode) they are compile-time values.  Arguments of
 * `!.` `!..`, labelled arguments, size fields and conditions are always evaluated in value mode.
 *
 * Requires: a parsed module (parse.h), the embedded standard library (build/gen/stdlib_blob.c,
 * made from the .tsr files of stdlib/ by tools/embed.sh), shape.h for the constraints and logic.h
 * for the relations they come from. */
#include "elab/elab_internal.h"
#include "runtime/image_format.h"

#include <ctype.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "front/parse.h"

/* ---- The embedded standard library --------------------------------------------------------- */

typedef struct StdlibFile {
    const char *name; /* "core.tsr" */
    const char *text;
    unsigned len;
} StdlibFile;
extern const StdlibFile tsr_stdlib_files[];
extern const unsigned tsr_stdlib_file_count;

/* ---- Items --------------------------------------------------------------------------------- */

static void add_named(Elab *e, Tensor *t, const char *name) {
    if (t->kind == TENSOR_PARAM && t->name && strcmp(t->name, name) == 0) return; /* listed already */
    if (!t->name) t->name = name;
    NamedEntry ne = {t, name, NULL, NULL};
    ARENA_PUSH(e->arena, e->entries, e->entry_count, e->entry_cap, ne);
}

static void elab_module(Elab *e, Module *m);

/* Loads module `name` once (by `open`, or by the first qualified name `M.x`): its items are
 * elaborated as a unit of their own (its globals' owner), which sees the built-ins, the prelude
 * and its own definitions but nothing the program defined (a user's `relu` or `log` does not
 * change what Nn computes); its routines, options and main are the program's.  Each of its
 * definitions is then bound as `M.name` for every unit; `open` copies them into the opener
 * (import_module). */
/* A module opened again while it is still being loaded (C opens D, D opens C) would see only
 * the part of C before its open: an error naming the cycle.  True when reported. */
static bool report_open_cycle(Elab *e, const char *name, Span span) {
    uint32_t start = e->loading_count;
    for (uint32_t k = 0; k < e->loading_count && start == e->loading_count; k++)
        if (strcmp(e->loading[k], name) == 0) start = k;
    if (start == e->loading_count) return false;
    char chain[512] = "";
    size_t used = 0;
    for (uint32_t k = start; k < e->loading_count && used < sizeof chain; k++)
        used += (size_t)snprintf(chain + used, sizeof chain - used, "%s -> ", e->loading[k]);
    diag_error(span, "the opens make a cycle: %s%s (a module cannot use definitions that come after its own open)",
               chain, name);
    for (uint32_t k = start + 1; k < e->loading_count; k++)
        diag_note(e->loading_at[k], "module '%s' opens '%s' here", e->loading[k - 1], e->loading[k]);
    return true;
}

/* Whether `path` is the program's own file (a program that opens itself). */
static bool is_main_file(const Elab *e, const char *path) {
    struct stat a, b;
    return e->main_path && stat(path, &a) == 0 && stat(e->main_path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static void load_module_once(Elab *e, const char *name, Span span);

/* Load module `name` unless it is loaded; a module that failed to load (reported then) is not
 * tried again, and its names are not reported as missing one by one (module_failed). */
static void load_module(Elab *e, const char *name, Span span) {
    if (module_failed(e, name)) return;
    unsigned errors = diag_error_count();
    load_module_once(e, name, span);
    if (diag_error_count() > errors) ARENA_PUSH(e->arena, e->failed_modules, e->failed_module_count, e->failed_module_cap, name);
}

bool module_failed(const Elab *e, const char *name) {
    for (uint32_t i = 0; i < e->failed_module_count; i++)
        if (strcmp(e->failed_modules[i], name) == 0) return true;
    return false;
}

static int by_generation(const void *a, const void *b) {
    uint32_t x = (*(GlobalEntry *const *)a)->gen, y = (*(GlobalEntry *const *)b)->gen;
    return x < y ? -1 : x > y;
}

/* The definitions of unit `unit` (not the copies its opens made), in the order they were
 * defined (*count of them; arena). */
static GlobalEntry **unit_globals(Elab *e, uint32_t unit, uint32_t *count) {
    GlobalEntry **found = NULL;
    uint32_t cap = 0;
    *count = 0;
    for (uint32_t b = 0; b < GLOBAL_BUCKETS; b++)
        for (GlobalEntry *g = e->global_table[b]; g; g = g->next)
            if (g->owner == unit && !g->opened_from) ARENA_PUSH(e->arena, found, *count, cap, g);
    if (*count) qsort(found, *count, sizeof *found, by_generation);
    return found;
}

/* The standard library's module (besides the prelude) whose file defines `name` at the start of a
 * line (`let NAME`, `let%op NAME`, `let rec NAME`, `operator NAME`), as its name ("Nn"), or NULL:
 * for the note at a name used without `open`, before any use loaded the module. */
const char *stdlib_module_defining(Elab *e, const char *name) {
    if (name[0] == '_') return NULL; /* a module's own */
    static const char *const starts[] = {"let%op ", "let%cd ", "let rec ", "let ", "operator "};
    size_t n = strlen(name);
    for (unsigned i = 0; i < tsr_stdlib_file_count; i++) {
        if (strcmp(tsr_stdlib_files[i].name, "core.tsr") == 0) continue;
        const char *text = tsr_stdlib_files[i].text, *end = text + tsr_stdlib_files[i].len;
        for (const char *line = text; line < end;) {
            for (size_t k = 0; k < sizeof starts / sizeof *starts; k++) {
                size_t s = strlen(starts[k]);
                if ((size_t)(end - line) > s + n && memcmp(line, starts[k], s) == 0 && memcmp(line + s, name, n) == 0 &&
                    (line[s + n] == ' ' || line[s + n] == '=')) {
                    char *module = arena_printf(e->arena, "%s", tsr_stdlib_files[i].name);
                    module[0] = (char)toupper((unsigned char)module[0]);
                    *strrchr(module, '.') = '\0';
                    return module;
                }
            }
            const char *next = memchr(line, '\n', (size_t)(end - line));
            line = next ? next + 1 : end;
        }
    }
    return NULL;
}

static void load_module_once(Elab *e, const char *name, Span span) {
    for (uint32_t i = 0; i < e->opened_count; i++)
        if (strcmp(e->opened[i], name) == 0) {
            report_open_cycle(e, name, span);
            return;
        }
    ARENA_PUSH(e->arena, e->opened, e->opened_count, e->opened_cap, name);
    uint32_t none = OWNER_BASE, slot = e->opened_owner_count; /* set once the module is elaborated */
    ARENA_PUSH(e->arena, e->opened_owner, e->opened_owner_count, e->opened_owner_cap, none);
    char *file = arena_printf(e->arena, "%s.tsr", name); /* whole, however long the name */
    file[0] = (char)tolower((unsigned char)file[0]);
    uint32_t src = 0;
    for (unsigned i = 0; i < tsr_stdlib_file_count && !src; i++)
        if (strcmp(tsr_stdlib_files[i].name, file) == 0)
            src = source_add(arena_printf(e->arena, "<stdlib>/%s", file), tsr_stdlib_files[i].text, tsr_stdlib_files[i].len);
    for (int i = -1; i < (e->options ? e->options->include_count : 0) && !src; i++) {
        const char *dir = i < 0 ? e->main_dir : e->options->include_dirs[i];
        char *path = arena_printf(e->arena, "%s/%s", dir, file);
        size_t len;
        char *text;
        FileRead r = file_read_all(path, MAX_SOURCE_BYTES, &text, &len);
        if (r == FILE_READ_OK) {
            if (is_main_file(e, path)) {
                free(text);
                diag_error(span, "module '%s' is this program's own file ('%s'): a program cannot open itself", name,
                           path);
                return;
            }
            src = source_add(path, text, len);
            free(text);
        } else if (r != FILE_CANNOT_OPEN || (errno != ENOENT && errno != ENOTDIR)) {
            /* there, but not to be read: a directory, too large, unreadable */
            diag_file_read(span, path, r, errno);
            return;
        }
    }
    if (!src) {
        diag_error(span, "module '%s' not found: no '%s' in the standard library%s", name, file,
                   e->options && e->options->include_count ? ", the -I directories or beside the program"
                                                            : " or beside the program (add directories with -I)");
        for (int i = -1; i < (e->options ? e->options->include_count : 0); i++) { /* Upper.tsr for Upper */
            const char *dir = i < 0 ? e->main_dir : e->options->include_dirs[i];
            const char *as_written = arena_printf(e->arena, "%s/%s.tsr", dir, name);
            if (access(as_written, F_OK) == 0) {
                diag_note(span, "'%s' exists, but module %s is read from '%s': its name with the first letter in "
                          "lower case", as_written, name, file);
                return;
            }
        }
        /* A misspelt module of the standard library (Trian for Train). */
        const char *modules[16];
        unsigned count = 0;
        for (unsigned i = 0; i < tsr_stdlib_file_count && count < 16; i++) {
            char *m = arena_printf(e->arena, "%s", tsr_stdlib_files[i].name);
            m[0] = (char)toupper((unsigned char)m[0]);
            char *dot = strrchr(m, '.');
            if (dot) *dot = 0;
            if (strcmp(m, "Core") != 0) modules[count++] = m; /* opened in every program */
        }
        const char *near = diag_closest_name(name, modules, count);
        if (near) diag_note(span, "did you mean the standard library's module '%s'?", near);
        return;
    }
    unsigned errors = diag_error_count(); /* an error of the program before it is not the module's */
    Module *m = parse_module(src, e->arena);
    if (diag_error_count() > errors) return;
    Scope *scope = e->scope; /* a qualified name may load a module in the middle of an item */
    uint32_t opener = e->owner, unit = ++e->owner_count;
    e->opened_owner[slot] = unit;
    ARENA_PUSH(e->arena, e->loading, e->loading_count, e->loading_cap, name);
    ARENA_PUSH(e->arena, e->loading_at, e->loading_at_count, e->loading_at_cap, span);
    e->owner = unit;
    globals_now(e);
    elab_module(e, m);
    e->owner = opener;
    e->loading_count--;
    e->loading_at_count--;
    e->scope = scope;
    /* Every name the module defines is M.name too, for every unit, but its own (private) ones. */
    uint32_t count;
    GlobalEntry **names = unit_globals(e, unit, &count);
    for (uint32_t i = 0; i < count; i++)
        if (names[i]->name[0] != '_')
            bind_global_of(e, OWNER_BASE, arena_printf(e->arena, "%s.%s", name, names[i]->name), names[i]->value,
                           NULL);
    globals_now(e); /* the opener's globals again */
}

/* The unit that owns loaded module `name`'s globals, or OWNER_BASE when it is not loaded. */
static uint32_t module_unit(const Elab *e, const char *name) {
    uint32_t unit = OWNER_BASE;
    for (uint32_t i = 0; i < e->opened_count; i++)
        if (strcmp(e->opened[i], name) == 0) unit = e->opened_owner[i];
    return unit;
}

/* `open M` once M is loaded: M's definitions become the opener's, in the order M defined them (a
 * name M defined twice is its last definition); the names M has from its own opens are not
 * passed on (as OCaml's open: a helper that opens Nn does not bring Nn's names back over the
 * program's), nor its private ones, whose names begin with '_' (Nn's _refuse_size). */
static void import_module(Elab *e, const char *name) {
    uint32_t unit = module_unit(e, name);
    if (unit == OWNER_BASE || unit == e->owner) return; /* not loaded (reported), or the opener itself */
    uint32_t count;
    GlobalEntry **found = unit_globals(e, unit, &count);
    for (uint32_t i = 0; i < count; i++)
        if (found[i]->name[0] != '_') bind_global_of(e, e->owner, found[i]->name, found[i]->value, name);
}

/* `open M`: reported at M, the item's last token. */
static void open_module(Elab *e, const Node *item) {
    uint32_t len = (uint32_t)strlen(item->name);
    Span name = item->span.end - item->span.start >= len ? span_make(item->span.file, item->span.end - len, item->span.end)
                                                        : item->span;
    load_module(e, item->name, name);
    if (!module_failed(e, item->name)) import_module(e, item->name);
}

/* Whether loaded module `module` defines `name` itself (a private name too). */
static bool module_defines(Elab *e, const char *module, const char *name) {
    for (uint32_t i = 0; i < e->opened_count; i++) {
        if (strcmp(e->opened[i], module) != 0) continue;
        uint32_t count;
        GlobalEntry **names = unit_globals(e, e->opened_owner[i], &count);
        for (uint32_t k = 0; k < count; k++)
            if (strcmp(names[k]->name, name) == 0) return true;
    }
    return false;
}

/* The module whose definition `name` loaded module `module` has through an open of its own (a
 * helper that opens Nn has softmax, but does not pass it on), or NULL. */
static const char *module_opened_name(Elab *e, const char *module, const char *name) {
    uint32_t unit = module_unit(e, module);
    if (unit == OWNER_BASE) return NULL;
    for (GlobalEntry *g = e->global_table[name_hash(name) % GLOBAL_BUCKETS]; g; g = g->next) /* newest first */
        if (g->owner == unit && strcmp(g->name, name) == 0) return g->opened_from;
    return NULL;
}

/* M.name: loads M when it is not yet. */
Value *qualified_name(Elab *e, const Node *n) {
    load_module(e, n->a->name, n->a->span);
    if (module_failed(e, n->a->name)) return &error_value; /* reported where it failed */
    Value *v = lookup_global(e, arena_printf(e->arena, "%s.%s", n->a->name, n->name), e->generation, e->owner);
    if (!v) {
        Value *err = fail(n->span, "module '%s' has no definition '%s'", n->a->name, n->name);
        const char *near = closest_in_module(e, n->a->name, n->name), *opened;
        if (n->name[0] == '_' && module_defines(e, n->a->name, n->name))
            diag_note(n->span, "a name beginning with '_' is its module's own: it is reachable inside the module "
                      "alone, neither as '%s.%s' nor through 'open %s'", n->a->name, n->name, n->a->name);
        else if (lookup_global(e, n->name, e->generation, OWNER_BASE)) /* Nn.relu: the prelude's */
            diag_note(n->span, "'%s' is a built-in or an operator of the prelude, which every program and module has "
                      "without a module's name: write '%s'", n->name, n->name);
        else if ((opened = module_opened_name(e, n->a->name, n->name)))
            diag_note(n->span, "'%s' is %s's, which %s opens; a module's open does not pass the names on: write "
                      "'%s.%s'", n->name, opened, n->a->name, opened, n->name);
        else if (near) diag_note(n->span, "did you mean '%s.%s'?", n->a->name, near);
        return err;
    }
    return v;
}

static void elab_option(Elab *e, const Node *item) {
    static const char *const reserved[] = {TSR_BUILTIN_OPTIONS};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcmp(item->name, reserved[i]) == 0) /* still bound below: its uses are no errors of their own */
            diag_error(item->span, "'--%s' is an option of every executable; choose another name for this option",
                       item->name);
    Program *p = e->program;
    for (uint32_t i = 0; i < p->option_count; i++)
        if (strcmp(p->options[i].name, item->name) == 0) {
            diag_error(item->span, "option '%s' is declared twice", item->name);
            diag_note(p->options[i].span, "the first declaration");
            return;
        }
    Value *v = eval(e, item->a, e->globals, MODE_VALUE);
    if (v->kind != V_ERROR &&
        (!is_number(v) || (v->kind == V_INT && (v->as.i > (INT64_C(1) << 53) || v->as.i < -(INT64_C(1) << 53))) ||
         (v->kind == V_FLOAT && !isfinite(v->as.f)))) {
        diag_error(item->a->span, "an option's default is an integer (at most 2^53 in size) or a finite number, but "
                   "this is %s", is_number(v) ? "out of that range" : kind_noun(v));
        v = &error_value;
    }
    if (v->kind == V_ERROR) { /* bound all the same: its uses are no errors of their own */
        bind_global(e, item->name, v);
        return;
    }
    ProgramOption o = {.name = item->name, .is_float = v->kind == V_FLOAT, .value = number_of(v), .span = item->span};
    ARENA_PUSH(e->arena, p->options, p->option_count, p->option_cap, o);
    Value *opt = new_value(e, V_OPTION);
    opt->as.option.id = p->option_count - 1;
    bind_global(e, item->name, opt);
}

static const char *item_keyword(const Node *item) {
    return item->kind == ITEM_INDEX ? "index" : item->kind == ITEM_DATA ? "data" : "input";
}

/* An index, data or input item names something of the run time (a symbol of the image, a
 * --data NAME, an accessor of the header), so a second one of the same name is an error, not a
 * shadowing: false (reported) when `name` was declared by such an item already. */
static bool declared_once(Elab *e, const Node *item, const char *name) {
    for (uint32_t i = 0; i < e->run_time_item_count; i++) {
        const Node *first = e->run_time_items[i];
        const char *first_name = first->kind == ITEM_INPUT ? first->a->list.items[0]->name : first->name;
        if (strcmp(first_name, name) != 0) continue;
        diag_error(item->span, "'%s' is declared twice", name);
        diag_note(first->span, "the first declaration (%s '%s')", item_keyword(first), name);
        return false;
    }
    ARENA_PUSH(e->arena, e->run_time_items, e->run_time_item_count, e->run_time_item_cap, item);
    return true;
}

/* `let%op loss = mse y`: a function given some of its arguments, where a tensor was meant (its
 * uses said only that `loss` is a function).  How many it has and how many it still takes. */
static void note_partial_tensor(const Node *item, const Closure *c) {
    uint32_t positional = 0, given = 0;
    for (uint32_t i = 0; i < c->param_count; i++)
        if (c->params[i]->flag == PARAM_POSITIONAL) {
            positional++;
            if (i < c->next) given++;
        }
    const char *fn = c->fn_name ? c->fn_name : c->shown_as ? c->shown_as : "the function";
    diag_warning(c->partial, "'%s' is given %u of its %u arguments here, so '%s' is a function, not a tensor", fn, given,
                 positional, item->name);
    diag_note(item->span, "a tensor needs them all (%s … with %u more); a function of the rest is written with its "
              "parameters, let%%op %s x = …", fn, positional - given, item->name);
}

static void elab_item(Elab *e, const Node *item) {
    e->scope = NULL;
    if ((item->kind == ITEM_INDEX || item->kind == ITEM_DATA) && !declared_once(e, item, item->name)) return;
    if (item->kind == ITEM_INPUT && item->a->list.count > 0 &&
        !declared_once(e, item, item->a->list.items[0]->name))
        return;
    switch (item->kind) {
    case ITEM_LET: {
        Mode mode = (item->flag & LET_OP) ? MODE_TENSOR : MODE_VALUE;
        bool code = (item->flag & LET_CD) != 0;
        Value *v;
        if (mode == MODE_TENSOR && item->list.count == 0) e->scope = new_scope(e, item->name, true);
        e->globals = eval_binding(e, item->name, &item->list, item->a, (item->flag & LET_REC) != 0, mode,
                                  code, true, e->globals, &v);
        if ((item->flag & LET_OP) && v->kind == V_TENSOR && strcmp(item->name, "_") != 0)
            add_named(e, v->as.tensor, item->name);
        if ((item->flag & LET_OP) && item->list.count == 0 && v->kind == V_CLOSURE && v->as.closure->partial.file)
            note_partial_tensor(item, v->as.closure);
        break;
    }
    case ITEM_OPERATOR: {
        Value *v = &error_value; /* a malformed declaration: its uses stay silent */
        if (check_operator(item)) {
            v = new_value(e, V_OPERATOR);
            v->as.op = item;
        }
        bind_global(e, item->name, v);
        break;
    }
    case ITEM_INDEX: {
        Value *r = eval(e, item->a, e->globals, MODE_VALUE);
        if (r->kind != V_ERROR && (r->kind != V_INT || r->as.i < 1 || r->as.i > INT32_MAX)) {
            if (r->kind == V_INT)
                diag_error(item->a->span,
                           "the range of an index must be a positive integer below 2^31, but this is %lld",
                           (long long)r->as.i);
            else
                diag_error(item->a->span, "the range of an index must be a positive integer below 2^31, but this is %s",
                           kind_noun(r));
            r = &error_value;
        }
        if (r->kind == V_ERROR) { /* bound all the same: its uses are no errors of their own */
            bind_global(e, item->name, r);
            break;
        }
        bind_global(e, item->name, index_value(e, item->name, r->as.i, item->a->span, item->span, false));
        break;
    }
    case ITEM_DATA: {
        Value *v = eval(e, item->a, e->globals, MODE_VALUE);
        if (v->kind == V_ERROR) { /* bound all the same: its uses are no errors of their own */
            bind_global(e, item->name, v);
            break;
        }
        if (v->kind != V_DATASET) {
            diag_error(item->a->span, "'data' takes a data source such as half_moons or npy, but this is %s",
                       kind_noun(v));
            if (v->kind == V_TENSOR)
                diag_note(item->span, "a tensor, a data item's included, is named with let%%op: let%%op %s = …",
                          item->name);
            bind_global(e, item->name, &error_value);
            break;
        }
        DataSource *d = v->as.dataset.source;
        if (d->name) {
            diag_error(item->a->span, "this data source already belongs to '%s'", d->name);
            break;
        }
        d->name = item->name;
        ARENA_PUSH(e->arena, e->program->sources, e->program->source_count, e->program->source_cap, d);
        v->as.dataset.name = item->name;
        if (v->as.dataset.count == 1 && !v->as.dataset.fields[0].name) { /* one tensor: the item is it */
            name_runtime_sizes(e, v->as.dataset.fields[0].value->as.tensor, item->name);
            add_named(e, v->as.dataset.fields[0].value->as.tensor, item->name);
            bind_global(e, item->name, v->as.dataset.fields[0].value);
            break;
        }
        for (uint32_t i = 0; i < v->as.dataset.count; i++) {
            Field *f = &v->as.dataset.fields[i];
            add_named(e, f->value->as.tensor, arena_printf(e->arena, "%s.%s", item->name, f->name));
        }
        bind_global(e, item->name, v);
        break;
    }
    case ITEM_INPUT: {
        const Node *rec = item->a;
        const Node *first = rec->list.items[0];
        Row rows[ROW_KINDS];
        bool given[ROW_KINDS];
        if (first->a) diag_error(first->span, "an input is filled by the caller; it takes no initial value");
        if (first->a || !record_sizes(e, rec, e->globals, first->name, SIZES_DECLARE, rows, given, NULL)) {
            bind_global(e, first->name, &error_value); /* its uses say nothing more */
            break;
        }
        Tensor *t = new_tensor(e, TENSOR_INPUT, rec->span);
        for (uint32_t i = 1; i < rec->list.count; i++) {
            const Node *f = rec->list.items[i];
            if (strcmp(f->name, "dtype") != 0) continue;
            Value *v = f->a ? eval(e, f->a, e->globals, MODE_VALUE) : NULL;
            if (!v) diag_error(f->span, "field 'dtype' needs an element type, e.g. dtype = \"i32\"");
            else dtype_of_value(v, f->a->span, arena_printf(e->arena, "input '%s'", first->name), &t->dtype);
        }
        Shape none = closed_shape(e, rec->span, arena_printf(e->arena, "input '%s'", first->name));
        for (int k = 0; k < ROW_KINDS; k++) t->shape.rows[k] = given[k] ? rows[k] : none.rows[k];
        add_named(e, t, first->name);
        bind_global(e, first->name, tensor_value(e, t));
        break;
    }
    case ITEM_OPEN: open_module(e, item); break;
    case ITEM_OPTION: elab_option(e, item); break;
    case ITEM_ROUTINE: {
        Routine r = {.name = item->name, .span = item->span};
        elab_code(e, &r, item->a, e->globals);
        Program *p = e->program;
        for (uint32_t i = 0; i < p->routine_count; i++)
            if (strcmp(p->routines[i].name, item->name) == 0) {
                diag_error(item->span, "routine '%s' is defined twice", item->name);
                diag_note(p->routines[i].span, "the first definition");
                return;
            }
        ARENA_PUSH(e->arena, p->routines, p->routine_count, p->routine_cap, r);
        break;
    }
    case ITEM_MAIN: {
        Program *p = e->program;
        /* An opened module's main is the program's only when the program has none of its own
         * (a program that reruns a module under other options); the first such module's. */
        if (e->loading_count && (e->program_file_has_main || p->has_main)) break;
        if (p->has_main) {
            diag_error(item->span, "'main' is defined twice");
            diag_note(p->main_span, "the first definition");
            break;
        }
        p->has_main = true;
        p->main_span = item->span;
        MainList steps = {0};
        elab_main(e, item->a, e->globals, &steps);
        p->main = steps.items;
        p->main_count = steps.count;
        break;
    }
    default: break;
    }
    e->scope = NULL;
}

static void elab_module(Elab *e, Module *m) {
    const NodeList *outer = e->items; /* a module loaded in the middle of another's item */
    uint32_t outer_at = e->item_at;
    e->items = &m->items;
    for (e->item_at = 0; e->item_at < m->items.count; e->item_at++) elab_item(e, m->items.items[e->item_at]);
    e->items = outer;
    e->item_at = outer_at;
}

/* ---- Names shown by --print-shapes ---------------------------------------------------------- */

/* A set of names (open addressing) for making shown names unique. */
typedef struct NameSet {
    const char **slots;
    unsigned *next_suffix; /* per slot: the next #k to try when this name is a base again */
    uint32_t cap, count;
} NameSet;

/* Returns the slot of name, adding it if absent (*added says which). */
static uint32_t name_set_add(Elab *e, NameSet *set, const char *name, bool *added) {
    if (2 * (set->count + 1) > set->cap) {
        uint32_t cap = set->cap ? set->cap * 2 : 64;
        NameSet grown = {arena_alloc(e->arena, cap * sizeof(char *)), arena_alloc(e->arena, cap * sizeof(unsigned)),
                         cap, 0};
        for (uint32_t i = 0; i < set->cap; i++) {
            if (!set->slots[i]) continue;
            bool dummy;
            grown.next_suffix[name_set_add(e, &grown, set->slots[i], &dummy)] = set->next_suffix[i];
        }
        *set = grown;
    }
    for (uint32_t i = name_hash(name) % set->cap;; i = (i + 1) % set->cap) {
        if (!set->slots[i]) {
            set->slots[i] = name;
            set->next_suffix[i] = 2;
            set->count++;
            *added = true;
            return i;
        }
        if (strcmp(set->slots[i], name) == 0) {
            *added = false;
            return i;
        }
    }
}

/* base, or base#2, base#3, ... the first not taken. */
static const char *unique(Elab *e, NameSet *set, const char *base) {
    bool added;
    uint32_t slot = name_set_add(e, set, base, &added);
    while (!added) {
        unsigned k = set->next_suffix[slot]++;
        const char *name = arena_printf(e->arena, "%s#%u", base, k);
        name_set_add(e, set, name, &added);
        if (added) return name;
        slot = name_set_add(e, set, base, &added); /* the set may have grown */
    }
    return base;
}

static void assign_names(Elab *e) {
    NameSet qual = {0};
    for (uint32_t i = 0; i < e->scope_count; i++) {
        Scope *s = e->scopes[i];
        if (s->toplevel || (!s->binding && !s->fn_name)) continue;
        s->shown = unique(e, &qual, s->binding ? s->binding : s->fn_name);
    }
    NameSet names = {0};
    /* The arrays a checkpoint keeps its counters and its parameters' names in are taken: a
     * parameter `runs` of a layer bound to `tsrc` is tsrc.runs#2 (docs/runtime.md §14). */
    static const char *const reserved[] = {"tsrc.runs", "tsrc.shuffles", "tsrc.seed", "tsrc.parameters"};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++) {
        bool added;
        name_set_add(e, &names, reserved[i], &added);
    }
    Program *p = e->program;
    for (uint32_t i = 0; i < e->entry_count; i++) {
        NamedEntry *ne = &e->entries[i];
        const char *base = ne->name;
        if (!base) base = ne->scope && ne->scope->shown ? arena_printf(e->arena, "%s.%s", ne->scope->shown,
                                                                        ne->param_name)
                                                        : ne->param_name;
        const char *shown = unique(e, &names, base);
        if (!ne->tensor->shown) ne->tensor->shown = shown;
        uint32_t c = p->named_count, cap = p->named_cap;
        ARENA_PUSH(e->arena, p->named, p->named_count, p->named_cap, ne->tensor);
        ARENA_PUSH(e->arena, p->shown_names, c, cap, shown);
    }
    /* A state tensor of an optimiser is named after the parameter it serves: layer.w.m. */
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind == TENSOR_STATE && t->subject && t->subject->shown && t->name && !t->shown)
            t->shown = unique(e, &names, arena_printf(e->arena, "%s.%s", t->subject->shown, t->name));
    }
}

/* ---- Driver -------------------------------------------------------------------------------- */

static void register_shapes(Elab *e) {
    Program *p = e->program;
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        Tensor *t = p->tensors[i];
        switch (t->kind) {
        case TENSOR_PARAM: {
            /* A library layer's parameter left unsized is reported at the user's application
             * that first read it (or made it), the origin's call. */
            bool read = t->first_call.file != 0;
            shape_set_context(e->solver, read ? t->first_call : t->call, read ? t->first_call_name : t->call_name);
            shape_add_leaf(e->solver, &t->shape, LEAF_PARAMETER, t->shown ? t->shown : t->name,
                           origin(e, t->span, "parameter '%s'", t->shown ? t->shown : t->name));
            shape_set_context(e->solver, (Span){0, 0, 0}, NULL);
            break;
        }
        case TENSOR_CONSTANT:
            shape_add_leaf(e->solver, &t->shape, LEAF_CONSTANT, "constant", 0);
            break;
        case TENSOR_LITERAL:
            /* `iota ()`: a leaf whose axis its use decides, closed up to the shape it meets as
             * `ones ()` is (under a pointwise operation it would otherwise close to 1 and
             * broadcast: `x + iota ()` adding 0). */
            if (t->iota && !t->values) shape_add_leaf(e->solver, &t->shape, LEAF_CONSTANT, "constant", 0);
            else shape_add_interior(e->solver, &t->shape);
            break;
        default: shape_add_interior(e->solver, &t->shape); break;
        }
    }
}

/* Once shapes are closed: every tensor's cells must fit in a 64-bit size, at most 2^63 - 1 cells
 * (what the runtime holds; the buffers' sizes are computed from these shapes).  A tensor made from
 * an operand reported already is not reported again. */
static void check_cell_counts(Elab *e) {
    Program *p = e->program;
    bool *reported = arena_alloc(e->arena, (p->tensor_count + 1) * sizeof *reported);
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        Tensor *t = p->tensors[i];
        reported[t->id] = false;
        Shape s = shape_resolve(e->solver, &t->shape);
        bool zero = false, over = false;
        uint64_t cells = 1;
        for (int k = 0; k < ROW_KINDS; k++)
            for (uint32_t j = 0; j < s.rows[k].count; j++) {
                uint64_t d = s.rows[k].dims[j].size;
                if (d == 0) zero = true;
                else if (!over && (cells > (uint64_t)INT64_MAX / d)) over = true;
                else if (!over) cells *= d;
            }
        if (zero || !over) continue;
        reported[t->id] = true;
        bool inherited = false;
        for (uint32_t k = 0; k < t->operand_count && !inherited; k++)
            inherited = t->operands[k]->id < t->id && reported[t->operands[k]->id];
        if (inherited) continue;
        const char *name = t->shown ? t->shown : t->name;
        if (name)
            diag_error(t->span, "tensor '%s' of shape %s has too many cells: more than 2^63 - 1, the most a "
                       "64-bit size holds", name, shape_to_string(e->solver, &t->shape));
        else
            diag_error(t->span, "this tensor of shape %s has too many cells: more than 2^63 - 1, the most a "
                       "64-bit size holds", shape_to_string(e->solver, &t->shape));
    }
}

/* Whether a `?` was written in t's definition. */
static bool writes_runtime_size(Elab *e, const Tensor *t) {
    for (int k = 0; k < ROW_KINDS; k++)
        for (uint32_t j = 0; j < t->shape.rows[k].count; j++)
            if (shape_runtime_decl_of(e->solver, t->shape.rows[k].dims[j]) != UINT32_MAX) return true;
    return false;
}

/* Once shapes are closed: a parameter is made and initialised when the state is, so none of its
 * axes may be a run-time size (docs/inference.md §4.9) -- unless its definition asks for one
 * (`{ h; b = [?] }`: it is made anew whenever that size is set). */
/* Whether the operands' rows (kind `r`) give every axis of the result's row: each axis has one
 * at least as large in some operand, with every row aligned at its last axis, or every row at
 * its first (a spec's leading flank, `c, ..r..`). */
static bool row_given(const Shape *operand, uint32_t n, const Row *result, int r) {
    for (int left = 0; left < 2; left++) {
        bool all = true;
        for (uint32_t i = 0; i < result->count && all; i++) {
            bool given = false;
            for (uint32_t k = 0; k < n && !given; k++) {
                const Row *o = &operand[k].rows[r];
                uint32_t at = left ? i : o->count + i - result->count; /* wraps past o's axes when too short */
                given = at < o->count && o->dims[at].size >= result->dims[i].size;
            }
            all = given;
        }
        if (all) return true;
    }
    return false;
}

/* The first pointwise operation at or below t (through pointwise operands, at most `budget` of
 * them) with an axis that none of its operands gives it (row_given) — put there to fit a use;
 * NULL if none.  A constant (`ones ()`, whose axes are all the use's) gives none; a number
 * written alone gives its unit output axis, `iota ()` its one axis.  *row: the row kind;
 * *axes: the operands' axes in it at most. */
static const Tensor *grown_operation(Elab *e, const Tensor *t, int *row, uint32_t *axes, uint32_t *budget) {
    if (!t || t->kind != TENSOR_OP || t->logic != LOGIC_POINTWISE || !t->operand_count || *budget == 0) return NULL;
    (*budget)--;
    Shape result = shape_resolve(e->solver, &t->shape);
    Shape operand[8];
    uint32_t n = 0;
    for (uint32_t k = 0; k < t->operand_count && n < 8; k++)
        if (t->operands[k]->kind != TENSOR_CONSTANT) operand[n++] = shape_resolve(e->solver, &t->operands[k]->shape);
    for (int r = 0; r < ROW_KINDS && n; r++) {
        uint32_t most = 0;
        for (uint32_t k = 0; k < n; k++)
            if (operand[k].rows[r].count > most) most = operand[k].rows[r].count;
        if (!row_given(operand, n, &result.rows[r], r)) {
            *row = r;
            *axes = most;
            return t;
        }
    }
    for (uint32_t k = 0; k < t->operand_count; k++) {
        const Tensor *below = grown_operation(e, t->operands[k], row, axes, budget);
        if (below) return below;
    }
    return NULL;
}

/* Each `settled x`: x, and the pointwise operations it is made of, hold no axis that a use
 * broadcast into them (a loss's class axis given to features, attention's sequence axis given to
 * one position's features); an error at the user's application otherwise. */
static void check_settled(Elab *e) {
    static const char *const row_names[ROW_KINDS] = {"batch", "input", "output"};
    for (uint32_t i = 0; i < e->settled_count; i++) {
        const SettledUse *use = &e->settled[i];
        int row = 0;
        uint32_t most = 0, budget = 64;
        const Tensor *t = grown_operation(e, use->tensor, &row, &most, &budget);
        if (!t) continue;
        const char *name = use->call_name ? use->call_name : "this function";
        const char *op = t->op_name ? t->op_name : "an operation";
        const char *what = use->tensor->shown ? arena_printf(e->arena, "'%s'", use->tensor->shown) : "the tensor given";
        Span at = use->call.file ? use->call : use->at; /* the user's application, when there is one */
        diag_error(at, "%s%s has %s axes that its operands do not give it: the result of '%s' is %s, where its "
                   "operands have at most %u %s %s%s",
                   use->call.file ? arena_printf(e->arena, "in this application of '%s': ", name) : "", what,
                   row_names[row], op, shape_to_string(e->solver, &t->shape), most, row_names[row],
                   most == 1 ? "axis" : "axes",
                   use->call.file ? arena_printf(e->arena, " (an axis, or a size, broadcast into it to fit what '%s' "
                                                 "asks for)", name) : "");
        diag_note(t->span, "the result of '%s' made here", t->op_name ? t->op_name : "this operation");
        /* Where the grown row's sizes were written (a target's axis, the labels' batch): the
         * tensor that brought the axis, in the user's file. */
        Shape result_shape = shape_resolve(e->solver, &t->shape);
        const Row *grown_row = &result_shape.rows[row];
        Span noted[8];
        uint32_t noted_count = 0;
        for (uint32_t j = 0; j < grown_row->count && noted_count < 8; j++) {
            const Dim *d = &grown_row->dims[j];
            if (d->var || !d->origin) continue;
            Span where = shape_origin_span(e->solver, d->origin);
            bool said = !where.file || span_in_stdlib(where);
            for (uint32_t k = 0; k < noted_count && !said; k++) said = span_equal(noted[k], where);
            /* A size an operand has too, from the same place (the network's own classes), is not
             * what grew it. */
            for (uint32_t k = 0; k < t->operand_count && !said; k++) {
                Shape operand_shape = shape_resolve(e->solver, &t->operands[k]->shape);
                const Row *or = &operand_shape.rows[row];
                for (uint32_t m = 0; m < or->count && !said; m++)
                    said = !or->dims[m].var && or->dims[m].origin && or->dims[m].size == d->size &&
                           span_equal(shape_origin_span(e->solver, or->dims[m].origin), where);
            }
            if (said) continue;
            noted[noted_count++] = where;
            diag_note(where, "size %u (%s axis %u of the result) comes from: %s", d->size, row_names[row], j + 1,
                      shape_origin_what(e->solver, d->origin));
        }
        /* A grown axis of size 1 in a function of two tensors (a loss, an accuracy): most often a
         * number's, written in the other argument. */
        static const char *const pairs[] = {"cross_entropy", "cross_entropy_ids", "nll", "accuracy", "accuracy_ids"};
        Shape grown = shape_resolve(e->solver, &t->shape);
        bool unit = false, pair = false;
        for (uint32_t j = 0; j < grown.rows[row].count; j++) unit |= grown.rows[row].dims[j].size == 1;
        for (size_t j = 0; j < sizeof pairs / sizeof *pairs && use->call_name; j++) pair |= strcmp(use->call_name, pairs[j]) == 0;
        if (unit && pair)
            diag_note(at, "an axis of size 1 often comes from a number written in the other argument (labels - 1. is "
                      "b|1: a number is a tensor of one output axis of size 1); --print-shapes shows each tensor's shape");
        if (t->call.file && !span_in_stdlib(t->call) && (!use->call.file || t->call.start != use->call.start))
            diag_note(t->call, "in this application of '%s'", t->call_name ? t->call_name : "a function");
        diag_note(use->at, "'settled' takes it as it is here");
    }
}

static void check_runtime_parameters(Elab *e) {
    Program *p = e->program;
    if (!shape_runtime_count(e->solver)) return;
    for (uint32_t i = 0; i < p->tensor_count; i++) {
        Tensor *t = p->tensors[i];
        if (t->kind != TENSOR_PARAM || writes_runtime_size(e, t)) continue;
        Shape s = shape_resolve(e->solver, &t->shape);
        const Dim *d = NULL;
        for (int k = 0; k < ROW_KINDS && !d; k++)
            for (uint32_t j = 0; j < s.rows[k].count && !d; j++)
                if (s.rows[k].dims[j].runtime) d = &s.rows[k].dims[j];
        if (!d) continue;
        diag_error(t->span, "parameter '%s' of shape %s has a run-time size: a parameter's sizes must be known at "
                   "compile time", t->shown ? t->shown : t->name, shape_to_string(e->solver, &t->shape));
        diag_note(shape_origin_span(e->solver, d->origin), "the run-time size comes from here");
    }
}

Program *elaborate(Module *module, const ElabOptions *options) {
    Arena *arena = arena_new();
    Program *p = arena_alloc(arena, sizeof *p);
    p->arena = arena;
    p->solver = shape_solver_new();
    Elab e = {0};
    e.bytes_at_start = arena_total_bytes();
    e.program = p;
    e.arena = arena;
    e.solver = p->solver;
    e.options = options;
    const char *path = source_get(module->file)->path;
    e.byte_budget = options && options->eval_megabytes
                        ? options->eval_megabytes << 20
                        : ((size_t)EVAL_MEGABYTES << 20) + EVAL_BYTES_PER_SOURCE_BYTE * source_get(module->file)->len;
    const char *slash = strrchr(path, '/');
    e.global_table = arena_alloc(arena, GLOBAL_BUCKETS * sizeof *e.global_table);
    e.globals = arena_alloc(arena, sizeof *e.globals); /* generation 0: no globals */
    e.main_dir = slash ? arena_strndup(arena, path, (size_t)(slash - path)) : ".";
    e.main_path = path;
    bind_builtins(&e);
    /* The prelude. */
    for (unsigned i = 0; i < tsr_stdlib_file_count; i++) {
        if (strcmp(tsr_stdlib_files[i].name, "core.tsr") != 0) continue;
        uint32_t src = source_add("<stdlib>/core.tsr", tsr_stdlib_files[i].text, tsr_stdlib_files[i].len);
        e.prelude_file = src;
        Module *core = parse_module(src, arena);
        if (diag_error_count()) return p;
        elab_module(&e, core);
    }
    for (uint32_t i = 0; i < module->items.count; i++)
        e.program_file_has_main |= module->items.items[i]->kind == ITEM_MAIN;
    e.owner = ++e.owner_count; /* the program: a unit of its own, above the built-ins and the prelude */
    globals_now(&e);
    elab_module(&e, module);
    solve_equations(&e);
    if (diag_error_count()) {
        /* Still report the shape errors of what did elaborate; closing would only add noise
         * about tensors whose uses were lost to the errors. */
        shape_solve(p->solver);
        return p;
    }
    assign_names(&e);
    register_shapes(&e);
    if (shape_close(p->solver)) {
        settle_paddings(&e);
        fill_dim_readings(&e);
        check_cell_counts(&e);
        check_runtime_parameters(&e);
        check_settled(&e);
    }
    return p;
}

void program_free(Program *p) {
    if (!p) return;
    shape_solver_free(p->solver);
    arena_free(p->arena);
}

void program_print_shapes(Program *p, FILE *out) {
    for (uint32_t i = 0; i < p->named_count; i++) {
        fprintf(out, "%s : ", p->shown_names[i]);
        shape_print(p->solver, out, &p->named[i]->shape);
        fputc('\n', out);
    }
    /* The paddings shape inference chose where the spec left them open. */
    for (uint32_t i = 0; i < p->window_count; i++) {
        const ProgramWindow *pw = &p->windows[i];
        if (!pw->inferred) continue;
        unsigned line, col;
        span_line_col(pw->span, &line, &col);
        const SpecAffine *a = pw->affine;
        fprintf(out, "%s:%u:%u: padding of %d*%s+%d*%s : %s\n", source_get(pw->span.file)->path, line, col,
                a->stride.as.value, a->over.name, a->dilation.as.value, a->kernel.name,
                a->padding == SPEC_PAD_SAME ? "'=' (same)" : "'<' (valid)");
    }
}
