/* error.c — status codes, the thread's last error text and the replaceable error hook.
 *
 * Every runtime function that fails records its message here (tsr_error) and returns a status;
 * nothing prints on its own.  The text is per thread, so concurrent models do not mix errors. */
#include <stdarg.h>
#include <stdio.h>

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

static int record(int status, bool hook, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static int record(int status, bool hook, const char *fmt, va_list ap) {
    if (!fmt) fmt = "(no message)"; /* tsr_error(status, NULL) from a caller */
    int wanted = vsnprintf(last_error, sizeof last_error, fmt, ap);
    if (wanted >= (int)sizeof last_error) { /* cut short: not in the middle of a UTF-8 character */
        size_t end = sizeof last_error - 1;
        size_t start = end;
        while (start > 0 && ((unsigned char)last_error[start - 1] & 0xC0) == 0x80) start--;
        if (start > 0 && (unsigned char)last_error[start - 1] >= 0xC0) {
            unsigned char lead = (unsigned char)last_error[start - 1];
            size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
            if (end - (start - 1) < need) last_error[start - 1] = 0; /* the character's bytes do not all fit */
        }
    }
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
