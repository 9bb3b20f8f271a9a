/* data.c — the data sets a program can declare: toy generators and the .npy and CSV loaders.
 *
 * Generators (half moons, circles, spirals) write `count` points (count×2, row-major) and their
 * labels (+1 / -1).  Consecutive points alternate classes (point p has class p % 2, class 0
 * labelled +1), so every contiguous mini-batch holds both; within a class the curve parameter
 * is spaced evenly in point order.  Noise is Gaussian, drawn from the counter-based RNG
 * (tsr_rng_normal) with one stream per generator and coordinate and the point as the index, so
 * the output is a pure function of (count, noise, seed, …).
 *
 * Loaders read a whole file into a caller-allocated tensor whose shape and element type the
 * compiler already knows: an F32 tensor takes a file of any float, integer or bool .npy dtype
 * (converted to float32), an F64 tensor the same files (converted to double), a BF16 or F16
 * tensor the same files too, each value rounded once to the type (to nearest, ties to even:
 * tsr.h's conversions; a value the type holds exactly keeps its bits, NaN payloads included), an
 * I32, I64, U8 or BOOL one integers only (any integer .npy dtype, decimal CSV integers), each
 * checked to fit the type (int32; int64; 0 to 255; 0 or 1) and stored as its cell, exactly; a value that does not fit is
 * an error naming its cell.  Cells are of the target type's size (tsr_dtype_cell_bytes: 1, 2, 4
 * or 8 bytes), whatever the file's element
 * size.  The file must match the shape exactly, and be complete: a .npy file holds exactly the
 * data its header states, and every CSV line ends with a newline (a last line without one is a
 * cut file).  Only regular files are read (a FIFO or a device may never end), with open/fstat
 * and then stdio; what they read is bounded by the stated shape and the file's size, memory by
 * a constant (CSV is scanned one field at a time, never a whole line).  They accept any byte
 * sequence without crashing or hanging, never print, and report every problem with the file as
 * TSR_ERR_DATA through tsr_data_error, as "data 'WHAT': 'PATH'[:LINE:COL]: what is wrong"
 * (bad arguments give TSR_ERR_ARGUMENT, a failed allocation TSR_ERR_NOMEM).  Sizes are 64-bit
 * and sizes declared by a file are checked for overflow before use.  tokens.c opens its files
 * through tsr_data_open, with the same checks.  Requires internal.h (tsr_rng_normal,
 * tsr_data_error) and tsr_error; nothing else of the runtime. */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (!points || !labels) return; /* nothing to fill */
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

/* The file being read: its names for messages, and its size once open.  `archive` is set when
 * the bytes are a member of a checkpoint (.npz): `path` is then the archive's path and `what`
 * the array's name. */
typedef struct Source {
    const char *path;
    const char *what;
    int64_t size;
    bool archive;
} Source;

/* Record "data 'WHAT': 'PATH'[:LINE[:COL]]: MESSAGE" (line 0: no line; col 0: no column), or
 * "checkpoint 'PATH': array 'WHAT': MESSAGE" for a member of a checkpoint. */
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
    if (src->archive) return tsr_data_error("checkpoint '%s': array '%s': %s", src->path, src->what, message);
    return tsr_data_error("data '%s': '%s'%s: %s", src->what, src->path, where, message);
}

/* Positions name at most this many axes (a tensor has far fewer). */
enum { NPY_MAX_AXES_FOR_POSITION = 64 };

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

/* Where a loader puts what it reads: the `cells` cells of shape `dims` at `out`, of element type
 * `dtype` (TSR_DTYPE_*: cells of tsr_dtype_cell_bytes(); an I32 tensor's cells hold int32 values,
 * an F64 tensor's doubles, a BF16 or F16 tensor's 2-byte bit patterns). */
typedef struct Target {
    void *out;
    uint8_t dtype;
    uint32_t rank;
    const int64_t *dims;
    int64_t cells;
    int shard, shards; /* process `shard` of `shards` keeps samples shard, shard+shards, … (0 of 1: all) */
    uint32_t sample_axes; /* sharded: the leading axes whose indices number the samples */
    int64_t samples;      /* sharded: this process's samples (the product of those axes) */
    bool spare;           /* sharded, of run-time length: the file may hold more samples, unused */
} Target;

/* Checks the caller's arguments and counts the target's cells. */
static int check_arguments(const char *path, const char *what, Target *target) {
    if (!path || !what || (target->rank > 0 && !target->dims))
        return tsr_error(TSR_ERR_ARGUMENT, "data loader: NULL path, name or dimensions");
    if (target->dtype >= TSR_DTYPE_COUNT)
        return tsr_error(TSR_ERR_ARGUMENT, "data '%s': unknown element type %u", what, target->dtype);
    int64_t product = 1;
    for (uint32_t a = 0; a < target->rank; a++) {
        int64_t dim = target->dims[a];
        if (dim < 0 || (dim > 0 && product > INT64_MAX / dim))
            return tsr_error(TSR_ERR_ARGUMENT,
                             "data '%s': invalid shape (axis %u has size %lld or the product overflows)", what, a,
                             (long long)dim);
        product *= dim;
    }
    if (product > 0 && !target->out) return tsr_error(TSR_ERR_ARGUMENT, "data '%s': NULL output buffer", what);
    target->cells = product;
    return TSR_OK;
}

void tsr_format_position(char *text, size_t size, uint32_t rank, const int64_t *dims, int64_t cell) {
    int64_t index[NPY_MAX_AXES_FOR_POSITION];
    uint32_t shown = rank < NPY_MAX_AXES_FOR_POSITION ? rank : NPY_MAX_AXES_FOR_POSITION;
    for (uint32_t a = rank; a-- > 0;) {
        int64_t dim = dims[a] > 0 ? dims[a] : 1;
        if (a < shown) index[a] = cell % dim;
        cell /= dim;
    }
    format_shape(text, size, shown, index);
}

/* NumPy's name of the type of an integer tensor of type `dtype` (messages). */
static const char *numpy_integer_name(uint8_t dtype) {
    return dtype == TSR_DTYPE_U8 ? "uint8" : dtype == TSR_DTYPE_BOOL ? "bool" : dtype == TSR_DTYPE_I64 ? "int64" : "int32";
}

/* The least and greatest value of integer type `dtype`. */
static void integer_range(uint8_t dtype, int64_t *low, int64_t *high) {
    *low = dtype == TSR_DTYPE_I64 ? INT64_MIN : dtype == TSR_DTYPE_I32 ? INT32_MIN : 0;
    *high = dtype == TSR_DTYPE_I64 ? INT64_MAX : dtype == TSR_DTYPE_I32 ? INT32_MAX : dtype == TSR_DTYPE_U8 ? 255 : 1;
}

/* Whether integer type `dtype` takes `value` (`beyond`: it lies past int64_t). */
static bool integer_fits(uint8_t dtype, int64_t value, bool beyond) {
    int64_t low, high;
    integer_range(dtype, &low, &high);
    return !beyond && value >= low && value <= high;
}

/* Stores integer `value` of a file into cell `cell` of an integer target (I32, U8, BOOL, I64), or
 * reports that it does not fit the type (nor does any value beyond int64, `beyond`): "cell (2, 5)
 * holds 4294967296, which does not fit int32 (-2147483648 to 2147483647)".  `text` is the value
 * as the file writes it (for messages). */
static int store_integer(const Source *src, int64_t line, int64_t col, const Target *t, int64_t cell, int64_t value,
                         bool beyond, const char *text) {
    int64_t low, high;
    integer_range(t->dtype, &low, &high);
    if (!integer_fits(t->dtype, value, beyond)) {
        char position[160];
        tsr_format_position(position, sizeof position, t->rank, t->dims, cell);
        return fail_at(src, line, col, "cell %s holds %s, which does not fit %s (%lld to %lld)", position, text,
                       numpy_integer_name(t->dtype), (long long)low, (long long)high);
    }
    if (t->dtype == TSR_DTYPE_I64) memcpy((char *)t->out + cell * (int64_t)sizeof value, &value, sizeof value);
    else tsr_cell_store(t->out, t->dtype, cell, (double)value);
    return TSR_OK;
}

/* What a file that is not a regular file is, for messages. */
static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

/* The files data items were read from (device and inode, with the item's name), kept in an
 * executable (tsr_data_files_keep): a checkpoint must not be saved over one
 * (tsr_data_file_item).  A library's process is not guarded so: its files may be deleted and
 * their inodes reused by files it then saves, from states long gone.  The first READ_FILES_MAX
 * are kept. */
enum { READ_FILES_MAX = 256 };
static bool read_files_kept;
static struct {
    dev_t dev;
    ino_t ino;
    char what[64];
} read_files[READ_FILES_MAX];
static unsigned read_file_count;
static pthread_mutex_t read_files_lock = PTHREAD_MUTEX_INITIALIZER;

void tsr_data_files_keep(void) { read_files_kept = true; }

static void note_read_file(const struct stat *st, const char *what) {
    if (!read_files_kept) return;
    pthread_mutex_lock(&read_files_lock);
    bool known = false;
    for (unsigned i = 0; i < read_file_count && !known; i++)
        known = read_files[i].dev == st->st_dev && read_files[i].ino == st->st_ino;
    if (!known && read_file_count < READ_FILES_MAX) {
        read_files[read_file_count].dev = st->st_dev;
        read_files[read_file_count].ino = st->st_ino;
        snprintf(read_files[read_file_count].what, sizeof read_files[0].what, "%s", what ? what : "");
        read_file_count++;
    }
    pthread_mutex_unlock(&read_files_lock);
}

bool tsr_data_file_item(dev_t dev, ino_t ino, char *what, size_t size) {
    pthread_mutex_lock(&read_files_lock);
    bool found = false;
    for (unsigned i = 0; i < read_file_count && !found; i++)
        if (read_files[i].dev == dev && read_files[i].ino == ino) {
            snprintf(what, size, "%s", read_files[i].what);
            found = true;
        }
    pthread_mutex_unlock(&read_files_lock);
    return found;
}

/* Opens a regular file for reading and records its size (and that it was read, note_read_file).
 * Anything else is refused before a byte is read: a FIFO or a device may never end, or block
 * (the open does not wait for a FIFO's writer). */
static int open_file(Source *src, FILE **file) {
    int fd = open(src->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return fail_at(src, 0, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved_errno = errno;
        close(fd);
        return fail_at(src, 0, 0, "cannot open: %s", strerror(saved_errno));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail_at(src, 0, 0, "is %s, not a regular file", file_kind(st.st_mode));
    }
    src->size = (int64_t)st.st_size;
    note_read_file(&st, src->what);
    *file = fdopen(fd, "rb");
    if (!*file) {
        int saved_errno = errno;
        close(fd);
        return fail_at(src, 0, 0, "cannot open: %s", strerror(saved_errno));
    }
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

/* The element types a .npy file may hold: floats, booleans, signed and unsigned integers.  An
 * F32 tensor reads every one, converted to float32 (rounded to nearest where the value has more
 * than 24 significant bits; float16, bool and the integers of up to 16 bits exactly); an F64
 * tensor the same, converted to double (exact for the floats and for integers below 2^53); a
 * BF16 or F16 tensor the same, each value rounded once to the type; an I32 tensor reads every
 * integer type and bool, each value checked to fit int32.  A bool element is 0 or 1 (a byte
 * other than 0 reads as 1, as NumPy's bool does). */
typedef enum NpyKind { NPY_FLOAT, NPY_SIGNED, NPY_UNSIGNED, NPY_BOOL } NpyKind;
typedef struct NpyType {
    const char *code, *name; /* "f4", "float32" */
    NpyKind kind;
    int size;
} NpyType;

static const NpyType NPY_TYPES[] = {
    {"f4", "float32", NPY_FLOAT, 4},   {"f8", "float64", NPY_FLOAT, 8},   {"f2", "float16", NPY_FLOAT, 2},
    {"i4", "int32", NPY_SIGNED, 4},    {"i8", "int64", NPY_SIGNED, 8},    {"i1", "int8", NPY_SIGNED, 1},
    {"i2", "int16", NPY_SIGNED, 2},    {"u1", "uint8", NPY_UNSIGNED, 1},  {"u2", "uint16", NPY_UNSIGNED, 2},
    {"u4", "uint32", NPY_UNSIGNED, 4}, {"u8", "uint64", NPY_UNSIGNED, 8}, {"b1", "bool", NPY_BOOL, 1},
};

/* The NumPy type an array for a float tensor of type `dtype` is best converted to (messages):
 * NumPy has no bfloat16, and a BF16 tensor is saved as float32. */
static const char *numpy_float_name(uint8_t dtype) {
    return dtype == TSR_DTYPE_F64 ? "float64" : dtype == TSR_DTYPE_F16 ? "float16" : "float32";
}

/* The element type of a descr such as "<f4" for a tensor of type `dtype`: little-endian ('<',
 * or '=' / '|' / none on a little-endian host; any order for one-byte types), of a type that
 * tensor reads.  A checkpoint's array (src->archive) must hold numbers of the tensor's kind: an
 * integer (or bool) array for an I32, U8 or BOOL tensor, a float array for an F32, F64, BF16 or F16 one. */
static int npy_type(const Source *src, const char *descr, uint8_t dtype, const NpyType **type) {
    bool has_order = descr[0] != '\0' && strchr("<>=|", descr[0]) != NULL;
    const char *code = has_order ? descr + 1 : descr;
    bool little = descr[0] == '<' || (descr[0] != '>' && host_is_little_endian());
    char shown[64];
    printable(shown, sizeof shown, descr, strlen(descr));
    const char *holder = src->archive ? "the array" : "the file";
    for (size_t i = 0; i < sizeof NPY_TYPES / sizeof NPY_TYPES[0]; i++) {
        const NpyType *t = &NPY_TYPES[i];
        if (strcmp(code, t->code) != 0) continue;
        if (!little && t->size > 1)
            return fail_at(src, 0, 0, "dtype '%s' is big-endian; only little-endian data is supported", shown);
        bool is_float = t->kind == NPY_FLOAT;
        if (tsr_dtype_integer(dtype) && is_float)
            return fail_at(src, 0, 0, "the tensor is %s but %s holds %s numbers: convert it with numpy's "
                           "astype(numpy.%s)", tsr_dtype_word(dtype), holder, t->name,
                           dtype == TSR_DTYPE_BOOL ? "bool_" : numpy_integer_name(dtype));
        if (!tsr_dtype_integer(dtype) && src->archive && !is_float)
            return fail_at(src, 0, 0, "the tensor is %s but %s holds %s numbers: convert it with numpy's "
                           "astype(numpy.%s)", tsr_dtype_word(dtype), holder, t->name, numpy_float_name(dtype));
        *type = t;
        return TSR_OK;
    }
    if (tsr_dtype_integer(dtype))
        return fail_at(src, 0, 0, "dtype '%s' is not supported for an %s tensor (bool, int8, int16, int32, int64, "
                       "uint8, uint16, uint32, uint64)", shown, tsr_dtype_word(dtype));
    return fail_at(src, 0, 0, "dtype '%s' is not supported (float16, float32, float64, bool, int8, int16, int32, "
                   "int64, uint8, uint16, uint32, uint64)", shown);
}

static uint64_t load_le(const unsigned char *bytes, int size) {
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; i--) value = value << 8 | bytes[i];
    return value;
}

/* The signed integer whose `size`-byte two's complement is `raw`. */
static int64_t sign_extend(uint64_t raw, int size) {
    uint64_t sign = (uint64_t)1 << (8 * size - 1), mask = sign | (sign - 1);
    return raw & sign ? -(int64_t)(~raw & mask) - 1 : (int64_t)raw;
}

/* An integer as a double rounded to odd: exact below 2^53, else truncated to 53 significant bits
 * with the last one set when bits were dropped, so that a later rounding to nearest to a type of
 * at most 51 bits (tsr_f64_to_bf16, tsr_f64_to_f16) rounds the integer once. */
static double integer_odd(uint64_t magnitude, bool negative) {
    int shift = 0;
    while (magnitude >> shift >= (uint64_t)1 << 53) shift++;
    uint64_t kept = magnitude >> shift;
    if (shift && (magnitude & (((uint64_t)1 << shift) - 1))) kept |= 1;
    double d = ldexp((double)kept, shift);
    return negative ? -d : d;
}

/* Stores element `raw` (little-endian bits of a float or integer `type`) into BF16 or F16 cell
 * `cell`, rounded once to nearest even: a float16 element into F16, or a float32 one that BF16
 * holds exactly (its low 16 bits zero: a BF16 tensor saved as float32), keeps its bits; other
 * floats round from their value (float64 through round-to-odd, tsr_f64_to_bf16), integers from
 * integer_odd. */
static void store_half(const NpyType *type, uint64_t raw, const Target *t, int64_t cell) {
    bool bf16 = t->dtype == TSR_DTYPE_BF16;
    uint16_t h;
    if (type->kind == NPY_FLOAT && type->size == 2) {
        h = bf16 ? tsr_f32_to_bf16(tsr_f16_to_f32((uint16_t)raw)) : (uint16_t)raw;
    } else if (type->kind == NPY_FLOAT && type->size == 4) {
        uint32_t bits = (uint32_t)raw;
        float f = tsr_f32_of_bits(bits);
        h = bf16 ? ((bits & 0xffffu) == 0 ? (uint16_t)(bits >> 16) : tsr_f32_to_bf16(f)) : tsr_f32_to_f16(f);
    } else {
        double d;
        if (type->kind == NPY_FLOAT) {
            memcpy(&d, &raw, sizeof d);
        } else if (type->kind == NPY_SIGNED) {
            int64_t v = sign_extend(raw, type->size);
            d = integer_odd(v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
        } else {
            d = integer_odd(raw, false);
        }
        h = bf16 ? tsr_f64_to_bf16(d) : tsr_f64_to_f16(d);
    }
    memcpy((char *)t->out + cell * (int64_t)sizeof h, &h, sizeof h);
}

/* Converts `n` little-endian elements of `type` into the target's cells from cell `first`: to
 * float32, to double (an F64 target), rounded once to BF16 or F16 (store_half), or (an I32
 * target) to int32, where a value that does not fit is an error naming its cell. */
static int npy_convert(const Source *src, const NpyType *type, const unsigned char *bytes, int64_t n,
                       const Target *t, int64_t first) {
    float *floats = t->out;
    for (int64_t i = 0; i < n; i++) {
        uint64_t raw = load_le(bytes + (int64_t)type->size * i, type->size);
        if (type->kind == NPY_BOOL) raw = raw != 0; /* then an unsigned integer, 0 or 1 */
        int64_t cell = first + i;
        if (t->dtype == TSR_DTYPE_BF16 || t->dtype == TSR_DTYPE_F16) {
            store_half(type, raw, t, cell);
        } else if (t->dtype == TSR_DTYPE_F64) { /* floats widen exactly; integers below 2^53 are exact */
            double d;
            if (type->kind == NPY_FLOAT && type->size == 2) {
                d = tsr_f16_to_f32((uint16_t)raw);
            } else if (type->kind == NPY_FLOAT && type->size == 4) {
                d = tsr_f32_of_bits((uint32_t)raw);
            } else if (type->kind == NPY_FLOAT) {
                memcpy(&d, &raw, sizeof d);
            } else {
                d = type->kind == NPY_SIGNED ? (double)sign_extend(raw, type->size) : (double)raw;
            }
            memcpy((char *)t->out + cell * (int64_t)sizeof d, &d, sizeof d);
        } else if (type->kind == NPY_FLOAT) { /* only into F32 targets (npy_type) */
            if (type->size == 2) {
                floats[cell] = tsr_f16_to_f32((uint16_t)raw);
            } else if (type->size == 4) {
                uint32_t bits = (uint32_t)raw;
                memcpy(&floats[cell], &bits, sizeof bits);
            } else {
                double d;
                memcpy(&d, &raw, sizeof d);
                floats[cell] = (float)d;
            }
        } else if (t->dtype == TSR_DTYPE_F32) {
            floats[cell] = type->kind == NPY_SIGNED ? (float)sign_extend(raw, type->size) : (float)raw;
        } else {
            bool is_signed = type->kind == NPY_SIGNED;
            bool beyond = !is_signed && raw > INT64_MAX;
            int64_t value = is_signed ? sign_extend(raw, type->size) : beyond ? INT64_MAX : (int64_t)raw;
            char text[32]; /* the value as written, for the message when it does not fit */
            if (is_signed) snprintf(text, sizeof text, "%lld", (long long)value);
            else snprintf(text, sizeof text, "%llu", (unsigned long long)raw);
            int status = store_integer(src, 0, 0, t, cell, value, beyond, text);
            if (status != TSR_OK) return status;
        }
    }
    return TSR_OK;
}

/* Reads the magic, the version and the header text (malloc'd into *text, length *len). */
static int npy_read_header(const Source *src, FILE *file, char **text, size_t *len) {
    unsigned char preamble[12];
    errno = 0;
    size_t got = fread(preamble, 1, 10, file);
    if (ferror(file)) return fail_at(src, 0, 0, "cannot read: %s", read_error_text(errno));
    if (got == 0) return fail_at(src, 0, 0, "is empty, not a .npy file");
    if (got < 8 || memcmp(preamble, "\x93NUMPY", 6) != 0) {
        /* Text (a CSV file named x.CSV or x.txt, which is read as .npy): say how CSV is chosen. */
        bool looks_text = got > 0 && !src->archive;
        for (size_t i = (got >= 3 && memcmp(preamble, "\xef\xbb\xbf", 3) == 0) ? 3 : 0; i < got && looks_text; i++)
            looks_text = (preamble[i] >= 0x20 && preamble[i] < 0x7f) || (preamble[i] >= '\t' && preamble[i] <= '\r');
        return fail_at(src, 0, 0, "is not a .npy file (bad magic)%s",
                       looks_text ? "; it looks like text: a file is read as CSV when its name ends in .csv" : "");
    }
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

/* Reads the target's cells, elements of `type`, then requires the end of the file (known from
 * the file's size: what follows the data is counted, not read). */
static int npy_read_data(const Source *src, FILE *file, const NpyType *type, const Target *t) {
    int64_t item_size = type->size;
    if (t->cells > INT64_MAX / item_size)
        return fail_at(src, 0, 0, "declares more data than can be addressed");
    int64_t want = t->cells * item_size, have = 0;
    unsigned char chunk[READ_CHUNK];
    while (have < want) {
        size_t ask = want - have < READ_CHUNK ? (size_t)(want - have) : READ_CHUNK;
        errno = 0;
        size_t got = fread(chunk, 1, ask, file);
        int saved_errno = errno;
        size_t whole = got - got % (size_t)item_size;
        int status = npy_convert(src, type, chunk, (int64_t)whole / item_size, t, have / item_size);
        if (status != TSR_OK) return status;
        have += (int64_t)whole;
        if (got < ask) {
            have += (int64_t)(got - whole);
            if (ferror(file)) return fail_at(src, 0, 0, "cannot read: %s", read_error_text(saved_errno));
            return fail_at(src, 0, 0, "is truncated: %lld of %lld data bytes", (long long)have, (long long)want);
        }
    }
    int64_t data_end = (int64_t)ftello(file);
    errno = 0;
    if (fread(chunk, 1, 1, file) == 1) {
        int64_t extra = src->size > data_end ? src->size - data_end : 1; /* 1: the file grew */
        return fail_at(src, 0, 0, "has %lld byte%s after its %lld data bytes", (long long)extra, plural(extra),
                       (long long)want);
    }
    if (ferror(file)) return fail_at(src, 0, 0, "cannot read: %s", read_error_text(errno));
    return TSR_OK;
}

/* Whether the file's trailing axes are one sample's of target t (the axes after its sample axes)
 * and *rows, the product of its leading axes, the samples it holds (saturated at INT64_MAX). */
static bool holds_samples(const NpyHeader *header, const Target *t, int64_t *rows) {
    uint32_t tail = t->rank - t->sample_axes; /* the axes of one sample */
    bool same = header->rank > tail;
    for (uint32_t a = 0; same && a < tail; a++) same = header->dims[header->rank - tail + a] == t->dims[t->sample_axes + a];
    *rows = 1;
    for (uint32_t a = 0; same && a < header->rank - tail; a++)
        *rows = header->dims[a] && *rows > INT64_MAX / header->dims[a] ? INT64_MAX : *rows * header->dims[a];
    return same;
}

/* A sharded target (t->shards > 1): the file holds t->samples·shards samples, each of the shape of
 * the target's axes after its sample axes (the file's leading axes, whatever they are, numbering
 * the samples), and samples shard, shard+shards, … are read, one seek each; the file's size must
 * be what its header declares. */
static int npy_read_shard(const Source *src, FILE *file, const NpyType *type, const NpyHeader *header, const Target *t) {
    int64_t rows = t->samples, want_rows = rows <= INT64_MAX / t->shards ? rows * t->shards : INT64_MAX;
    uint32_t tail = t->rank - t->sample_axes; /* the axes of one sample */
    int64_t file_rows;
    bool same = holds_samples(header, t, &file_rows);
    if (!same || (t->spare ? file_rows < want_rows : file_rows != want_rows)) {
        char sample[256], found[256];
        format_shape(sample, sizeof sample, tail, t->dims + t->sample_axes);
        format_shape(found, sizeof found, header->rank, header->dims);
        if (same)
            return tsr_data_error("data '%s': a run of %d processes needs %lld samples in %s (%lld for each), it has "
                                  "%lld (its shape is %s)", src->what, t->shards, (long long)want_rows, src->path, (long long)rows,
                                  (long long)file_rows, found);
        return fail_at(src, 0, 0, "expected %lld samples of shape %s (%lld for each of %d processes), found shape %s",
                       (long long)want_rows, sample, (long long)rows, t->shards, found);
    }
    int64_t item_size = type->size, row_cells = rows ? t->cells / rows : 0;
    if (row_cells > INT64_MAX / item_size / (file_rows ? file_rows : 1))
        return fail_at(src, 0, 0, "declares more data than can be addressed");
    int64_t row_bytes = row_cells * item_size, data_start = (int64_t)ftello(file), want = row_bytes * file_rows;
    if (src->size - data_start < want)
        return fail_at(src, 0, 0, "is truncated: %lld of %lld data bytes", (long long)(src->size - data_start),
                       (long long)want);
    if (src->size - data_start > want) {
        int64_t extra = src->size - data_start - want;
        return fail_at(src, 0, 0, "has %lld byte%s after its %lld data bytes", (long long)extra, plural(extra),
                       (long long)want);
    }
    unsigned char chunk[READ_CHUNK];
    for (int64_t i = 0; i < rows; i++) {
        if (fseeko(file, (off_t)(data_start + (i * t->shards + t->shard) * row_bytes), SEEK_SET) != 0)
            return fail_at(src, 0, 0, "cannot seek: %s", read_error_text(errno));
        for (int64_t have = 0; have < row_bytes;) {
            size_t ask = row_bytes - have < READ_CHUNK ? (size_t)(row_bytes - have) : READ_CHUNK;
            ask -= ask % (size_t)item_size;
            errno = 0;
            size_t got = fread(chunk, 1, ask, file);
            if (got < ask) {
                if (ferror(file)) return fail_at(src, 0, 0, "cannot read: %s", read_error_text(errno));
                return fail_at(src, 0, 0, "is truncated (it changed while read)");
            }
            int status = npy_convert(src, type, chunk, (int64_t)got / item_size, t, i * row_cells + have / item_size);
            if (status != TSR_OK) return status;
            have += (int64_t)got;
        }
    }
    return TSR_OK;
}

static int npy_load(const Source *src, FILE *file, const Target *t) {
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

    const NpyType *type = NULL;
    status = npy_type(src, header.descr, t->dtype, &type);
    if (status != TSR_OK) return status;
    if (header.fortran_order) return fail_at(src, 0, 0, "Fortran order is not supported (save a C-ordered array)");
    if (t->shards > 1) return npy_read_shard(src, file, type, &header, t);
    bool same = header.rank == t->rank;
    for (uint32_t a = 0; same && a < t->rank; a++) same = header.dims[a] == t->dims[a];
    /* A set that a distributed run would split (sample_axes): the file's leading axes, whatever
     * they are, may number its samples, as they may for several processes ((300, 784) for
     * 10,30|784): the same bytes in C order. */
    int64_t rows;
    if (!same && t->sample_axes && t->sample_axes <= t->rank) same = holds_samples(&header, t, &rows) && rows == t->samples;
    if (!same) {
        char expected[256], found[256];
        format_shape(expected, sizeof expected, t->rank, t->dims);
        format_shape(found, sizeof found, header.rank, header.dims);
        if (t->sample_axes && t->sample_axes < t->rank) {
            char sample[256];
            format_shape(sample, sizeof sample, t->rank - t->sample_axes, t->dims + t->sample_axes);
            return fail_at(src, 0, 0, "expected shape %s (%lld samples of shape %s, in any leading axes), found %s",
                           expected, (long long)t->samples, sample, found);
        }
        return fail_at(src, 0, 0, "expected shape %s, found %s", expected, found);
    }
    return npy_read_data(src, file, type, t);
}


/* ---- CSV ------------------------------------------------------------------------------------- */

/* The longest field read as a number; a longer one is not a number.  The loader keeps one field
 * at a time, never a whole line, so its memory does not depend on the file. */
enum { MAX_NUMBER_TEXT = 256 };

/* A line may hold CSV_LINE_SLACK bytes (blanks, comments, a header) plus CSV_BYTES_PER_FIELD for
 * each number the stated shape puts on one line; a longer line (say, a file without newlines)
 * is an error as soon as it is seen, instead of a scan to the end of whatever the file holds. */
enum { CSV_LINE_SLACK = 1 << 20, CSV_BYTES_PER_FIELD = 2 * MAX_NUMBER_TEXT };

/* The bytes of a file, read in chunks. */
typedef struct ByteReader {
    FILE *file;
    unsigned char chunk[READ_CHUNK];
    size_t pos, len;
    int read_errno; /* after BYTE_ERROR */
} ByteReader;

enum { BYTE_END = -1, BYTE_ERROR = -2 };

/* The next byte, BYTE_END at the end of the file, or BYTE_ERROR. */
static int next_byte(ByteReader *r) {
    if (r->pos == r->len) {
        errno = 0;
        r->len = fread(r->chunk, 1, sizeof r->chunk, r->file);
        r->pos = 0;
        if (r->len == 0) {
            if (!ferror(r->file)) return BYTE_END;
            r->read_errno = errno ? errno : EIO;
            return BYTE_ERROR;
        }
    }
    return r->chunk[r->pos++];
}

static bool is_blank(int c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* A byte that ends a field: a blank, ',', '#' or '\n'. */
static bool ends_field(int c) { return is_blank(c) || c == ',' || c == '#' || c == '\n'; }

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

/* Parses a whole field as a decimal integer (strtoll; *beyond says whether it lies beyond
 * int64_t, which no cell takes); false if anything is left over. */
static bool parse_integer(char *text, size_t len, int64_t *value, bool *beyond) {
    if (len == 0) return false;
    char saved = text[len];
    text[len] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    *beyond = errno == ERANGE; /* past int64: v is held at its ends */
    text[len] = saved;
    *value = v;
    return end == text + len;
}

/* What lies between the last field (or the line's start) and the next byte: a ',' since then
 * means that a ',' or the line's end right now delimits an empty field. */
typedef enum Separation { SEP_LINE_START, SEP_AFTER_FIELD, SEP_AFTER_COMMA } Separation;

typedef struct CsvLoad {
    const Source *src;
    const Target *target;  /* its cells: the numbers expected */
    int64_t per_line;      /* numbers per line; 0: any (rank 0 or 1) */
    int64_t line_limit;    /* bytes a line may hold */
    int64_t count;         /* numbers read */
    int64_t rows;          /* lines with numbers */
    int64_t global_cells;  /* the numbers the file holds: the target's cells times its shards */
    int64_t header_line;   /* the line skipped as a header, or 0 */
    bool seen_fields;      /* a line with fields has been seen */
    bool lone_cr;          /* a '\r' not before a '\n' has been seen (lines of old Mac OS text) */
    /* The current line. */
    int64_t line;          /* its number, from 1 */
    int64_t fields;        /* fields so far */
    int64_t count_before;  /* numbers read before it */
    bool first;            /* it is the first line with fields: a header if a field is text */
    bool is_header;        /* a field of the first line is not a number */
    bool has_text;         /* ... and one is text: an empty field alone does not make a header */
    int64_t empty_col;     /* the column of the first line's first empty field, or -1 */
    /* The first line's first number an integer tensor cannot take (its text, column and number
     * index; deferred_len 0: none): an error only if the line proves not to be a header. */
    char deferred[MAX_NUMBER_TEXT + 1];
    int64_t deferred_len, deferred_col, deferred_count;
    /* The current field: its first bytes (the rest only counted), its length and column. */
    char field[MAX_NUMBER_TEXT + 1];
    int64_t field_len, field_col;
} CsvLoad;

/* Stores the number just read (its text in load->field) into cell load->count: as float32, as
 * the double strtod read (an F64 target), that double rounded once to a BF16 or F16 target
 * (tsr_cell_store), or, for an I32 target, as int32 when the field is an integer that fits. */
static int csv_store(CsvLoad *load, double value) {
    const Target *t = load->target;
    int64_t cell = load->count;
    if (t->shards > 1) { /* a sharded target: this process's samples alone */
        int64_t row_cells = t->samples ? t->cells / t->samples : 1, row = row_cells ? cell / row_cells : 0;
        if (row % t->shards != t->shard) return TSR_OK;
        cell = row / t->shards * row_cells + cell % row_cells;
    }
    if (!tsr_dtype_integer(t->dtype)) {
        tsr_cell_store(t->out, t->dtype, cell, value);
        return TSR_OK;
    }
    char shown[64];
    printable(shown, sizeof shown, load->field, (size_t)load->field_len);
    int64_t integer;
    bool beyond;
    bool whole = parse_integer(load->field, (size_t)load->field_len, &integer, &beyond);
    if (load->first && (!whole || !integer_fits(t->dtype, integer, beyond))) {
        /* a header's numbers are not data: the error waits for the line's end (csv_line_end) */
        if (load->deferred_len == 0) {
            memcpy(load->deferred, load->field, sizeof load->deferred);
            load->deferred_len = load->field_len;
            load->deferred_col = load->field_col;
            load->deferred_count = load->count;
        }
        return TSR_OK;
    }
    if (!whole)
        return fail_at(load->src, load->line, load->field_col, "not an integer: '%s' (the tensor is %s)", shown,
                       tsr_dtype_word(t->dtype));
    return store_integer(load->src, load->line, load->field_col, t, cell, integer, beyond, shown);
}

/* The first line was data after all: its deferred number's error (csv_store again, as a line
 * that is not the first). */
static int csv_deferred_error(CsvLoad *load) {
    memcpy(load->field, load->deferred, sizeof load->field);
    load->field_len = load->deferred_len;
    load->field_col = load->deferred_col;
    load->count = load->deferred_count;
    load->first = false;
    return csv_store(load, 0.);
}

/* The field that just ended: a number is stored, anything else is an error unless the line is
 * the header. */
static int csv_field(CsvLoad *load) {
    if (load->fields++ == 0) {
        load->first = !load->seen_fields;
        load->seen_fields = true;
    }
    double value;
    if (load->field_len <= MAX_NUMBER_TEXT && parse_number(load->field, (size_t)load->field_len, &value)) {
        int status = load->count < load->global_cells ? csv_store(load, value) : TSR_OK;
        load->count++;
        return status;
    }
    if (load->first) {
        load->is_header = true;
        load->has_text |= load->field_len > 0;
        if (load->field_len == 0 && load->empty_col < 0) load->empty_col = load->field_col;
        return TSR_OK;
    }
    if (load->field_len == 0) return fail_at(load->src, load->line, load->field_col, "empty field");
    char shown[64];
    printable(shown, sizeof shown, load->field, (size_t)load->field_len);
    return fail_at(load->src, load->line, load->field_col, "not a number: '%s'", shown);
}

/* The end of the current line, at column `col`, with its '\n' or at the end of the file. */
static int csv_line_end(CsvLoad *load, bool newline, int64_t col) {
    if (load->fields > 0 && !newline)
        return fail_at(load->src, load->line, col, "the last line does not end with a newline: %s",
                       load->lone_cr ? "its lines end in '\\r' alone (old Mac OS text), where CSV lines end in '\\n'"
                                     : "the file looks truncated");
    if (load->is_header && !load->has_text) /* numbers and empty fields: damage, not a header */
        return fail_at(load->src, load->line, load->empty_col, "empty field");
    if (load->is_header) {
        load->count = load->count_before;
        load->header_line = load->line;
    } else if (load->deferred_len > 0) {
        return csv_deferred_error(load);
    } else if (load->fields > 0) {
        load->rows++;
        if (load->per_line > 0 && load->fields != load->per_line)
            return fail_at(load->src, load->line, 0, "line has %lld field%s, expected %lld", (long long)load->fields,
                           plural(load->fields), (long long)load->per_line);
    }
    load->line++;
    load->fields = 0;
    load->count_before = load->count;
    load->first = load->is_header = load->has_text = false;
    load->empty_col = -1;
    load->deferred_len = 0;
    return TSR_OK;
}

/* Reads the whole file, byte by byte: fields separated by a comma, blanks, or a comma with
 * blanks around it; '#' comments to the end of the line; a ',' at either end of a line or
 * after another delimits an empty field. */
static int csv_scan(CsvLoad *load, ByteReader *reader, uint32_t rank, const int64_t *dims) {
    Separation sep = SEP_LINE_START;
    bool in_field = false, in_comment = false, after_cr = false;
    int64_t line_bytes = 0;
    for (;;) {
        int c = next_byte(reader);
        if (c == BYTE_ERROR) return fail_at(load->src, 0, 0, "cannot read: %s", strerror(reader->read_errno));
        if (c == 0)
            return fail_at(load->src, load->line, line_bytes + 1, "holds a NUL byte: this is no CSV text (a binary "
                           "file, or text in UTF-16)");
        load->lone_cr |= after_cr && c != '\n' && c != BYTE_END; /* a CRLF file cut after its '\r' is cut */
        after_cr = c == '\r';
        bool line_end = c == BYTE_END || c == '\n';
        int64_t col = line_bytes + 1;
        int status = TSR_OK;
        if (!line_end && ++line_bytes > load->line_limit) {
            char shape[256];
            format_shape(shape, sizeof shape, rank, dims);
            return fail_at(load->src, load->line, col, "line is longer than %lld bytes, more than shape %s needs%s",
                           (long long)load->line_limit, shape,
                           load->lone_cr ? " (its lines end in '\\r' alone, old Mac OS text, where CSV lines end in '\\n')"
                                         : "");
        }
        if (in_comment && !line_end) continue;
        if (in_field) {
            if (!line_end && !ends_field(c)) {
                if (load->field_len < MAX_NUMBER_TEXT) load->field[load->field_len] = (char)c;
                load->field_len++;
                /* The rest of the field in this chunk, without a call per byte. */
                while (reader->pos < reader->len && !ends_field(reader->chunk[reader->pos]) &&
                       reader->chunk[reader->pos] != 0 && line_bytes < load->line_limit) {
                    if (load->field_len < MAX_NUMBER_TEXT) load->field[load->field_len] = (char)reader->chunk[reader->pos];
                    load->field_len++;
                    reader->pos++;
                    line_bytes++;
                }
                continue;
            }
            in_field = false;
            sep = SEP_AFTER_FIELD;
            if ((status = csv_field(load)) != TSR_OK) return status;
        }
        bool empty_field = (c == ',' && sep != SEP_AFTER_FIELD) ||
                           ((line_end || c == '#') && !in_comment && sep == SEP_AFTER_COMMA);
        if (empty_field) {
            load->field_len = 0;
            load->field_col = col;
            if ((status = csv_field(load)) != TSR_OK) return status;
        }
        if (c == ',') {
            sep = SEP_AFTER_COMMA;
        } else if (c == '#') {
            in_comment = true;
        } else if (line_end) {
            if ((status = csv_line_end(load, c == '\n', col)) != TSR_OK || c == BYTE_END) return status;
            sep = SEP_LINE_START;
            in_comment = false;
            line_bytes = 0;
        } else if (!is_blank(c)) {
            in_field = true;
            load->field[0] = (char)c;
            load->field_len = 1;
            load->field_col = col;
        }
    }
}

static int csv_file(const Source *src, FILE *file, const Target *t) {
    uint32_t rank = t->rank;
    const int64_t *dims = t->dims;
    int64_t global_cells = t->cells <= INT64_MAX / t->shards ? t->cells * t->shards : INT64_MAX;
    /* Split among processes with every axis a sample axis (~b:[2; 4] as 2 × 2 a process), the
     * file's lines are not the process's rows: its numbers are counted, as a .npy file's. */
    bool all_samples = t->shards > 1 && rank <= t->sample_axes;
    int64_t per_line = rank >= 2 && !all_samples ? dims[rank - 1] : 0;
    int64_t on_one_line = per_line > 0 ? per_line : all_samples ? global_cells : t->cells;
    int64_t line_limit = on_one_line < (INT64_MAX - CSV_LINE_SLACK) / CSV_BYTES_PER_FIELD
                             ? CSV_LINE_SLACK + on_one_line * CSV_BYTES_PER_FIELD
                             : INT64_MAX;
    CsvLoad load = {.src = src, .target = t, .per_line = per_line, .line_limit = line_limit, .line = 1, .empty_col = -1,
                    .global_cells = global_cells};
    ByteReader *reader = malloc(sizeof *reader);
    if (!reader) return tsr_error(TSR_ERR_NOMEM, "data '%s': out of memory reading '%s'", src->what, src->path);
    *reader = (ByteReader){.file = file};
    /* A UTF-8 byte order mark (which spreadsheets write) is not part of the first line: read as
     * text, it made a line of numbers a header, skipped. */
    if (next_byte(reader) >= 0) {
        reader->pos--;
        if (reader->len - reader->pos >= 3 && memcmp(reader->chunk + reader->pos, "\xef\xbb\xbf", 3) == 0) reader->pos += 3;
    }
    /* Numbers are read as C writes them whatever locale the host program chose: after
     * setlocale(LC_ALL, "") in a German locale strtod stops at the '.' of "1.5".  The thread's
     * numeric locale is C while the file is scanned (a locale that cannot be made: the
     * process's, which an executable never changes). */
    locale_t base = duplocale(LC_GLOBAL_LOCALE); /* the host's other categories (messages) kept */
    locale_t c_numbers = base ? newlocale(LC_NUMERIC_MASK, "C", base) : (locale_t)0;
    if (base && !c_numbers) freelocale(base);
    locale_t before = c_numbers ? uselocale(c_numbers) : (locale_t)0;
    int status = csv_scan(&load, reader, rank, dims);
    if (c_numbers) {
        uselocale(before);
        freelocale(c_numbers);
    }
    free(reader);
    if (status != TSR_OK || load.count == global_cells) return status;
    if (t->shards > 1) {
        int64_t rows = t->samples, row_cells = rows ? t->cells / rows : 1;
        return tsr_data_error("data '%s': a run of %d processes needs %lld samples in %s (%lld for each), it has %lld%s",
                              src->what, t->shards, (long long)(rows * t->shards), src->path, (long long)rows,
                              (long long)(row_cells ? load.count / row_cells : 0),
                              load.count % (row_cells ? row_cells : 1) ? " and a part" : "");
    }

    char shape[256], header[64] = "";
    format_shape(shape, sizeof shape, rank, dims);
    if (load.header_line > 0)
        snprintf(header, sizeof header, "; line %lld was skipped as a header", (long long)load.header_line);
    if (per_line > 0)
        return fail_at(src, 0, 0, "has %lld row%s, expected %lld for shape %s%s", (long long)load.rows,
                       plural(load.rows), (long long)(t->cells / per_line), shape, header);
    return fail_at(src, 0, 0, "has %lld number%s, expected %lld for shape %s%s", (long long)load.count,
                   plural(load.count), (long long)t->cells, shape, header);
}

/* ---- Entry points ------------------------------------------------------------------------------ */

/* The loaders' common part: check the arguments, open the file, read it with `read`, close. */
typedef int (*FileReader)(const Source *src, FILE *file, const Target *t);

static int load_file(const char *path, const char *what, Target target, FileReader read) {
    int status = check_arguments(path, what, &target);
    if (status != TSR_OK) return status;
    Source src = {path, what, 0, false};
    FILE *file;
    status = open_file(&src, &file);
    if (status != TSR_OK) return status;
    status = read(&src, file, &target);
    fclose(file);
    return status;
}

int tsr_load_npy(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what) {
    return tsr_load_npy_typed(path, out, TSR_DTYPE_F32, rank, dims, what);
}

int tsr_load_csv(const char *path, float *out, uint32_t rank, const int64_t *dims, const char *what) {
    return tsr_load_csv_typed(path, out, TSR_DTYPE_F32, rank, dims, what);
}

int tsr_load_npy_typed(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims,
                       const char *what) {
    return load_file(path, what, (Target){.out = out, .dtype = dtype, .rank = rank, .dims = dims, .shards = 1}, npy_load);
}

/* The target of process `shard` of `shards` with `sample_axes` sample axes (a negative count: and
 * a run-time length, whose file may hold spare samples), or an error. */
static int shard_target(const char *what, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims, int shard,
                        int shards, int sample_axes_signed, Target *t) {
    bool spare = sample_axes_signed < 0;
    uint32_t sample_axes = (uint32_t)(spare ? -sample_axes_signed : sample_axes_signed);
    if (shards < 1 || shard < 0 || shard >= shards || sample_axes > rank || (shards > 1 && sample_axes < 1))
        return tsr_error(TSR_ERR_ARGUMENT, "data '%s': process %d of %d, or a tensor without samples", what ? what : "?",
                         shard, shards);
    *t = (Target){.out = out, .dtype = dtype, .rank = rank, .dims = dims, .shard = shard, .shards = shards,
                  .sample_axes = sample_axes, .samples = 1, .spare = spare};
    for (uint32_t a = 0; a < sample_axes && dims; a++) t->samples *= dims[a];
    return TSR_OK;
}

int tsr_load_npy_shard(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims, const char *what,
                       int shard, int shards, int sample_axes) {
    Target t;
    int status = shard_target(what, out, dtype, rank, dims, shard, shards, sample_axes, &t);
    return status != TSR_OK ? status : load_file(path, what, t, npy_load);
}

int tsr_load_csv_shard(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims, const char *what,
                       int shard, int shards, int sample_axes) {
    Target t;
    int status = shard_target(what, out, dtype, rank, dims, shard, shards, sample_axes, &t);
    return status != TSR_OK ? status : load_file(path, what, t, csv_file);
}

int tsr_load_csv_typed(const char *path, void *out, uint8_t dtype, uint32_t rank, const int64_t *dims,
                       const char *what) {
    return load_file(path, what, (Target){.out = out, .dtype = dtype, .rank = rank, .dims = dims, .shards = 1}, csv_file);
}

int tsr_data_open(const char *path, const char *what, FILE **file, int64_t *size) {
    if (!path || !what || !file || !size) return tsr_error(TSR_ERR_ARGUMENT, "data loader: NULL path or name");
    Source src = {path, what, 0, false};
    int status = open_file(&src, file);
    *size = src.size;
    return status;
}

/* Whether a .npy header's shape is (any, dims[1], …, dims[rank - 1]). */
static bool same_after_first(const NpyHeader *h, uint32_t rank, const int64_t *dims) {
    if (h->rank != rank) return false;
    for (uint32_t a = 1; a < rank; a++)
        if (h->dims[a] != dims[a]) return false;
    return true;
}

int tsr_npy_length(const char *path, const char *what, uint8_t dtype, uint32_t rank, const int64_t *dims,
                   int64_t *length) {
    Source src = {path, what, 0, false};
    FILE *file;
    int status = open_file(&src, &file);
    if (status != TSR_OK) return status;
    char *text = NULL;
    size_t len = 0;
    status = npy_read_header(&src, file, &text, &len);
    int64_t header_end = (int64_t)ftello(file);
    fclose(file);
    NpyHeader header;
    const NpyType *type = NULL;
    if (status == TSR_OK) {
        NpyParser parser = {.text = text, .len = len};
        if (!npy_parse_header(&parser, &header)) status = fail_at(&src, 0, 0, "has a malformed header: %s", parser.problem);
        else if (header.rank == 0) status = fail_at(&src, 0, 0, "holds one number, not an axis of run-time length");
        else if (header.dims[0] < 1) status = fail_at(&src, 0, 0, "has an empty first axis (a run-time length is at least 1)");
        else if (!same_after_first(&header, rank, dims)) {
            char expected[256], found[256];
            format_shape(expected, sizeof expected, rank, dims);
            format_shape(found, sizeof found, header.rank, header.dims);
            /* "(N, 3)" shown as "(?, 3)", "(N,)" as "(?,)": the first size is the file's to give */
            const char *after_first = rank > 1 ? expected + strcspn(expected, ",") : ",)";
            status = fail_at(&src, 0, 0, "expected shape (?%s, found %s ('?' the run-time length the file gives)",
                             after_first, found);
        } else status = npy_type(&src, header.descr, dtype, &type);
    }
    free(text);
    if (status != TSR_OK) return status;
    /* The length decides how much memory the tensors it sizes get: a header may claim any shape,
     * so the file must hold the data it declares before anything is allocated for it. */
    int64_t want = type->size;
    for (uint32_t a = 0; a < header.rank; a++) {
        if (header.dims[a] < 0 || (header.dims[a] && want > INT64_MAX / header.dims[a]))
            return fail_at(&src, 0, 0, "declares more data than can be addressed");
        want *= header.dims[a];
    }
    int64_t have = src.size > header_end ? src.size - header_end : 0;
    if (have < want) {
        char shape[256];
        format_shape(shape, sizeof shape, header.rank, header.dims);
        return fail_at(&src, 0, 0, "is truncated: its header declares shape %s, %lld data bytes, but %lld follow it",
                       shape, (long long)want, (long long)have);
    }
    *length = header.dims[0];
    return TSR_OK;
}

bool tsr_npy_member_shape(const unsigned char *bytes, size_t size, uint32_t rank, int64_t *dims) {
    if (!bytes || size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0 || bytes[6] < 1 || bytes[6] > 3) return false;
    size_t start = bytes[6] == 1 ? 10 : 12;
    if (size < start) return false;
    uint64_t len = load_le(bytes + 8, bytes[6] == 1 ? 2 : 4);
    if (len > NPY_MAX_HEADER || len > size - start) return false;
    char *text = malloc(len + 1);
    if (!text) return false;
    memcpy(text, bytes + start, len);
    text[len] = '\0';
    NpyParser parser = {.text = text, .len = len};
    NpyHeader h;
    bool ok = npy_parse_header(&parser, &h) && h.have_shape && h.rank == rank;
    for (uint32_t a = 0; ok && a < rank; a++) dims[a] = h.dims[a];
    free(text);
    return ok;
}

int tsr_load_npy_member(const unsigned char *bytes, size_t size, void *out, uint8_t dtype, uint32_t rank,
                        const int64_t *dims, const char *archive, const char *array) {
    Target target = {.out = out, .dtype = dtype, .rank = rank, .dims = dims, .shards = 1};
    int status = check_arguments(archive, array, &target);
    if (status != TSR_OK) return status;
    Source src = {archive, array, (int64_t)size, true};
    if (size == 0) return fail_at(&src, 0, 0, "is empty, not a .npy file");
    FILE *file = fmemopen((void *)bytes, size, "rb");
    if (!file) return fail_at(&src, 0, 0, "cannot read: %s", strerror(errno));
    status = npy_load(&src, file, &target);
    fclose(file);
    return status;
}
