/* header.c — the C header and the JSON manifest of an object built with `tsrc -c`.
 *
 * The object (cg_cpu.c) defines the model image MODULE__image and one function per exported
 * routine; everything else a caller needs is small and lives in the header as static inline
 * functions over the runtime (tsr.h): MODULE_create(seed) builds a tsr_state from the image,
 * accessors return a buffer of the state, setters set an index symbol, MODULE_save and
 * MODULE_load write and read checkpoints.  So the runtime is one
 * static library shared by every object, and objects of several modules link together: every
 * symbol is prefixed by the module's name.
 *
 * Element types: a tensor's accessor returns `float *`, `int32_t *` for an i32 tensor (its
 * cells hold int32 values), `double *` for an f64 one, and `uint16_t *` for a bf16 or f16 one
 * (its cells hold bit patterns, which tsr.h's tsr_bf16_to_f32 … convert); the manifest gives
 * each tensor's "dtype" in NumPy's name ("float32", "int32", "float64", "float16"), which is what
 * numpy.dtype() takes, and "bfloat16" for bf16 (ml_dtypes' name: NumPy itself has none), and the
 * PTX manifest each kernel parameter's pointer type ("f32*", "i32*", "bf16*").  All three come
 * from the image's TSR_DTYPE_KINDS.
 *
 * Names: a tensor's accessor is MODULE_NAME with the name shown by --print-shapes made a C
 * identifier ("l1.w" → l1_w); a gradient's ends in _grad; a name that would clash with another
 * export gets a numeric suffix.  Shape constants are MODULE_NAME_RANK, _SIZE and _DIMk macros.
 *
 * Text from outside the compiler (the input's path, tensor names, shapes) reaches the header
 * only inside comments, through comment_text(), and the manifest only as JSON strings, through
 * json_string(): neither can end the comment or the string, nor put raw control characters,
 * invalid UTF-8 or bidirectional-override characters into the file.
 *
 * Requires: an optimised IrProgram with its plan. */
#include "cg/header.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cg/abi.h"
#include "cg/cg_ptx.h"
#include "base/diag.h"
#include "runtime/image_format.h"

typedef struct Export {
    const char *shown;   /* the tensor's name in the program ("l1.w", "x.grad") */
    const char *c_name;  /* after the module prefix: "l1_w" */
    uint32_t buffer;
    const char *role;    /* parameter, input, data, literal, computed, gradient */
} Export;

typedef struct Exports {
    Export *items;
    uint32_t count, cap;
    const char *module;
    const char **routines; /* per function: its C name, or NULL when not exported */
} Exports;

/* Whether `name` is `base` followed by one of the suffixes a tensor of run-time size adds to
 * its names (MODULE_base_dim0(), MODULE_BASE_ROW_SIZE), without case. */
static bool run_time_size_name(const char *name, const char *base) {
    size_t n = strlen(base);
    return strncasecmp(name, base, n) == 0 && (strcasecmp(name + n, "_dim0") == 0 || strcasecmp(name + n, "_row") == 0);
}

/* Names compare without case: the macros (MODULE_NAME_SIZE) are upper case.  `dynamic`: the
 * candidate is a tensor of run-time size, whose names add _dim0 and _ROW_SIZE. */
static bool taken(const Exports *x, const IrProgram *ir, const char *name, bool dynamic) {
    if (abi_reserved(name) || abi_c_library_name(x->module, name)) return true;
    size_t setter = strlen(ABI_SETTER_PREFIX);
    for (uint32_t i = 0; i < ir->symbol_count; i++)
        if (ir->symbols[i].settable && strncasecmp(name, ABI_SETTER_PREFIX, setter) == 0 &&
            strcasecmp(name + setter, abi_c_name(ir->arena, ir->symbols[i].name)) == 0)
            return true;
    for (uint32_t f = 0; f < ir->function_count; f++)
        if (x->routines[f] && (strcasecmp(x->routines[f], name) == 0 || (dynamic && run_time_size_name(x->routines[f], name))))
            return true;
    for (uint32_t i = 0; i < x->count; i++) {
        const char *other = x->items[i].c_name;
        if (strcasecmp(other, name) == 0) return true;
        if (ir_buffer_dynamic(&ir->buffers[x->items[i].buffer]) && run_time_size_name(name, other)) return true;
        if (dynamic && run_time_size_name(other, name)) return true;
    }
    return false;
}

static const char *role_of(const IrBuffer *b, bool grad) {
    if (grad) return "gradient";
    switch (b->kind) {
    case BUF_PARAM: return "parameter";
    case BUF_INPUT: return "input";
    case BUF_DATA: return "data";
    case BUF_LITERAL:
    case BUF_CONSTANT: return "constant";
    case BUF_SCRATCH: return "scratch";
    case BUF_COMPUTED: return "computed";
    }
    return "computed";
}

static void add_export(Exports *x, const IrProgram *ir, const char *shown, uint32_t buffer, bool grad) {
    if (buffer == UINT32_MAX || ir->buffers[buffer].is_virtual) return;
    for (uint32_t i = 0; i < x->count; i++)
        if (x->items[i].buffer == buffer) return; /* one tensor under two names: the first */
    const char *base = abi_c_name(ir->arena, shown), *name = base;
    bool dynamic = ir_buffer_dynamic(&ir->buffers[buffer]);
    for (unsigned k = 2; taken(x, ir, name, dynamic); k++) name = arena_printf(ir->arena, "%s_%u", base, k);
    ARENA_PUSH(ir->arena, x->items, x->count, x->cap,
               ((Export){shown, name, buffer, role_of(&ir->buffers[buffer], grad)}));
}

static Exports exports_of(const IrProgram *ir, const char *module) {
    Exports x = {.module = module};
    x.routines = arena_alloc(ir->arena, (ir->function_count + 1) * sizeof *x.routines);
    const char **names = abi_routine_names(ir);
    for (uint32_t f = 0; f < ir->function_count; f++)
        if (ir->exported[f]) x.routines[f] = names[f];
    for (uint32_t i = 0; i < ir->export_count; i++)
        add_export(&x, ir, ir->exports[i].shown, ir->exports[i].buffer, ir->exports[i].grad);
    return x;
}

/* The length of the valid UTF-8 sequence of a non-ASCII character at `p` (2 to 4 bytes: no
 * overlong forms, no surrogates, at most U+10FFFF), or 0; its code point in *cp. */
static int utf8_sequence(const unsigned char *p, uint32_t *cp) {
    int n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    if (n == 0 || p[0] > 0xf4) return 0;
    uint32_t c = p[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return n;
}

/* Characters that reorder how text is displayed (U+202A-U+202E, U+2066-U+2069): shown
 * escaped, so a name cannot make the header read differently from what the compiler sees. */
static bool bidi_control(uint32_t c) { return (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069); }

/* `s` for the inside of a C comment: printable ASCII and valid UTF-8 as they are; a backslash
 * as \\, control bytes, DEL and invalid UTF-8 bytes as \xHH, bidirectional controls as
 * \uHHHH; and the pairs that would end or nest a comment, or make a trigraph, split by a
 * backslash (star-slash, slash-star, two question marks).  The result never contains a
 * newline, a star-slash or a slash-star. */
static void comment_text(FILE *out, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        uint32_t cp;
        int n;
        if ((c == '*' && p[1] == '/') || (c == '/' && p[1] == '*') || (c == '?' && p[1] == '?')) {
            fputc((int)c, out);
            fputc('\\', out);
        } else if (c == '\\') {
            fputs("\\\\", out);
        } else if (c >= 0x20 && c < 0x7f) {
            fputc((int)c, out);
        } else if (c >= 0x80 && (n = utf8_sequence(p, &cp)) > 0) {
            if (bidi_control(cp)) fprintf(out, "\\u%04x", (unsigned)cp);
            else fwrite(p, 1, (size_t)n, out);
            p += n - 1;
        } else {
            fprintf(out, "\\x%02x", c);
        }
    }
}

/* A buffer's element type as the outputs name it: its C type, its name in the language ("f32")
 * and NumPy's name ("float32", made from the NumPy descr "<f4": kind and bits; "bfloat16" for
 * bf16, whose descr is float32's, the type its checkpoints are saved as). */
typedef struct ElementType {
    const char *c_type, *word;
    char numpy_name[16];
} ElementType;

static ElementType element_type(DType dtype) {
#define DTYPE_ROW(name, word, numpy, ctype) [DTYPE_##name] = {#ctype, word, numpy},
    static const struct { const char *c_type, *word, *descr; } rows[] = {TSR_DTYPE_KINDS(DTYPE_ROW)};
#undef DTYPE_ROW
    unsigned t = (unsigned)dtype < sizeof rows / sizeof rows[0] ? (unsigned)dtype : 0;
    ElementType e = {rows[t].c_type, rows[t].word, ""};
    const char *descr = rows[t].descr; /* "<f4": order, kind, bytes */
    const char *kind = descr[1] == 'f' ? "float" : descr[1] == 'u' ? "uint" : "int";
    if (dtype == DTYPE_BF16) snprintf(e.numpy_name, sizeof e.numpy_name, "bfloat16");
    else if (dtype == DTYPE_BOOL) snprintf(e.numpy_name, sizeof e.numpy_name, "bool");
    else snprintf(e.numpy_name, sizeof e.numpy_name, "%s%d", kind, 8 * atoi(descr + 2));
    return e;
}

static const char *upper(const IrProgram *ir, const char *module, const char *name) {
    char *s = arena_printf(ir->arena, "%s_%s", module, name);
    for (char *c = s; *c; c++) *c = (char)toupper((unsigned char)*c);
    return s;
}

void header_write(const IrProgram *ir, const char *module, const char *source, bool gpu, bool profile, FILE *out) {
    Exports x = exports_of(ir, module);
    const char *guard = upper(ir, module, "H");
    bool any_i32 = false, any_i64 = false, any_f64 = false, any_half = false, any_byte = false;
    for (uint32_t i = 0; i < x.count; i++) {
        DType t = ir->buffers[x.items[i].buffer].dtype;
        any_i32 |= t == DTYPE_I32;
        any_i64 |= t == DTYPE_I64;
        any_f64 |= t == DTYPE_F64;
        any_half |= ir_dtype_half(t);
        any_byte |= ir_dtype_byte(t);
    }
    /* What the buffers that are not float32 hold, for the header's first comment:
     * " (int32 where an accessor returns int32_t *, float64 where it returns double *)". */
    const char *others[5][2];
    size_t other_count = 0;
    if (any_i32) others[other_count][0] = "int32", others[other_count++][1] = "int32_t";
    if (any_i64) others[other_count][0] = "int64", others[other_count++][1] = "int64_t";
    if (any_f64) others[other_count][0] = "float64", others[other_count++][1] = "double";
    if (any_half) others[other_count][0] = "bfloat16 or float16 bit patterns", others[other_count++][1] = "uint16_t";
    if (any_byte) others[other_count][0] = "uint8 or bool (0 or 1) bytes", others[other_count++][1] = "uint8_t";
    char buffers_note[256] = "";
    for (size_t k = 0, n = 0; k < other_count && n < sizeof buffers_note; k++)
        n += (size_t)snprintf(buffers_note + n, sizeof buffers_note - n, "%s%s where %s returns %s *%s", k ? ", " : " (",
                              others[k][0], k ? "it" : "an accessor", others[k][1], k + 1 == other_count ? ")" : "");
    fprintf(out, "/* %s.h — generated by tsrc from ", module);
    comment_text(out, source);
    fprintf(out,
            ".  Do not edit.\n"
            " *\n"
            " * Link %s.o with the runtime: cc prog.c %s.o $(pkg-config --cflags --libs tsr)\n"
            " * Buffers are float32%s, row-major, axes in memory order: batch, output, input.\n"
            " * Every function returning int returns 0 (TSR_OK) or a tsr_status; the message is\n"
            " * %s_last_error().  Given a NULL state, they return TSR_ERR_ARGUMENT (\"the state\n"
            " * is NULL\") and accessors return NULL.\n"
            " * Threads: a state must not be used by two threads at once (routines, setters and\n"
            " * writes to its buffers do not lock); different states may be used concurrently,\n"
            " * and the last error is per thread.  See docs/runtime.md. */\n"
            "#ifndef %s\n#define %s\n\n#include <stdint.h>\n#include <tsr.h>\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
            module, module, buffers_note, module, guard, guard);
    fprintf(out,
            "/* The model's state: every buffer and index symbol (a tsr_state). */\n"
            "typedef struct %s_state %s_state;\n\n"
            "extern const unsigned char %s__image[];\n"
            "extern const uint64_t %s__image_size;\n\n"
            "/* Allocate the buffers and initialise them: literals, parameters (seeded, reproducible),\n"
            " * data sets (files are read now).  NULL on failure: see %s_last_error(). */\n"
            "static inline %s_state *%s_create(uint64_t seed) {\n"
            "    size_t size = TSR_CAST(size_t, %s__image_size);\n"
            "    return TSR_PTR_CAST(%s_state *, tsr_state_create(%s__image, size, seed));\n}\n"
            "static inline void %s_destroy(%s_state *s) { tsr_state_destroy(TSR_PTR_CAST(tsr_state *, s)); }\n"
            "/* The text of the last error on this thread. */\n"
            "static inline const char *%s_last_error(void) { return tsr_last_error(); }\n\n",
            module, module, module, module, module, module, module, module, module, module, module, module, module);
    bool any_data = false;
    for (uint32_t i = 0; i < ir->dataset_count; i++) any_data |= strcmp(ir->datasets[i].generator, "option") != 0;
    if (any_data)
        fprintf(out,
                "/* As %s_create, with data items read from other files (an executable's --data\n"
                " * NAME=PATH): names[i] (\"xs\", \"moons.points\") from paths[i], of the item's shape (a name\n"
                " * given twice: the last counts).  NULL for a name the program lacks, a missing path or a\n"
                " * bad file: see %s_last_error(). */\n"
                "static inline %s_state *%s_create_data(uint64_t seed, const char *const *names,\n"
                "    const char *const *paths, uint32_t count) {\n"
                "    size_t size = TSR_CAST(size_t, %s__image_size);\n"
                "    return TSR_PTR_CAST(%s_state *, tsr_state_create_data(%s__image, size, seed, names, paths, count));\n"
                "}\n\n",
                module, module, module, module, module, module, module);
    fprintf(out,
            "/* Checkpoints: every parameter as a NumPy .npz file (numpy.load reads it), one array per\n"
            " * parameter (float32; float64 for f64, float16 for f16, float32 for bf16), named as the\n"
            " * tensor, of its dims in memory order.  Load reads such a file (or numpy.savez's) back; a\n"
            " * missing file or array, a wrong shape or a damaged file is an error (TSR_ERR_DATA) that\n"
            " * changes nothing. */\n"
            "static inline int %s_save(%s_state *s, const char *path) {\n"
            "    return tsr_state_save(TSR_PTR_CAST(tsr_state *, s), path);\n}\n"
            "static inline int %s_load(%s_state *s, const char *path) {\n"
            "    return tsr_state_load(TSR_PTR_CAST(tsr_state *, s), path);\n}\n"
            "/* Start from another model's weights (an executable's --init-from): read each parameter\n"
            " * this model trains that the file holds, leave the others as initialised and the training\n"
            " * state, counters and seed as they are; read (may be NULL) counts what was read.  A file\n"
            " * holding none of them is an error (TSR_ERR_DATA) that changes nothing. */\n"
            "static inline int %s_init_from(%s_state *s, const char *path, uint32_t *read) {\n"
            "    return tsr_state_init_from(TSR_PTR_CAST(tsr_state *, s), path, read);\n}\n\n",
            module, module, module, module, module, module);
    if (ir->option_count)
        fprintf(out,
                "/* The program's options (`option lr = 0.1`), which an executable's command line sets: set\n"
                " * one by name (an integer option takes a whole number; TSR_ERR_ARGUMENT for no such option\n"
                " * or a value it cannot take, nothing changed), or read its value. */\n"
                "static inline int %s_set_option(%s_state *s, const char *name, double value) {\n"
                "    return tsr_state_set_option(TSR_PTR_CAST(tsr_state *, s), name, value);\n}\n"
                "static inline int %s_option(const %s_state *s, const char *name, double *value) {\n"
                "    return tsr_state_option(TSR_PTR_CAST(const tsr_state *, s), name, value);\n}\n\n",
                module, module, module, module);
    if (gpu)
        fprintf(out,
                "/* A GPU model (--target=cuda): buffers live in the GPU's memory, and an accessor brings\n"
                " * its buffer to the host (the pointer stays valid; what is written through it goes\n"
                " * back to the GPU before the next routine that reads it).  Routines launch their\n"
                " * kernels without waiting; reading a buffer waits.  sync_host brings every buffer to\n"
                " * the host, sync_device sends the host's changes to the GPU; both wait for the GPU.\n"
                " * The runtime loads the CUDA driver (libcuda.so.1) when the state is created. */\n"
                "static inline int %s_sync_host(%s_state *s) {\n"
                "    return tsr_state_sync_host(TSR_PTR_CAST(tsr_state *, s));\n}\n"
                "static inline int %s_sync_device(%s_state *s) {\n"
                "    return tsr_state_sync_device(TSR_PTR_CAST(tsr_state *, s));\n}\n\n",
                module, module, module, module);
    fputs("/* Routines. */\n", out);
    for (uint32_t f = 0; f < ir->function_count; f++)
        if (x.routines[f]) fprintf(out, "int %s_%s(%s_state *s);\n", module, x.routines[f], module);
    if (profile)
        fprintf(out,
                "\n/* Compiled with --profile: every kernel launch is timed (for every state of this model in\n"
                " * the process); this prints the kernels by time to stderr (docs/runtime.md §17), and the\n"
                " * reset sets every kernel's time and launches back to 0. */\n"
                "void %s_profile_report(void);\n"
                "void %s_profile_reset(void);\n",
                module, module);
    bool any_index = false, any_size = false;
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        any_index |= ir->symbols[i].settable && !ir->symbols[i].size;
        any_size |= ir->symbols[i].size;
    }
    if (any_size)
        fputs("\n/* Run-time sizes (the `?` of an input, docs/runtime.md §16): not set (0) until set, and at least\n"
              " * _MIN.  Setting one gives the tensors it sizes storage of that length (new, when the\n"
              " * length changes: fill an input after setting its size).  A routine refuses to run while\n"
              " * one is unset, or while two that the program equates differ. */\n",
              out);
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        if (!ir->symbols[i].size) continue;
        const char *c = abi_c_name(ir->arena, ir->symbols[i].name);
        fprintf(out, "#define %s_MIN %" PRId64 "\n", upper(ir, module, c), ir->symbols[i].range > 1 ? ir->symbols[i].range : 1);
        fprintf(out, "static inline int %s_set_%s(%s_state *s, int64_t size) {\n"
                     "    return tsr_state_set_symbol(TSR_PTR_CAST(tsr_state *, s), %u, size);\n}\n",
                module, c, module, i);
    }
    if (any_index) fputs("\n/* Index symbols: 0 until set; a routine checks them against their ranges. */\n", out);
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        if (!ir->symbols[i].settable || ir->symbols[i].size) continue;
        const char *c = abi_c_name(ir->arena, ir->symbols[i].name);
        fprintf(out, "#define %s_RANGE %" PRId64 "\n", upper(ir, module, c), ir->symbols[i].range);
        fprintf(out, "static inline int %s_set_%s(%s_state *s, int64_t value) {\n"
                     "    return tsr_state_set_symbol(TSR_PTR_CAST(tsr_state *, s), %u, value);\n}\n",
                module, c, module, i);
    }
    fputs("\n/* Tensors: accessors and shapes. */\n", out);
    for (uint32_t i = 0; i < x.count; i++) {
        const Export *e = &x.items[i];
        const IrBuffer *b = &ir->buffers[e->buffer];
        const char *u = upper(ir, module, e->c_name);
        ElementType t = element_type(b->dtype);
        const char *cell = b->dtype == DTYPE_F32 ? "float" : t.numpy_name; /* "640 floats", "36 int32s" */
        fputs("\n/* ", out);
        comment_text(out, e->shown);
        fputs(" : ", out);
        comment_text(out, b->shape_text);
        if (ir_buffer_dynamic(b)) {
            /* The outermost length is a run-time size: the cells of one index of it, and the
             * length as set. */
            const char *size = ir->symbols[b->size_symbol].name;
            fprintf(out, " — %s, %s × %" PRIu64 " %s%s, dims [%s", e->role, size, b->size, cell, b->size == 1 ? "" : "s",
                    size);
            for (uint32_t a = 1; a < b->rank; a++) fprintf(out, ", %" PRIu64, b->dims[a]);
            fputs("] */\n", out);
            fprintf(out, "#define %s_RANK %u\n#define %s_ROW_SIZE %" PRIu64 "ULL\n", u, b->rank, u, b->size);
            fprintf(out, "static inline int64_t %s_%s_dim0(%s_state *s) {\n"
                         "    return s ? TSR_PTR_CAST(tsr_state *, s)->symbols[%u] : 0;\n}\n",
                    module, e->c_name, module, b->size_symbol);
        } else {
            fprintf(out, " — %s, %" PRIu64 " %s%s, dims [", e->role, b->size, cell, b->size == 1 ? "" : "s");
            for (uint32_t a = 0; a < b->rank; a++) fprintf(out, "%s%" PRIu64, a ? ", " : "", b->dims[a]);
            fputs("] */\n", out);
            fprintf(out, "#define %s_RANK %u\n#define %s_SIZE %" PRIu64 "ULL\n", u, b->rank, u, b->size);
        }
        for (uint32_t a = ir_buffer_dynamic(b); a < b->rank; a++)
            fprintf(out, "#define %s_DIM%u %" PRIu64 "ULL\n", u, a, b->dims[a]);
        /* The state's buffers are float *: another type's pointer is converted (to int32_t *,
         * double * or uint16_t *, the type of its cells). */
        const char *buffer =
            gpu ? arena_printf(ir->arena, "tsr_state_host_buffer(TSR_PTR_CAST(tsr_state *, s), %u)", e->buffer)
                : arena_printf(ir->arena, "TSR_PTR_CAST(tsr_state *, s)->buffers[%u]", e->buffer);
        if (b->dtype != DTYPE_F32) /* through void *: the buffer is aligned for any type (-Wcast-align) */
            buffer = arena_printf(ir->arena, "TSR_PTR_CAST(%s *, TSR_PTR_CAST(void *, %s))", t.c_type, buffer);
        fprintf(out, "static inline %s *%s_%s(%s_state *s) { return s ? %s : TSR_NULL; }\n", t.c_type, module, e->c_name,
                module, buffer);
    }
    fprintf(out, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* %s */\n", guard);
}

/* A JSON string (RFC 8259): quote and backslash escaped, control characters as \n \t \r \b \f
 * or \u00HH, DEL and bidirectional controls as \uHHHH, valid UTF-8 as it is, and each byte
 * of invalid UTF-8 as U+FFFD (a JSON text must be valid UTF-8). */
static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        uint32_t cp;
        int n;
        const char *short_escape = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                                 : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (short_escape) {
            fputs(short_escape, out);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
        } else if (c < 0x80) {
            fputc((int)c, out);
        } else if ((n = utf8_sequence(p, &cp)) > 0) {
            if (bidi_control(cp)) fprintf(out, "\\u%04x", (unsigned)cp);
            else fwrite(p, 1, (size_t)n, out);
            p += n - 1;
        } else {
            fputs("\\ufffd", out);
        }
    }
    fputc('"', out);
}

/* The files the program was read from (source_files), as absolute paths: what a build must
 * watch to know that the object is stale (the Python package's cache does). */
static void write_sources(FILE *out) {
    uint32_t count;
    const char **files = source_files(&count);
    for (uint32_t i = 0; i < count; i++) {
        char *absolute = realpath(files[i], NULL);
        if (i) fputs(", ", out);
        json_string(out, absolute ? absolute : files[i]);
        free(absolute);
    }
    free(files);
}

void manifest_write(const IrProgram *ir, const char *module, FILE *out) {
    Exports x = exports_of(ir, module);
    fputs("{\n  \"module\": ", out);
    json_string(out, module);
    fputs(",\n  \"format\": 1,\n  \"sources\": [", out);
    write_sources(out);
    fprintf(out, "],\n  \"image_symbol\": \"%s__image\",\n  \"image_checksum\": \"%016" PRIx64 "\",\n  \"routines\": [",
            module, ir->image_checksum);
    bool first = true;
    for (uint32_t f = 0; f < ir->function_count; f++) {
        if (!x.routines[f]) continue;
        fprintf(out, "%s\n    {\"name\": ", first ? "" : ",");
        json_string(out, ir->functions[f].name);
        fprintf(out, ", \"symbol\": \"%s_%s\", \"returns\": \"int status\"}", module, x.routines[f]);
        first = false;
    }
    fputs(first ? "],\n  \"indexes\": [" : "\n  ],\n  \"indexes\": [", out);
    bool any_index = false;
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        if (!ir->symbols[i].settable || ir->symbols[i].size) continue;
        fprintf(out, "%s\n    {\"name\": ", any_index ? "," : "");
        any_index = true;
        json_string(out, ir->symbols[i].name);
        fprintf(out, ", \"range\": %" PRId64 ", \"setter\": \"%s_set_%s\", \"symbol\": %u}", ir->symbols[i].range,
                module, abi_c_name(ir->arena, ir->symbols[i].name), i);
    }
    fputs(any_index ? "\n  ],\n  \"sizes\": [" : "],\n  \"sizes\": [", out);
    bool any_size = false;
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        const IrSymbol *sym = &ir->symbols[i];
        if (!sym->size) continue;
        fprintf(out, "%s\n    {\"name\": ", any_size ? "," : "");
        any_size = true;
        json_string(out, sym->name);
        fprintf(out, ", \"min\": %" PRId64 ", \"equals\": ", sym->range > 1 ? sym->range : 1);
        json_string(out, ir->symbols[sym->leader].name);
        fprintf(out, ", \"setter\": \"%s_set_%s\", \"symbol\": %u}", module, abi_c_name(ir->arena, sym->name), i);
    }
    fputs(any_size ? "\n  ],\n  \"options\": [" : "],\n  \"options\": [", out);
    for (uint32_t i = 0; i < ir->option_count; i++) { /* set with MODULE_set_option (docs/runtime.md §3) */
        fprintf(out, "%s\n    {\"name\": ", i ? "," : "");
        json_string(out, ir->options[i].name);
        /* An integer's digits (100, not 1e+02); a number's, whole, with ".0"; else the shortest
         * digits that read back as the default (0.1, not 0.10000000000000001). */
        char number[40];
        double v = ir->options[i].value;
        if (v == floor(v) && fabs(v) <= 0x1p53) snprintf(number, sizeof number, ir->options[i].is_float ? "%.1f" : "%.0f", v);
        else
            for (int digits = 1; digits <= 17; digits++) {
                snprintf(number, sizeof number, "%.*g", digits, v);
                if (strtod(number, NULL) == v) break;
            }
        fprintf(out, ", \"kind\": \"%s\", \"default\": %s}", ir->options[i].is_float ? "number" : "integer", number);
    }
    fputs(ir->option_count ? "\n  ],\n  \"tensors\": [" : "],\n  \"tensors\": [", out);
    for (uint32_t i = 0; i < x.count; i++) {
        const Export *e = &x.items[i];
        const IrBuffer *b = &ir->buffers[e->buffer];
        fprintf(out, "%s\n    {\"name\": ", i ? "," : "");
        json_string(out, e->shown);
        fprintf(out, ", \"accessor\": \"%s_%s\", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": ", module,
                e->c_name, e->role, element_type(b->dtype).numpy_name);
        json_string(out, b->shape_text);
        fputs(", \"dims\": [", out);
        bool dynamic = ir_buffer_dynamic(b); /* dims[0] is the run-time size's name */
        if (dynamic) json_string(out, ir->symbols[b->size_symbol].name);
        for (uint32_t a = dynamic; a < b->rank; a++) fprintf(out, "%s%" PRIu64, a ? ", " : "", b->dims[a]);
        fprintf(out, "], \"%s\": %" PRIu64 ", \"layout\": \"row-major: batch, output, input\", \"buffer\": %u",
                dynamic ? "row_size" : "size", b->size, e->buffer);
        if (dynamic) fprintf(out, ", \"length_symbol\": %u", b->size_symbol);
        /* kept from run to run and trained by no gradient (a cache, a running sum): a checkpoint
         * holds it, and may lack it (docs/runtime.md §14) */
        if (b->training_state && strcmp(e->role, "gradient") != 0) fputs(", \"state\": true", out);
        fputc('}', out);
    }
    fputs(x.count ? "\n  ]\n}\n" : "]\n}\n", out);
}

void ptx_manifest_write(const IrProgram *ir, const char *module, const PtxModule *ptx, const char *ptx_file, FILE *out) {
    const GpuImage *g = &ptx->gpu;
    fputs("{\n  \"module\": ", out);
    json_string(out, module);
    fputs(",\n  \"format\": 1,\n  \"ptx\": ", out);
    json_string(out, ptx_file);
    fprintf(out, ",\n  \"arch\": \"%s\",\n  \"symbols\": [", g->arch);
    for (uint32_t i = 0; i < ir->symbol_count; i++) {
        fprintf(out, "%s\n    {\"name\": ", i ? "," : "");
        json_string(out, ir->symbols[i].name);
        fprintf(out, ", \"range\": %" PRId64 ", \"type\": \"i64\"}", ir->symbols[i].range);
    }
    fputs(ir->symbol_count ? "\n  ],\n  \"buffers\": [" : "],\n  \"buffers\": [", out);
    /* The buffers some kernel takes, in id order. */
    bool *used = calloc(ir->buffer_count + 1, sizeof *used);
    if (!used) diag_fatal_oom();
    for (uint32_t k = 0; k < g->kernel_count; k++)
        for (uint32_t p = 0; p < g->kernels[k].param_count; p++) used[g->kernels[k].params[p]] = true;
    bool first = true;
    for (uint32_t b = 0; b < ir->buffer_count; b++) {
        if (!used[b]) continue;
        const IrBuffer *buf = &ir->buffers[b];
        fprintf(out, "%s\n    {\"id\": %u, \"name\": ", first ? "" : ",", b);
        json_string(out, buf->name);
        fputs(", \"shape\": ", out);
        json_string(out, buf->shape_text ? buf->shape_text : "");
        fprintf(out, ", \"dtype\": \"%s\", \"cells\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                element_type(buf->dtype).numpy_name, buf->size, buf->size * ir_dtype_bytes(buf->dtype));
        first = false;
    }
    free(used);
    fputs(first ? "],\n  \"kernels\": [" : "\n  ],\n  \"kernels\": [", out);
    for (uint32_t k = 0; k < g->kernel_count; k++) {
        const GpuKernelInfo *kn = &g->kernels[k];
        fprintf(out, "%s\n    {\"name\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], "
                     "\"shared_bytes\": %u, \"reads_symbols\": %s, \"reads_key\": %s,\n     \"params\": [",
                k ? "," : "", kn->name, kn->grid[0], kn->grid[1], kn->grid[2], kn->block[0], kn->block[1], kn->block[2],
                kn->shared_bytes, kn->scalars & TSR_GPU_READS_SYMBOLS ? "true" : "false",
                kn->scalars & TSR_GPU_READS_KEY ? "true" : "false");
        for (uint32_t i = 0; i < ir->symbol_count; i++) {
            fprintf(out, "%s{\"symbol\": ", i ? ", " : "");
            json_string(out, ir->symbols[i].name);
            fputs(", \"type\": \"i64\"}", out);
        }
        /* The run's random key (abi.h), after the symbols: what tsr_state_begin_run writes. */
        fprintf(out, "%s{\"random_key\": \"seed\", \"type\": \"i64\"}, {\"random_key\": \"run\", \"type\": \"i64\"}",
                ir->symbol_count ? ", " : "");
        for (uint32_t p = 0; p < kn->param_count; p++)
            fprintf(out, ", {\"buffer\": %u, \"type\": \"%s*\", \"writes\": %s}", kn->params[p],
                    element_type(ir->buffers[kn->params[p]].dtype).word, kn->writes[p] ? "true" : "false");
        fputs("]}", out);
    }
    fputs(g->kernel_count ? "\n  ],\n  \"routines\": [" : "],\n  \"routines\": [", out);
    for (uint32_t f = 0; f < ir->function_count; f++) {
        fprintf(out, "%s\n    {\"name\": ", f ? "," : "");
        json_string(out, ir->functions[f].name);
        fputs(", \"launches\": [", out);
        for (uint32_t k = ptx->function_first[f]; k < ptx->function_first[f + 1]; k++)
            fprintf(out, "%s\"%s\"", k > ptx->function_first[f] ? ", " : "", g->kernels[k].name);
        fputs("]}", out);
    }
    fputs(ir->function_count ? "\n  ]\n}\n" : "]\n}\n", out);
}
