/* check.h — the counting assertion the C unit tests share: check(ok, what, detail) counts a
 * pass or prints "FAIL what: detail"; a test ends by printing "N passed, N failed" (the line
 * tests/run.sh adds to its totals).  Included by one test file each, so the counters are that
 * file's own. */
#ifndef TSR_UNIT_CHECK_H
#define TSR_UNIT_CHECK_H

#include <stdbool.h>
#include <stdio.h>

static unsigned passed, failed;

static void check(bool ok, const char *what, const char *detail) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    }
}

#endif
