/* error.c — status codes, the thread's last error text and the replaceable error hook.
 *
 * Every runtime function that fails records its message here (tsr_error) and returns a status;
 * nothing prints on its own.  The text is per thread, so concurrent models do not mix errors. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[1024];
static tsr_error_hook error_hook;
static void *error_hook_user;

const char *tsr_status_text(int status) {
    switch (status) {
    case TSR_OK: return "ok";
    case TSR_ERR_NOMEM: return "out of memory";
    case TSR_ERR_DATA: return "data error";
    case TSR_ERR_INDEX: return "index out of range";
    case TSR_ERR_ARGUMENT: return "bad argument";
    case TSR_ERR_IMAGE: return "malformed model image";
    case TSR_ERR_IO: return "output error";
    case TSR_ERR_GPU: return "GPU error";
    case TSR_ERR_CPU: return "CPU lacks instructions";
    case TSR_ERR_DIST: return "distributed run failed";
    default: return "unknown status";
    }
}

const char *tsr_last_error(void) { return last_error; }

void tsr_set_error_hook(tsr_error_hook hook, void *user) {
    error_hook = hook;
    error_hook_user = user;
}

/* The length of text[0 … len) cut back to a UTF-8 character's start: a character whose bytes do
 * not all lie before `len` is left out. */
static size_t whole_characters(const char *text, size_t len) {
    size_t start = len;
    while (start > 0 && ((unsigned char)text[start - 1] & 0xC0) == 0x80) start--;
    if (start > 0 && (unsigned char)text[start - 1] >= 0xC0) {
        unsigned char lead = (unsigned char)text[start - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (len - (start - 1) < need) return start - 1;
    }
    return len;
}

/* The first UTF-8 character start at or after text[at] (a continuation byte is skipped). */
static size_t next_character(const char *text, size_t at) {
    while (text[at] && ((unsigned char)text[at] & 0xC0) == 0x80) at++;
    return at;
}

/* A message longer than the buffer keeps its start and its end, " … " between them: what went
 * wrong usually closes a message that opens with a long path. */
enum { KEPT_TAIL = 384 };

static int record(int status, bool hook, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static int record(int status, bool hook, const char *fmt, va_list ap) {
    if (!fmt) fmt = "(no message)"; /* tsr_error(status, NULL) from a caller */
    va_list again;
    va_copy(again, ap);
    int wanted = vsnprintf(last_error, sizeof last_error, fmt, ap);
    if (wanted >= (int)sizeof last_error) {
        static const char gap[] = " \u2026 ";
        char *whole = malloc((size_t)wanted + 1);
        size_t head = whole_characters(last_error, sizeof last_error - 1);
        if (whole && vsnprintf(whole, (size_t)wanted + 1, fmt, again) == wanted) {
            size_t tail = next_character(whole, (size_t)wanted - KEPT_TAIL);
            head = whole_characters(last_error, sizeof last_error - 1 - (sizeof gap - 1) - ((size_t)wanted - tail));
            memcpy(last_error + head, gap, sizeof gap - 1);
            memcpy(last_error + head + sizeof gap - 1, whole + tail, (size_t)wanted - tail + 1);
        } else {
            last_error[head] = 0; /* no memory for the whole: its start alone */
        }
        free(whole);
    }
    va_end(again);
    if (error_hook && hook) error_hook(status, last_error, error_hook_user);
    return status;
}

static int summary(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int summary(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(status, false, fmt, ap);
    va_end(ap);
    return status;
}

int tsr_error_summary(int status, const char *text) { return summary(status, "%s", text); }

int tsr_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(status, true, fmt, ap);
    va_end(ap);
    return status;
}

int tsr_data_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(TSR_ERR_DATA, true, fmt, ap);
    va_end(ap);
    return TSR_ERR_DATA;
}
