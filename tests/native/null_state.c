/* null_state.c — every function of a generated header, and every runtime entry point that
 * takes a state, given a NULL state: an error (TSR_ERR_ARGUMENT, "the state is NULL") or NULL
 * for accessors, never a crash (docs/runtime.md §7).  Built against affine.tsr's object by
 * tests/native/c_api.sh.  Prints one line per check and "N passed, N failed". */
#include <stdio.h>
#include <string.h>

#include "affine.h"

static int passed, failed;

static void check(int ok, const char *what) {
    if (ok) passed++;
    else failed++;
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
}

/* The status is TSR_ERR_ARGUMENT and the message says the state is NULL. */
static void check_null_error(int status, const char *what) {
    char line[256];
    int ok = status == TSR_ERR_ARGUMENT && strcmp(tsr_last_error(), "the state is NULL") == 0;
    snprintf(line, sizeof line, "%s on a NULL state: TSR_ERR_ARGUMENT, 'the state is NULL' (got %d, '%s')", what,
             status, tsr_last_error());
    check(ok, line);
    tsr_error(TSR_OK, "%s", ""); /* clear the message for the next check */
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* the lines before a crash still show */
    check_null_error(affine_set_k(NULL, 1), "affine_set_k");
    check_null_error(affine_set_k(NULL, 0), "affine_set_k (value 0)");
    check_null_error(affine_predict(NULL), "affine_predict (a routine)");
    check_null_error(affine_pick(NULL), "affine_pick (a routine reading an index)");
    check_null_error(tsr_state_set_symbol(NULL, 0, 0), "tsr_state_set_symbol");
    check_null_error(tsr_state_check_symbols(NULL), "tsr_state_check_symbols");
    check_null_error(tsr_state_print(NULL, 0), "tsr_state_print");
    check(affine_x(NULL) == NULL && affine_w(NULL) == NULL && affine_bias(NULL) == NULL && affine_y(NULL) == NULL &&
              affine_table(NULL) == NULL && affine_row(NULL) == NULL,
          "accessors return NULL on a NULL state");
    affine_destroy(NULL);
    tsr_state_destroy(NULL);
    check(1, "affine_destroy(NULL) and tsr_state_destroy(NULL) do nothing");
    check(tsr_model_buffer_count(NULL) == 0 && tsr_model_buffer_name(NULL, 0) == NULL &&
              tsr_model_symbol_count(NULL) == 0 && tsr_model_symbol_name(NULL, 0) == NULL,
          "the model introspection functions accept NULL");

    /* A real state still works after all that, and an unknown symbol number is still that. */
    affine_state *s = affine_create(1);
    check(s != NULL, "affine_create");
    if (s) {
        check(affine_set_k(s, 4) == TSR_OK && affine_pick(s) == TSR_OK && affine_row(s)[0] == 12.0f,
              "a real state: set_k, pick");
        int st = tsr_state_set_symbol((tsr_state *)s, 7, 0);
        check(st == TSR_ERR_ARGUMENT && strcmp(tsr_last_error(), "no index symbol number 7") == 0,
              "an unknown symbol number is reported as such");
        affine_destroy(s);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
