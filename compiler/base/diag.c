/* diag.c — the source table and the one diagnostic format; see diag.h.
 *
 * Columns are 1-based byte columns (what editors call "byte offset + 1" on the line).  When the
 * source line is echoed, bytes that are not printable ASCII or part of a valid UTF-8 sequence
 * are shown as '?', so binary junk cannot garble the terminal, and very long lines are shown as
 * a window around the caret. */
#include "base/diag.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { LINE_WINDOW = 160 };

static Source *sources;     /* sources[0] is the "no file" entry */
static uint32_t source_count, source_cap;
static unsigned error_count, max_errors = 20;
static FILE *diag_stream;

static void *xrealloc(void *p, size_t size) {
    p = realloc(p, size ? size : 1);
    if (!p) diag_fatal_oom();
    return p;
}

uint32_t source_add(const char *path, const char *text, size_t len) {
    if (source_count == 0) {
        source_cap = 8;
        sources = xrealloc(NULL, source_cap * sizeof *sources);
        memset(&sources[0], 0, sizeof sources[0]);
        source_count = 1;
    }
    if (source_count == source_cap) {
        source_cap *= 2;
        sources = xrealloc(sources, source_cap * sizeof *sources);
    }
    Source *s = &sources[source_count];
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) { /* a UTF-8 byte-order mark, as editors write one */
        text += 3;
        len -= 3;
    }
    char *copy = xrealloc(NULL, len + 1);
    if (len) memcpy(copy, text, len);
    copy[len] = '\0';
    char *path_copy = xrealloc(NULL, strlen(path) + 1);
    strcpy(path_copy, path);
    s->path = path_copy;
    s->text = copy;
    s->len = len;
    size_t cap = 64, n = 0;
    uint32_t *starts = xrealloc(NULL, cap * sizeof *starts);
    starts[n++] = 0;
    for (size_t i = 0; i < len; i++) {
        if (copy[i] == '\n') {
            if (n == cap) starts = xrealloc(starts, (cap *= 2) * sizeof *starts);
            starts[n++] = (uint32_t)(i + 1);
        }
    }
    s->line_starts = starts;
    s->line_count = n;
    return source_count++;
}

FileRead file_read_all(const char *path, size_t limit, char **text, size_t *len) {
    *text = NULL, *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return FILE_CANNOT_OPEN;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return FILE_IS_DIRECTORY;
    }
    size_t most = limit < SIZE_MAX ? limit + 1 : limit, cap = most < 1 << 16 ? most : 1 << 16, n = 0;
    char *buf = xrealloc(NULL, cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap == most) break;
            cap = cap <= most / 2 ? cap * 2 : most;
            buf = xrealloc(buf, cap + 1);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed || n > limit) {
        free(buf);
        return failed ? FILE_READ_FAILED : FILE_TOO_LARGE;
    }
    buf[n] = '\0';
    *text = buf, *len = n;
    return FILE_READ_OK;
}

void diag_file_read(Span span, const char *path, FileRead r, int error) {
    const char *why = r == FILE_CANNOT_OPEN    ? strerror(error)
                      : r == FILE_IS_DIRECTORY ? "it is a directory"
                      : r == FILE_TOO_LARGE    ? NULL
                                               : "a read failed";
    const char *verb = r == FILE_CANNOT_OPEN ? "open" : "read";
    if (!why && span.file) diag_error(span, "'%s' is too large: a source file is at most %u MiB", path, MAX_SOURCE_BYTES >> 20);
    else if (!why) diag_error_noloc("'%s' is too large: a source file is at most %u MiB", path, MAX_SOURCE_BYTES >> 20);
    else if (span.file) diag_error(span, "cannot %s '%s': %s", verb, path, why);
    else diag_error_noloc("cannot %s '%s': %s", verb, path, why);
}

uint32_t source_load(const char *path) {
    char *text;
    size_t len;
    FileRead r = file_read_all(path, MAX_SOURCE_BYTES, &text, &len);
    if (r != FILE_READ_OK) {
        diag_file_read((Span){0, 0, 0}, path, r, errno);
        return 0;
    }
    uint32_t id = source_add(path, text, len);
    free(text);
    return id;
}

void source_free_all(void) {
    for (uint32_t i = 1; i < source_count; i++) {
        free((void *)sources[i].path);
        free((void *)sources[i].text);
        free(sources[i].line_starts);
    }
    free(sources);
    sources = NULL;
    source_count = source_cap = 0;
}

const char **source_files(uint32_t *count) {
    const char **files = xrealloc(NULL, (source_count + 1) * sizeof *files);
    uint32_t n = 0;
    for (uint32_t i = 1; i < source_count; i++)
        if (sources[i].path && sources[i].path[0] != '<') files[n++] = sources[i].path;
    *count = n;
    return files;
}

const Source *source_get(uint32_t file) {
    if (file == 0 || file >= source_count) return NULL;
    return &sources[file];
}

Span span_make(uint32_t file, uint32_t start, uint32_t end) {
    return (Span){file, start, end < start ? start : end};
}

Span span_join(Span a, Span b) {
    if (a.file == 0) return b;
    if (b.file == 0 || b.file != a.file) return a;
    return span_make(a.file, a.start < b.start ? a.start : b.start, a.end > b.end ? a.end : b.end);
}

static size_t line_index(const Source *s, uint32_t offset) {
    size_t lo = 0, hi = s->line_count; /* last start <= offset */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->line_starts[mid] <= offset) lo = mid;
        else hi = mid;
    }
    return lo;
}

void span_line_col(Span span, unsigned *line, unsigned *col) {
    const Source *s = source_get(span.file);
    if (!s) {
        *line = *col = 0;
        return;
    }
    uint32_t off = span.start > s->len ? (uint32_t)s->len : span.start;
    size_t li = line_index(s, off);
    *line = (unsigned)li + 1;
    *col = off - s->line_starts[li] + 1;
}

void span_print_text(FILE *out, Span span, unsigned max) {
    const Source *src = source_get(span.file);
    unsigned shown = 0;
    bool blank = false;
    for (uint32_t i = span.start; i < span.end && i < src->len; i++) {
        unsigned char c = (unsigned char)src->text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            blank = true;
            continue;
        }
        if (shown >= max) {
            fputs(" ...", out);
            break;
        }
        if (blank && shown) fputc(' ', out), shown++;
        blank = false;
        fputc(c, out);
        shown++;
    }
}

/* Length of a valid UTF-8 sequence at p (at most avail bytes), or 0 if invalid. */
static int utf8_len(const unsigned char *p, size_t avail) {
    int n;
    unsigned c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) n = 3;
    else if (c >= 0xf0 && c <= 0xf4) n = 4;
    else return 0;
    if ((size_t)n > avail) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && c == 0xe0 && p[1] < 0xa0) return 0;
    if (n == 3 && c == 0xed && p[1] >= 0xa0) return 0; /* surrogates */
    if (n == 4 && c == 0xf0 && p[1] < 0x90) return 0;
    if (n == 4 && c == 0xf4 && p[1] >= 0x90) return 0;
    return n;
}

/* Whether the n-byte UTF-8 character at p is a bidirectional control (U+200E, U+200F, U+202A to
 * U+202E, U+2066 to U+2069): a source line shows it as <U+202E>, so that it cannot reorder the
 * line on the terminal and hide what the compiler reads ("Trojan Source"). */
static bool bidi_control(const unsigned char *p, int n) {
    if (n != 3 || p[0] != 0xe2) return false;
    return (p[1] == 0x80 && (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xaa && p[2] <= 0xae))) ||
           (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9);
}
enum { BIDI_SHOWN_CELLS = 8 }; /* "<U+202E>" */

/* Echo bytes [from, to) of the text, sanitised: see the comment at the top. */
static void echo_range(FILE *out, const unsigned char *text, size_t from, size_t to) {
    for (size_t i = from; i < to;) {
        unsigned c = text[i];
        if (c == '\t' || (c >= 0x20 && c < 0x7f)) {
            fputc((int)c, out);
            i++;
            continue;
        }
        int n = c >= 0x80 ? utf8_len(text + i, to - i) : 0;
        if (n > 0 && bidi_control(text + i, n)) {
            fprintf(out, "<U+%04X>", ((text[i + 1] & 0x3fu) << 6 | (text[i + 2] & 0x3fu)) | 0x2000u);
            i += (size_t)n;
        } else if (n > 0) {
            fwrite(text + i, 1, (size_t)n, out);
            i += (size_t)n;
        } else {
            fputc('?', out);
            i++;
        }
    }
}

/* The terminal cells the character at p (n bytes of valid UTF-8, n > 1) takes: 2 for the East
 * Asian wide and fullwidth ranges (CJK, Hangul, fullwidth forms) and the emoji blocks (faces,
 * transport, symbols and pictographs, regional indicators), 0 for combining marks (Latin, Cyrillic,
 * Hebrew and Arabic accents, the blocks for symbols and half marks), zero-width spaces and
 * joiners, and variation selectors, else 1: what terminals draw, so the caret stays under. */
static unsigned char_cells(const unsigned char *p, int n) {
    uint32_t c = n == 2 ? (p[0] & 0x1fu) << 6 | (p[1] & 0x3fu)
               : n == 3 ? (p[0] & 0x0fu) << 12 | (p[1] & 0x3fu) << 6 | (p[2] & 0x3fu)
                        : (p[0] & 0x07u) << 18 | (p[1] & 0x3fu) << 12 | (p[2] & 0x3fu) << 6 | (p[3] & 0x3fu);
    if ((c >= 0x300 && c <= 0x36f) || (c >= 0x483 && c <= 0x489) || (c >= 0x591 && c <= 0x5bd) ||
        (c >= 0x610 && c <= 0x61a) || (c >= 0x64b && c <= 0x65f) || (c >= 0x1ab0 && c <= 0x1aff) ||
        (c >= 0x1dc0 && c <= 0x1dff) || (c >= 0x200b && c <= 0x200f) || (c >= 0x20d0 && c <= 0x20ff) ||
        (c >= 0xfe00 && c <= 0xfe0f) || (c >= 0xfe20 && c <= 0xfe2f) || (c >= 0xe0100 && c <= 0xe01ef))
        return 0;
    if ((c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0x303e) || (c >= 0x3041 && c <= 0xa4cf) ||
        (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) || (c >= 0xfe30 && c <= 0xfe4f) ||
        (c >= 0xff00 && c <= 0xff60) || (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f1e6 && c <= 0x1f1ff) ||
        (c >= 0x1f300 && c <= 0x1f64f) || (c >= 0x1f680 && c <= 0x1f6ff) || (c >= 0x1f900 && c <= 0x1faff) ||
        (c >= 0x20000 && c <= 0x3fffd))
        return 2;
    return 1;
}

/* Padding under [from, to): tabs stay tabs so the caret lines up; everything else is a space
 * per display cell. */
static void pad_range(FILE *out, const unsigned char *text, size_t from, size_t to) {
    for (size_t i = from; i < to;) {
        unsigned c = text[i];
        int n = c >= 0x80 ? utf8_len(text + i, to - i) : 1;
        unsigned width = n > 1 ? (bidi_control(text + i, n) ? BIDI_SHOWN_CELLS : char_cells(text + i, n)) : 1;
        for (unsigned k = 0; k < width; k++) fputc(c == '\t' ? '\t' : ' ', out);
        i += n > 0 ? (size_t)n : 1;
    }
}

/* The terminal cells bytes [from, to) take when drawn from column `column`: a tab reaches the
 * next multiple of 8, as a terminal expands it. */
static size_t cells(const unsigned char *text, size_t from, size_t to, size_t column) {
    size_t at = column;
    for (size_t i = from; i < to;) {
        int n = text[i] >= 0x80 ? utf8_len(text + i, to - i) : 1;
        if (text[i] == '\t') at = (at / 8 + 1) * 8;
        else at += n > 1 ? (bidi_control(text + i, n) ? BIDI_SHOWN_CELLS : char_cells(text + i, n)) : 1;
        i += n > 0 ? (size_t)n : 1;
    }
    return at - column;
}

static void show_source_line(FILE *out, Span span) {
    const Source *s = source_get(span.file);
    if (!s) return;
    const unsigned char *text = (const unsigned char *)s->text;
    uint32_t off = span.start > s->len ? (uint32_t)s->len : span.start;
    size_t li = line_index(s, off);
    size_t line_start = s->line_starts[li], line_end = line_start;
    while (line_end < s->len && text[line_end] != '\n') line_end++;
    if (line_end > line_start && text[line_end - 1] == '\r') line_end--;
    size_t end = span.end > line_end ? line_end : span.end;
    if (end < off) end = off;

    size_t from = line_start, to = line_end;
    if (to - from > LINE_WINDOW) { /* a window around the caret */
        from = off > line_start + LINE_WINDOW / 2 ? off - LINE_WINDOW / 2 : line_start;
        to = from + LINE_WINDOW < line_end ? from + LINE_WINDOW : line_end;
        while (from > line_start && (text[from] & 0xc0) == 0x80) from--;
        while (to < line_end && (text[to] & 0xc0) == 0x80) to++;
    }
    if (end > to) end = to;
    fputs("    ", out);
    if (from > line_start) fputs("...", out);
    echo_range(out, text, from, to);
    if (to < line_end) fputs("...", out);
    fputc('\n', out);
    fputs("    ", out);
    if (from > line_start) fputs("   ", out);
    pad_range(out, text, from, off);
    fputc('^', out);
    size_t start = from > line_start ? 7 : 4; /* the indent and "..." before the echoed text */
    size_t underline = end > off ? cells(text, off, end, start + cells(text, from, off, start)) : 0;
    for (size_t i = 1; i < underline; i++) fputc('~', out);
    fputc('\n', out);
}

static FILE *stream(void) { return diag_stream ? diag_stream : stderr; }

/* An error already reported at the same place with the same words (a function body
 * elaborated once per application reports its error once per call) is not repeated, and
 * neither are its notes. */
enum { SEEN_MAX = 4096 };
static uint64_t seen[SEEN_MAX];
static unsigned seen_count;
static bool suppressing;
static uint64_t next_salt;

static bool drop_next;

void diag_dedupe_salt(uint64_t salt) { next_salt = salt; }
void diag_drop_next(void) { drop_next = true; }

static bool already_reported(Span span, const char *fmt, va_list ap) {
    char msg[2048];
    va_list copy;
    va_copy(copy, ap);
    vsnprintf(msg, sizeof msg, fmt, copy);
    va_end(copy);
    uint64_t h = 1469598103934665603ull ^ next_salt;
    next_salt = 0;
    uint32_t key[3] = {span.file, span.start, span.end};
    for (size_t i = 0; i < sizeof key; i++) h = (h ^ ((const unsigned char *)key)[i]) * 1099511628211ull;
    for (const char *p = msg; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (unsigned i = 0; i < seen_count; i++)
        if (seen[i] == h) return true;
    if (seen_count < SEEN_MAX) seen[seen_count++] = h;
    return false;
}

static void emit(DiagLevel level, Span span, const char *fmt, va_list ap) {
    FILE *out = stream();
    if (level == DIAG_NOTE && suppressing) return;
    suppressing = level == DIAG_ERROR && (drop_next || already_reported(span, fmt, ap));
    if (level == DIAG_ERROR) drop_next = false;
    if (suppressing) return;
    static const char *const level_names[] = {"error", "warning", "note"};
    const Source *s = source_get(span.file);
    if (s) {
        unsigned line, col;
        span_line_col(span, &line, &col);
        fprintf(out, "%s:%u:%u: %s: ", s->path, line, col, level_names[level]);
    } else {
        fprintf(out, "tsrc: %s: ", level_names[level]);
    }
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    show_source_line(out, span);
    if (level == DIAG_ERROR && ++error_count >= max_errors && max_errors) {
        fprintf(out, "tsrc: too many errors (%u), stopping\n", error_count);
        fflush(out);
        exit(1);
    }
}

static Span user_call;
static const char *user_call_name;

void diag_set_user_call(Span call, const char *name) {
    user_call = call;
    user_call_name = name;
}

static void emit_formatted(DiagLevel level, Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(level, span, fmt, ap);
    va_end(ap);
}

void diag_error(Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_verror(span, fmt, ap);
    va_end(ap);
}

void diag_verror(Span span, const char *fmt, va_list ap) {
    if (user_call.file && span_in_stdlib(span)) {
        char small[1024], *message = small; /* whole, however long */
        va_list copy;
        va_copy(copy, ap);
        int n = vsnprintf(small, sizeof small, fmt, ap);
        if (n >= (int)sizeof small && (message = malloc((size_t)n + 1))) vsnprintf(message, (size_t)n + 1, fmt, copy);
        va_end(copy);
        emit_formatted(DIAG_ERROR, user_call, "in this application of '%s': %s", user_call_name,
                       message ? message : small);
        emit_formatted(DIAG_NOTE, span, "where the standard library finds it");
        if (message != small) free(message);
        return;
    }
    emit(DIAG_ERROR, span, fmt, ap);
    /* An error in the body of a function the user applied elsewhere: which application. */
    if (user_call.file && !suppressing &&
        (span.file != user_call.file || span.end <= user_call.start || span.start >= user_call.end))
        emit_formatted(DIAG_NOTE, user_call, "in this application of '%s'", user_call_name);
}

void diag_warning(Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(DIAG_WARNING, span, fmt, ap);
    va_end(ap);
}

void diag_note(Span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(DIAG_NOTE, span, fmt, ap);
    va_end(ap);
}

void diag_error_noloc(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(DIAG_ERROR, (Span){0, 0, 0}, fmt, ap);
    va_end(ap);
}

unsigned diag_error_count(void) { return error_count; }
void diag_reset(void) {
    error_count = 0;
    seen_count = 0;
    suppressing = false;
    user_call = (Span){0, 0, 0};
    user_call_name = NULL;
}
void diag_set_stream(FILE *out) { diag_stream = out; }
void diag_set_max_errors(unsigned max) { max_errors = max; }

/* Optimal string alignment distance (Levenshtein plus the swap of two neighbours), capped: any
 * distance above `cap` is reported as cap + 1. */
static size_t edit_distance(const char *a, const char *b, size_t cap) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > lb + cap || lb > la + cap || lb > 63) return cap + 1;
    size_t prev2[64], prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t d = sub < del ? sub : del;
            d = d < ins ? d : ins;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < d)
                d = prev2[j - 2] + 1;
            cur[j] = d;
        }
        memcpy(prev2, prev, (lb + 1) * sizeof *prev);
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb] > cap ? cap + 1 : prev[lb];
}

bool span_in_stdlib(Span span) {
    const Source *s = source_get(span.file);
    return s && strncmp(s->path, "<stdlib>/", 9) == 0;
}

const char *diag_closest_name(const char *name, const char *const *candidates, size_t count) {
    size_t cap = strlen(name) <= 4 ? 1 : 2, best = cap + 1;
    const char *closest = NULL;
    for (size_t i = 0; i < count; i++) {
        size_t d = edit_distance(name, candidates[i], cap);
        if (d < best && strcmp(name, candidates[i]) != 0) {
            best = d;
            closest = candidates[i];
        }
    }
    return closest;
}

void diag_internal_at(const char *file, int line, const char *fmt, ...) {
    FILE *out = stream();
    fprintf(out, "tsrc: internal error (%s:%d): ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputs("\nthis is a bug in tsrc, not in your program; please report it\n", out);
    fflush(out);
    abort();
}

void diag_fatal_oom(void) {
    fputs("tsrc: error: out of memory\n", stderr);
    exit(1);
}
