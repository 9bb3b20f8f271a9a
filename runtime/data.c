/* data.c — the data sets a program can declare: toy generators and the .npy and CSV loaders.
 *
 * Generators (half moons, circles, spirals) write `count` points (count×2, row-major) and their
 * labels (+1 / -1).  Consecutive points alternate classes (point p has class p % 2, class 0
 * labelled +1), so every contiguous mini-batch holds both; within a class the curve parameter
 * is spaced evenly in point order.  Noise is Gaussian, drawn from the counter-based RNG
 * (tsr_rng_normal) with one stream per generator and coordinate and the point as the index, so
 * the output is a pure function of (count, noise, seed, …).
 *
 * Loaders read a whole file into a caller-allocated float tensor whose shape the compiler
 * already knows; the file must match it exactly.  They use plain stdio (fopen/fread), accept
 * any byte sequence without crashing, never print, and report every problem with the file as
 * TSR_ERR_DATA through tsr_data_error, as "data 'WHAT': 'PATH'[:LINE:COL]: what is wrong"
 * (bad arguments give TSR_ERR_ARGUMENT, a failed allocation TSR_ERR_NOMEM).  Sizes are 64-bit
 * and sizes declared by a file are checked for overflow before use.  Requires internal.h
 * (tsr_rng_normal, tsr_data_error) and tsr_error; nothing else of the runtime. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- Generators ------------------------------------------------------------------------------ */

/* Noise streams: one per generator and coordinate (x: base, y: base + 1), apart from each other
 * so that two data sets made with the same seed do not share their noise. */
enum { MOONS_STREAM = 0x10, CIRCLES_STREAM = 0x20, SPIRALS_STREAM = 0x30 };

static const double PI = 3.14159265358979323846;

/* The spirals wind this many turns from the centre to radius 1. */
static const double SPIRAL_TURNS = 1.5;

/* Where point k of the `n` points of class `cls` lies on a curve, without noise. */
typedef void (*curve_fn)(int cls, int64_t k, int64_t n, double factor, double xy[2]);

/* Half moons (scikit-learn's make_moons): class 0 the upper half of the unit circle from
 * angle 0 to pi, class 1 the lower half moon shifted to the right and up: (1 - cos t, 0.5 - sin t). */
static void moon_point(int cls, int64_t k, int64_t n, double factor, double xy[2]) {
    (void)factor;
    double t = n > 1 ? PI * (double)k / (double)(n - 1) : 0.0;
    xy[0] = cls == 0 ? cos(t) : 1.0 - cos(t);
    xy[1] = cls == 0 ? sin(t) : 0.5 - sin(t);
}

/* Concentric circles (make_circles): class 0 radius 1, class 1 radius `factor`; the angles
 * 2·pi·k/n, without the endpoint. */
static void circle_point(int cls, int64_t k, int64_t n, double factor, double xy[2]) {
    double t = 2.0 * PI * (double)k / (double)n;
    double r = cls == 0 ? 1.0 : factor;
    xy[0] = r * cos(t);
    xy[1] = r * sin(t);
}

/* Archimedean spirals: radius s and angle s·SPIRAL_TURNS·2·pi for s = (k+1)/n in (0, 1]; class
 * 1 is class 0 turned by pi.  Every point lies in the unit disc. */
static void spiral_point(int cls, int64_t k, int64_t n, double factor, double xy[2]) {
    (void)factor;
    double s = (double)(k + 1) / (double)n;
    double angle = s * SPIRAL_TURNS * 2.0 * PI + (cls == 0 ? 0.0 : PI);
    xy[0] = s * cos(angle);
    xy[1] = s * sin(angle);
}

/* Fill points and labels: point p has class p % 2 and is point p / 2 of its class; class 0
 * has ceil(count / 2) points and label +1, class 1 has floor(count / 2) and label -1. */
static void generate(float *points, float *labels, int64_t count, double noise, uint64_t seed, uint32_t stream,
                     curve_fn curve, double factor) {
    for (int64_t p = 0; p < count; p++) {
        int cls = (int)(p % 2);
        int64_t in_class = cls == 0 ? (count + 1) / 2 : count / 2;
        double xy[2];
        curve(cls, p / 2, in_class, factor, xy);
        for (uint32_t axis = 0; axis < 2; axis++) {
            double jitter = noise != 0.0 ? noise * tsr_rng_normal(seed, stream + axis, (uint64_t)p) : 0.0;
            points[2 * p + axis] = (float)(xy[axis] + jitter);
        }
        labels[p] = cls == 0 ? 1.0f : -1.0f;
    }
}

void tsr_half_moons(float *points, float *labels, int64_t count, double noise, uint64_t seed) {
    generate(points, labels, count, noise, seed, MOONS_STREAM, moon_point, 0.0);
}

void tsr_circles(float *points, float *labels, int64_t count, double noise, double factor, uint64_t seed) {
    generate(points, labels, count, noise, seed, CIRCLES_STREAM, circle_point, factor);
}

void tsr_spirals(float *points, float *labels, int64_t count, double noise, uint64_t seed) {
    generate(points, labels, count, noise, seed, SPIRALS_STREAM, spiral_point, 0.0);
}

/* ---- What the loaders share ---------------------------------------------------------------------- */

/* Files are read in pieces of this many bytes. */
enum { READ_CHUNK = 16384 };

/* The file being read, for messages. */
typedef struct Source {
    const char *path;
    const char *what;
} Source;

/* Record "data 'WHAT': 'PATH'[:LINE[:COL]]: MESSAGE" (line 0: no line; col 0: no column). */
static int fail_at(const Source *src, int64_t line, int64_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_at(const Source *src, int64_t line, int64_t col, const char *fmt, ...) {
    char message[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char where[64] = "";
    if (line > 0 && col > 0)
        snprintf(where, sizeof where, ":%lld:%lld", (long long)line, (long long)col);
    else if (line > 0)
        snprintf(where, sizeof where, ":%lld", (long long)line);
    return tsr_data_error("data '%s': '%s'%s: %s", src->what, src->path, where, message);
}

/* The Python form of a shape: "(4, 3)", "(3,)", "()"; cut short with "…" if it does not fit. */
static void format_shape(char *text, size_t size, uint32_t rank, const int64_t *dims) {
    size_t used = (size_t)snprintf(text, size, "(");
    for (uint32_t a = 0; a < rank && used < size; a++) {
        const char *sep = a + 1 < rank ? ", " : rank == 1 ? "," : "";
        used += (size_t)snprintf(text + used, size - used, "%lld%s", (long long)dims[a], sep);
    }
    if (used < size) used += (size_t)snprintf(text + used, size - used, ")");
    if (used >= size && size >= 5) memcpy(text + size - 5, "...)", 5);
}

/* Checks the caller's shape and returns its number of cells in *cells. */
static int check_arguments(const char *path, const float *out, uint32_t rank, const int64_t *dims, const char *what,
                           int64_t *cells) {
    if (!path || !what || (rank > 0 && !dims))
        return tsr_error(TSR_ERR_ARGUMENT, "data loader: NULL path, name or dimensions");
    int64_t product = 1;
    for (uint32_t a = 0; a < rank; a++) {
        if (dims[a] < 0 || (dims[a] > 0 && product > INT64_MAX / dims[a]))
            return tsr_error(TSR_ERR_ARGUMENT,
                             "data '%s': invalid shape (axis %u has size %lld or the product overflows)", what, a,
                             (long long)dims[a]);
        product *= dims[a];
    }
    if (product > 0 && !out) return tsr_error(TSR_ERR_ARGUMENT, "data '%s': NULL output buffer", what);
    *cells = product;
    return TSR_OK;
}

static int open_file(const Source *src, FILE **file) {
    *file = fopen(src->path, "rb");
    if (!*file) return fail_at(src, 0, 0, "cannot open: %s", strerror(errno));
    return TSR_OK;
}

/* "s" unless n is 1, for plurals in messages. */
static const char *plural(int64_t n) { return n == 1 ? "" : "s"; }

/* The text of a read error (errno as fread left it; EIO if it left none). */
static const char *read_error_text(int saved_errno) { return strerror(saved_errno ? saved_errno : EIO); }

/* Text from a file for a message: at most 40 bytes, anything unprintable as '?'. */
static void printable(char *out, size_t size, const char *text, size_t len) {
    size_t shown = len < 40 ? len : 40, n = 0;
    for (size_t i = 0; i < shown && n + 1 < size; i++) {
        unsigned char c = (unsigned char)text[i];
        out[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[n] = '\0';
    if (shown < len && n + 4 <= size) memcpy(out + n, "...", 4);
}

/* ---- .npy ---------------------------------------------------------------------------------- */

enum { NPY_MAX_AXES = 64, NPY_MAX_HEADER = 1 << 20 };

typedef enum NpyType { NPY_F4, NPY_F8, NPY_I4, NPY_I8 } NpyType;

/* What the header dictionary says. */
typedef struct NpyHeader {
    char descr[32];
    bool have_descr, have_order, have_shape;
    bool fortran_order;
    uint32_t rank;
    int64_t dims[NPY_MAX_AXES];
} NpyHeader;

/* A cursor over the header text; `problem` is set at the first error. */
typedef struct NpyParser {
    const char *text;
    size_t len, pos;
    char problem[160];
} NpyParser;

static bool npy_fail(NpyParser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool npy_fail(NpyParser *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->problem, sizeof p->problem, fmt, ap);
    va_end(ap);
    return false;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void npy_skip_space(NpyParser *p) {
    while (p->pos < p->len && is_space(p->text[p->pos])) p->pos++;
}

/* Skips blanks, then consumes `c` if it is next. */
static bool npy_accept(NpyParser *p, char c) {
    npy_skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == c) {
        p->pos++;
        return true;
    }
    return false;
}

static bool npy_expect(NpyParser *p, char c, const char *context) {
    return npy_accept(p, c) || npy_fail(p, "expected '%c' %s", c, context);
}

/* A Python string literal in single or double quotes (no escapes: numpy never writes them). */
static bool npy_string(NpyParser *p, char *out, size_t size, const char *context) {
    npy_skip_space(p);
    char quote = p->pos < p->len ? p->text[p->pos] : '\0';
    if (quote != '\'' && quote != '"') return npy_fail(p, "expected a string %s", context);
    size_t start = ++p->pos;
    while (p->pos < p->len && p->text[p->pos] != quote && p->text[p->pos] != '\0') p->pos++;
    if (p->pos >= p->len || p->text[p->pos] != quote) return npy_fail(p, "unterminated string %s", context);
    size_t n = p->pos - start;
    p->pos++;
    if (n >= size) return npy_fail(p, "string too long %s", context);
    memcpy(out, p->text + start, n);
    out[n] = '\0';
    return true;
}

/* Consumes the identifier `word` (True, False) if it is next. */
static bool npy_word(NpyParser *p, const char *word) {
    npy_skip_space(p);
    size_t n = strlen(word);
    if (p->len - p->pos >= n && memcmp(p->text + p->pos, word, n) == 0) {
        p->pos += n;
        return true;
    }
    return false;
}

/* A tuple of non-negative integers: "()", "(3,)", "(4, 3)", "(4, 3,)"; Python 2's "3L" too. */
static bool npy_shape(NpyParser *p, NpyHeader *h) {
    if (!npy_expect(p, '(', "to open the shape")) return false;
    h->rank = 0;
    while (!npy_accept(p, ')')) {
        if (h->rank == NPY_MAX_AXES) return npy_fail(p, "shape has more than %d axes", NPY_MAX_AXES);
        npy_skip_space(p);
        if (p->pos >= p->len || p->text[p->pos] < '0' || p->text[p->pos] > '9')
            return npy_fail(p, "expected a size or ')' in the shape");
        int64_t value = 0;
        for (; p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9'; p->pos++) {
            int digit = p->text[p->pos] - '0';
            if (value > (INT64_MAX - digit) / 10) return npy_fail(p, "a size in the shape is too large");
            value = value * 10 + digit;
        }
        if (p->pos < p->len && p->text[p->pos] == 'L') p->pos++;
        h->dims[h->rank++] = value;
        if (!npy_accept(p, ',')) {
            if (!npy_expect(p, ')', "or ',' in the shape")) return false;
            break;
        }
    }
    return true;
}

/* The dictionary: the three keys numpy writes, in any order, each once, nothing else. */
static bool npy_parse_header(NpyParser *p, NpyHeader *h) {
    memset(h, 0, sizeof *h);
    if (!npy_expect(p, '{', "at the start of the header")) return false;
    while (!npy_accept(p, '}')) {
        char key[32];
        if (!npy_string(p, key, sizeof key, "as a header key")) return false;
        if (!npy_expect(p, ':', "after a header key")) return false;
        bool *seen;
        if (strcmp(key, "descr") == 0) {
            seen = &h->have_descr;
            if (!npy_string(p, h->descr, sizeof h->descr, "for 'descr' (structured dtypes are not supported)"))
                return false;
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &h->have_order;
            if (npy_word(p, "True")) h->fortran_order = true;
            else if (npy_word(p, "False")) h->fortran_order = false;
            else return npy_fail(p, "expected True or False for 'fortran_order'");
        } else if (strcmp(key, "shape") == 0) {
            seen = &h->have_shape;
            if (!npy_shape(p, h)) return false;
        } else {
            char shown[64];
            printable(shown, sizeof shown, key, strlen(key));
            return npy_fail(p, "unknown key '%s'", shown);
        }
        if (*seen) return npy_fail(p, "key '%s' appears twice", key);
        *seen = true;
        if (!npy_accept(p, ',')) {
            if (!npy_expect(p, '}', "or ',' in the header")) return false;
            break;
        }
    }
    if (!h->have_descr) return npy_fail(p, "no 'descr'");
    if (!h->have_order) return npy_fail(p, "no 'fortran_order'");
    if (!h->have_shape) return npy_fail(p, "no 'shape'");
    while (p->pos < p->len && (is_space(p->text[p->pos]) || p->text[p->pos] == '\0')) p->pos++;
    if (p->pos < p->len) return npy_fail(p, "unexpected text after the dictionary");
    return true;
}

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* The element type of a descr such as "<f4": little-endian ('<', or '=' / '|' / none on a
 * little-endian host) float32, float64, int32 or int64. */
static int npy_type(const Source *src, const char *descr, NpyType *type, int64_t *size) {
    bool has_order = descr[0] != '\0' && strchr("<>=|", descr[0]) != NULL;
    const char *code = has_order ? descr + 1 : descr;
    bool little = descr[0] == '<' || (descr[0] != '>' && host_is_little_endian());
    static const struct { const char *code; NpyType type; int64_t size; } known[] = {
        {"f4", NPY_F4, 4}, {"f8", NPY_F8, 8}, {"i4", NPY_I4, 4}, {"i8", NPY_I8, 8},
    };
    char shown[64];
    printable(shown, sizeof shown, descr, strlen(descr));
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(code, known[i].code) != 0) continue;
        if (!little) return fail_at(src, 0, 0, "dtype '%s' is big-endian; only little-endian data is supported", shown);
        *type = known[i].type;
        *size = known[i].size;
        return TSR_OK;
    }
    return fail_at(src, 0, 0, "dtype '%s' is not supported (float32, float64, int32, int64)", shown);
}

static uint64_t load_le(const unsigned char *bytes, int size) {
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; i--) value = value << 8 | bytes[i];
    return value;
}

/* Converts `n` little-endian elements of `type` to floats. */
static void npy_convert(NpyType type, const unsigned char *bytes, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) {
        switch (type) {
        case NPY_F4: {
            uint32_t bits = (uint32_t)load_le(bytes + 4 * i, 4);
            float f;
            memcpy(&f, &bits, sizeof f);
            out[i] = f;
            break;
        }
        case NPY_F8: {
            uint64_t bits = load_le(bytes + 8 * i, 8);
            double d;
            memcpy(&d, &bits, sizeof d);
            out[i] = (float)d;
            break;
        }
        case NPY_I4: out[i] = (float)(int32_t)(uint32_t)load_le(bytes + 4 * i, 4); break;
        case NPY_I8: out[i] = (float)(int64_t)load_le(bytes + 8 * i, 8); break;
        }
    }
}

/* Reads the magic, the version and the header text (malloc'd into *text, length *len). */
static int npy_read_header(const Source *src, FILE *file, char **text, size_t *len) {
    unsigned char preamble[12];
    errno = 0;
    size_t got = fread(preamble, 1, 10, file);
    if (ferror(file)) return fail_at(src, 0, 0, "cannot read: %s", read_error_text(errno));
    if (got < 8 || memcmp(preamble, "\x93NUMPY", 6) != 0) return fail_at(src, 0, 0, "is not a .npy file (bad magic)");
    int major = preamble[6], minor = preamble[7];
    if (major < 1 || major > 3 || minor != 0)
        return fail_at(src, 0, 0, "has .npy format version %d.%d (1.0, 2.0 and 3.0 are supported)", major, minor);
    int length_bytes = major == 1 ? 2 : 4;
    if (length_bytes == 4) got += fread(preamble + 10, 1, 2, file);
    if (got < (size_t)(8 + length_bytes)) return fail_at(src, 0, 0, "is truncated in its header");
    uint64_t header_len = load_le(preamble + 8, length_bytes);
    if (header_len > NPY_MAX_HEADER)
        return fail_at(src, 0, 0, "has a header of %llu bytes (at most %d)", (unsigned long long)header_len,
                       NPY_MAX_HEADER);
    *text = malloc(header_len + 1);
    if (!*text) return tsr_error(TSR_ERR_NOMEM, "data '%s': out of memory reading '%s'", src->what, src->path);
    *len = fread(*text, 1, header_len, file);
    if (*len < header_len)
        return fail_at(src, 0, 0, "is truncated in its header: %zu of %llu bytes", *len,
                       (unsigned long long)header_len);
    (*text)[*len] = '\0';
    return TSR_OK;
}

/* Reads `cells` elements of `type` into `out`, then requires the end of the file. */
static int npy_read_data(const Source *src, FILE *file, NpyType type, int64_t item_size, int64_t cells, float *out) {
    if (cells > INT64_MAX / item_size)
        return fail_at(src, 0, 0, "declares more data than can be addressed");
    int64_t want = cells * item_size, have = 0;
    unsigned char chunk[READ_CHUNK];
    while (have < want) {
        size_t ask = want - have < READ_CHUNK ? (size_t)(want - have) : READ_CHUNK;
        errno = 0;
        size_t got = fread(chunk, 1, ask, file);
        int saved_errno = errno;
        size_t whole = got - got % (size_t)item_size;
        npy_convert(type, chunk, (int64_t)whole / item_size, out + have / item_size);
        have += (int64_t)whole;
        if (got < ask) {
            have += (int64_t)(got - whole);
            if (ferror(file)) return fail_at(src, 0, 0, "cannot read: %s", read_error_text(saved_errno));
            return fail_at(src, 0, 0, "is truncated: %lld of %lld data bytes", (long long)have, (long long)want);
        }
    }
    int64_t extra = 0;
    size_t got;
    while ((got = fread(chunk, 1, READ_CHUNK, file)) > 0 && extra < INT64_MAX - READ_CHUNK) extra += (int64_t)got;
    if (extra > 0)
        return fail_at(src, 0, 0, "has %lld byte%s after its %lld data bytes", (long long)extra, plural(extra),
                       (long long)want);
    if (ferror(file)) return fail_at(src, 0, 0, "cannot read: %s", read_error_text(errno));
    return TSR_OK;
}

static int npy_load(const Source *src, FILE *file, float *out, uint32_t rank, const int64_t *dims, int64_t cells) {
    char *text = NULL;
    size_t len = 0;
    int status = npy_read_header(src, file, &text, &len);
    NpyHeader header;
    if (status == TSR_OK) {
        NpyParser parser = {.text = text, .len = len};
        if (!npy_parse_header(&parser, &header))
            status = fail_at(src, 0, 0, "has a malformed header: %s", parser.problem);
    }
    free(text);
    if (status != TSR_OK) return status;

    NpyType type = NPY_F4;
    int64_t item_size = 4;
    status = npy_type(src, header.descr, &type, &item_size);
    if (status != TSR_OK) return status;
    if (header.fortran_order) return fail_at(src, 0, 0, "Fortran order is not supported (save a C-ordered array)");
    bool same = header.rank == rank;
    for (uint32_t a = 0; same && a < rank; a++) same = header.dims[a] == dims[a];
    if (!same) {
        char expected[256], found[256];
        format_shape(expected, sizeof expected, rank, dims);
        format_shape(found, sizeof found, header.rank, header.dims);
        return fail_at(src, 0, 0, "expected shape %s, found %s", expected, found);
    }
    return npy_read_data(src, file, type, item_size, cells, out);
}


/* ---- CSV ------------------------------------------------------------------------------------- */

/* Lines of a file, read in chunks; any byte but '\n' may be part of a line. */
typedef struct LineReader {
    FILE *file;
    unsigned char chunk[READ_CHUNK];
    size_t chunk_pos, chunk_len;
    char *line; /* the current line without its '\n', NUL-terminated */
    size_t len, cap;
    int64_t number; /* of the current line, from 1 */
    int read_errno;
} LineReader;

enum { LINE_READ = 1, LINE_END = 0, LINE_ERROR = -1, LINE_NOMEM = -2 };

static bool line_append(LineReader *r, const unsigned char *bytes, size_t n) {
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->len + n + 1) cap *= 2;
        char *grown = realloc(r->line, cap);
        if (!grown) return false;
        r->line = grown;
        r->cap = cap;
    }
    memcpy(r->line + r->len, bytes, n);
    r->len += n;
    r->line[r->len] = '\0';
    return true;
}

/* LINE_READ with the next line in r->line, LINE_END, LINE_ERROR (r->read_errno) or LINE_NOMEM. */
static int next_line(LineReader *r) {
    r->len = 0;
    bool started = false;
    for (;;) {
        if (r->chunk_pos == r->chunk_len) {
            errno = 0;
            r->chunk_len = fread(r->chunk, 1, sizeof r->chunk, r->file);
            r->chunk_pos = 0;
            if (r->chunk_len == 0) {
                if (ferror(r->file)) {
                    r->read_errno = errno ? errno : EIO;
                    return LINE_ERROR;
                }
                if (!started) return LINE_END;
                break;
            }
        }
        started = true;
        const unsigned char *start = r->chunk + r->chunk_pos;
        size_t available = r->chunk_len - r->chunk_pos;
        const unsigned char *newline = memchr(start, '\n', available);
        size_t take = newline ? (size_t)(newline - start) : available;
        if (!line_append(r, start, take)) return LINE_NOMEM;
        r->chunk_pos += take + (newline ? 1 : 0);
        if (newline) break;
    }
    r->number++;
    return LINE_READ;
}

/* The fields of one line: separated by a comma, blanks, or a comma with blanks around it;
 * '#' ends the line.  Two commas in a row, or a comma at either end, delimit an empty field. */
typedef struct FieldCursor {
    char *text;
    size_t len, pos;
    bool after_comma;
} FieldCursor;

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static bool ends_field(char c) { return is_blank(c) || c == ',' || c == '#'; }

static void skip_blanks(FieldCursor *c) {
    while (c->pos < c->len && is_blank(c->text[c->pos])) c->pos++;
}

/* The next field as [*start, *start + *len); false when the line has no more. */
static bool next_field(FieldCursor *c, size_t *start, size_t *len) {
    skip_blanks(c);
    bool at_end = c->pos >= c->len || c->text[c->pos] == '#';
    if (at_end && !c->after_comma) return false;
    *start = c->pos;
    while (c->pos < c->len && !ends_field(c->text[c->pos])) c->pos++;
    *len = c->pos - *start;
    skip_blanks(c);
    c->after_comma = c->pos < c->len && c->text[c->pos] == ',';
    if (c->after_comma) c->pos++;
    return true;
}

/* Parses a whole field with strtod; false if it is empty or anything is left over. */
static bool parse_number(char *text, size_t len, double *value) {
    if (len == 0) return false;
    char saved = text[len];
    text[len] = '\0';
    char *end;
    *value = strtod(text, &end);
    text[len] = saved;
    return end == text + len;
}

typedef struct CsvLoad {
    const Source *src;
    float *out;
    int64_t cells;         /* numbers expected */
    int64_t per_line;      /* numbers per line; 0: any (rank 0 or 1) */
    int64_t count;         /* numbers read */
    int64_t rows;          /* lines with numbers */
    int64_t header_line;   /* the line skipped as a header, or 0 */
    bool seen_first;       /* a line with fields has been seen */
} CsvLoad;

/* True if some field of the line is not a number (the line is a header if it is the first). */
static bool has_non_number(char *text, size_t len) {
    FieldCursor c = {.text = text, .len = len};
    size_t start, field_len;
    double value;
    while (next_field(&c, &start, &field_len))
        if (!parse_number(text + start, field_len, &value)) return true;
    return false;
}

static int csv_line(CsvLoad *load, char *text, size_t len, int64_t line) {
    if (!load->seen_first) {
        FieldCursor probe = {.text = text, .len = len};
        size_t start, field_len;
        if (!next_field(&probe, &start, &field_len)) return TSR_OK;
        load->seen_first = true;
        if (has_non_number(text, len)) {
            load->header_line = line;
            return TSR_OK;
        }
    }
    FieldCursor c = {.text = text, .len = len};
    size_t start, field_len;
    int64_t fields = 0;
    while (next_field(&c, &start, &field_len)) {
        double value;
        if (!parse_number(text + start, field_len, &value)) {
            if (field_len == 0) return fail_at(load->src, line, (int64_t)start + 1, "empty field");
            char shown[64];
            printable(shown, sizeof shown, text + start, field_len);
            return fail_at(load->src, line, (int64_t)start + 1, "not a number: '%s'", shown);
        }
        if (load->count < load->cells) load->out[load->count] = (float)value;
        load->count++;
        fields++;
    }
    if (fields == 0) return TSR_OK;
    load->rows++;
    if (load->per_line > 0 && fields != load->per_line)
        return fail_at(load->src, line, 0, "line has %lld field%s, expected %lld", (long long)fields, plural(fields),
                       (long long)load->per_line);
    return TSR_OK;
}

static int csv_load(CsvLoad *load, FILE *file, uint32_t rank, const int64_t *dims) {
    LineReader reader = {.file = file};
    int status = TSR_OK, got = LINE_END;
    while (status == TSR_OK && (got = next_line(&reader)) == LINE_READ)
        status = csv_line(load, reader.line, reader.len, reader.number);
    free(reader.line);
    if (status != TSR_OK) return status;
    if (got == LINE_ERROR) return fail_at(load->src, 0, 0, "cannot read: %s", strerror(reader.read_errno));
    if (got == LINE_NOMEM)
        return tsr_error(TSR_ERR_NOMEM, "data '%s': out of memory reading '%s'", load->src->what, load->src->path);
    if (load->count == load->cells) return TSR_OK;

    char shape[256], header[64] = "";
    format_shape(shape, sizeof shape, rank, dims);
    if (load->header_line > 0)
        snprintf(header, sizeof header, "; line %lld was skipped as a header", (long long)load->header_line);
    if (load->per_line > 0)
        return fail_at(load->src, 0, 0, "has %lld row%s, expected %lld for shape %s%s", (long long)load->rows,
                       plural(load->rows), (long long)(load->cells / load->per_line), shape, header);
    return fail_at(load->src, 0, 0, "has %lld number%s, expected %lld for shape %s%s", (long long)load->count,
                   plural(load->count), (long long)load->cells, shape, header);
}

static int csv_file(const Source *src, FILE *file, float *out, uint32_t rank, const int64_t *dims, int64_t cells) {
    CsvLoad load = {.src = src, .out = out, .cells = cells, .per_line = rank >= 2 ? dims[rank - 1] : 0};
    return csv_load(&load, file, rank, dims);
}

/* The loaders' common part: check the arguments, open the file, read it with `read`, close. */
typedef int (*FileReader)(const Source *src, FILE *file, float *out, uint32_t rank, const int64_t *dims,
                          int64_t cells);

static int load_file(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what,
                     FileReader read) {
    int64_t cells = 0;
    int status = check_arguments(path, out, rank, dims, what, &cells);
    if (status != TSR_OK) return status;
    Source src = {path, what};
    FILE *file;
    status = open_file(&src, &file);
    if (status != TSR_OK) return status;
    status = read(&src, file, out, rank, dims, cells);
    fclose(file);
    return status;
}

int tsr_load_npy(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what) {
    return load_file(path, out, rank, dims, what, npy_load);
}

int tsr_load_csv(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what) {
    return load_file(path, out, rank, dims, what, csv_file);
}
