/* diag.h — source files, spans and diagnostics.
 *
 * Every location in the compiler is a Span: a file number and a half-open byte range.  Spans
 * become line:col only when a diagnostic is printed.  A diagnostic is printed as
 *
 *     file:line:col: error: message
 *         source line
 *         ^~~~~
 *
 * followed by its notes (the other side of a conflict, the '(' that was never closed).  User
 * errors are counted and make the driver exit with status 1; internal errors (broken
 * invariants) go through diag_internal() and say so plainly. */
#ifndef TSR_DIAG_H
#define TSR_DIAG_H

#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct Span {
    uint32_t file;   /* index into the source table; 0 = no location */
    uint32_t start;  /* byte offset of the first byte */
    uint32_t end;    /* byte offset one past the last byte (end == start: a point) */
} Span;

/* Whether two spans are the same place (file and bytes). */
static inline bool span_equal(Span a, Span b) { return a.file == b.file && a.start == b.start && a.end == b.end; }

typedef struct Source {
    const char *path;     /* as given on the command line or found on the search path */
    const char *text;     /* the bytes, followed by a NUL sentinel (the text may hold NULs too) */
    size_t len;           /* number of bytes, not counting the sentinel */
    uint32_t *line_starts; /* byte offset of each line's first byte */
    size_t line_count;
} Source;

/* Sources.  A loaded file is registered and kept for the whole run. */
uint32_t source_add(const char *path, const char *text, size_t len); /* copies text */
/* The largest source file tsrc reads (spans are 32-bit; a program of this size is far past any
 * that compiles in reasonable time or memory). */
enum { MAX_SOURCE_BYTES = 256u << 20 };
uint32_t source_load(const char *path);          /* 0 (and an error printed) when unreadable or over MAX_SOURCE_BYTES */
/* What reading a whole file gave (file_read_all). */
typedef enum FileRead { FILE_READ_OK, FILE_CANNOT_OPEN, FILE_IS_DIRECTORY, FILE_READ_FAILED, FILE_TOO_LARGE } FileRead;
/* All of file `path` into *text (malloc'd, a NUL after its *len bytes), at most `limit` bytes:
 * it reads at most limit + 1, so a file past the limit, or a device that never ends, stops
 * there with memory bounded by it.  FILE_CANNOT_OPEN leaves fopen's errno. */
FileRead file_read_all(const char *path, size_t limit, char **text, size_t *len);
/* The error for a read of `path` that gave `r` (at `span`, or none for a span of file 0);
 * `error` the errno of a FILE_CANNOT_OPEN. */
void diag_file_read(Span span, const char *path, FileRead r, int error);
const Source *source_get(uint32_t file);
/* The files the program was read from, in the order they were loaded: the input and every module
 * it opened from a directory (not the standard library's, which tsrc carries); n in *count. */
const char **source_files(uint32_t *count);
void source_free_all(void);                     /* forget every source (fuzzing, unit tests) */
Span span_make(uint32_t file, uint32_t start, uint32_t end);
Span span_join(Span a, Span b);                   /* from a's start to b's end */
void span_line_col(Span span, unsigned *line, unsigned *col); /* 1-based; col counts bytes */
/* The span's source text on one line: runs of blanks become one space, and text past `max`
 * bytes becomes " ..." (tsrc --explain). */
void span_print_text(FILE *out, Span span, unsigned max);

/* Diagnostics. */
typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

void diag_error(Span span, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* diag_error with its arguments in a va_list (for wrappers such as elab's fail), whole however
 * long the message. */
void diag_verror(Span span, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void diag_warning(Span span, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_note(Span span, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_error_noloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned diag_error_count(void);
void diag_reset(void);                 /* forget counts (used by unit tests) */
void diag_set_stream(FILE *out);       /* default: stderr */
void diag_set_max_errors(unsigned max); /* after this many, stop with "too many errors"; 0: never */
/* An error repeating one already reported (same span, same words) is dropped with its notes;
 * a salt set here makes the next error distinct (e.g. the same failure in another call). */
void diag_dedupe_salt(uint64_t salt);
/* The next error, with its notes, is not reported: the caller knows it follows from one already
 * reported (it still counts as an error). */
void diag_drop_next(void);

/* Whether `span` lies in a source of the standard library ("<stdlib>/nn.tsr"). */
bool span_in_stdlib(Span span);
/* The application the user wrote that is being evaluated (a zero span: none).  While set, an
 * error whose span lies in the standard library is reported at that call instead ("in this
 * application of 'mlp': …"), with the library's line as a note: the mistake is the caller's
 * (an argument of the wrong kind), and the library's line alone would not say which call. */
void diag_set_user_call(Span call, const char *name);

/* Of `count` candidate names, the one closest to `name` (a misspelling) by edit distance, for a
 * "did you mean …?" note: at most one edit (insertion, deletion, substitution or a swap of two
 * neighbours) away for a name of up to 4 characters, two for a longer one; NULL when none is. */
const char *diag_closest_name(const char *name, const char *const *candidates, size_t count);

/* Broken invariants: print "internal error" with the C location and abort. */
_Noreturn void diag_internal_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define diag_internal(...) diag_internal_at(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void diag_fatal_oom(void);

#endif
