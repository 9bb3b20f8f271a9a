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

/* The status is TSR_ERR_ARGUMENT with a message (a NULL pointer argument other than the state). */
static void check_null_argument(int status, const char *what) {
    char line[256];
    snprintf(line, sizeof line, "%s: TSR_ERR_ARGUMENT with a message (got %d, '%s')", what, status, tsr_last_error());
    check(status == TSR_ERR_ARGUMENT && tsr_last_error()[0], line);
    tsr_error(TSR_OK, "%s", "");
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

    /* Other pointer arguments (issue 25): NULL is a TSR_ERR_ARGUMENT naming the argument, or
     * for functions without a status, nothing happens; never a crash. */
    check_null_argument(tsr_state_create(NULL, 100, 1) == NULL ? TSR_ERR_ARGUMENT : TSR_OK, "tsr_state_create(NULL image)");
    int status = 7;
    check_null_argument(tsr_main_start(NULL, 100, 1, 0, NULL, &status) == NULL && status == 1 ? TSR_ERR_ARGUMENT : TSR_OK,
                        "tsr_main_start(NULL image)");
    check_null_argument(tsr_main_start(affine__image, affine__image_size, 1, 1, (char *[]){"affine", NULL}, NULL) == NULL
                            ? TSR_ERR_ARGUMENT : TSR_OK, "tsr_main_start(NULL status)");
    int64_t dims[2] = {2, 2};
    float cells[4];
    check_null_argument(tsr_load_npy(NULL, cells, 2, dims, "x"), "tsr_load_npy(NULL path)");
    check_null_argument(tsr_load_npy("x.npy", NULL, 2, dims, "x"), "tsr_load_npy(NULL out)");
    check_null_argument(tsr_load_npy("x.npy", cells, 2, NULL, "x"), "tsr_load_npy(NULL dims)");
    check_null_argument(tsr_load_csv(NULL, cells, 2, dims, "x"), "tsr_load_csv(NULL path)");
    check_null_argument(tsr_load_csv("x.csv", NULL, 2, dims, NULL), "tsr_load_csv(NULL out)");
    tsr_print_tensor(NULL, "x", "2,2", cells, 2, dims);
    tsr_print_tensor(stdout, NULL, NULL, NULL, 2, dims);
    tsr_print_tensor(stdout, "x", "2,2", cells, 2, NULL);
    tsr_half_moons(NULL, NULL, 10, 0.1, 1);
    tsr_circles(NULL, NULL, 10, 0.1, 0.5, 1);
    tsr_spirals(NULL, NULL, 10, 0.1, 1);
    tsr_parallel_for(NULL, NULL, 100, 1);
    check(tsr_uniform(1, NULL, 0) == tsr_uniform(1, "", 0) && tsr_normal(1, NULL, 0) == tsr_normal(1, "", 0),
          "tsr_uniform and tsr_normal read a NULL name as \"\"");
    check(1, "tsr_print_tensor, the generators and tsr_parallel_for do nothing with NULL pointers");
    check_null_error(tsr_state_begin_run(NULL), "tsr_state_begin_run");
    check_null_error(tsr_state_check_sizes(NULL, NULL, 0), "tsr_state_check_sizes");
    check_null_error(tsr_state_save(NULL, "x.npz"), "tsr_state_save");
    check_null_error(tsr_state_load(NULL, "x.npz"), "tsr_state_load");
    check_null_error(tsr_state_action(NULL, 0), "tsr_state_action");
    check_null_error(tsr_state_progress(NULL, 0, 0, 1), "tsr_state_progress");
    check_null_error(tsr_main_loop_check(NULL, 0, 0, 1), "tsr_main_loop_check");
    check_null_error(tsr_main_loop_count(NULL, 0, 0, 1, 0), "tsr_main_loop_count");
    check_null_error(tsr_main_save(NULL), "tsr_main_save");
    check_null_error(tsr_state_init_from(NULL, "m.npz", NULL), "tsr_state_init_from");
    check(tsr_main_end(NULL, "affine") == 0, "tsr_main_end(NULL) has nothing to save: status 0");
    check_null_error(tsr_gpu_launch(NULL, 0), "tsr_gpu_launch");
    check_null_error(tsr_state_sync_host(NULL), "tsr_state_sync_host");
    check_null_error(tsr_state_sync_device(NULL), "tsr_state_sync_device");
    check(tsr_state_host_buffer(NULL, 0) == NULL && tsr_state_option_int(NULL, 0) == 0,
          "tsr_state_host_buffer and tsr_state_option_int on a NULL state");

    /* A real state still works after all that, and an unknown symbol number is still that. */
    affine_state *s = affine_create(1);
    check(s != NULL, "affine_create");
    if (s) {
        check_null_argument(tsr_state_check_sizes((tsr_state *)s, NULL, 3), "tsr_state_check_sizes(NULL sizes)");
        check_null_argument(tsr_state_save((tsr_state *)s, NULL), "tsr_state_save(NULL path)");
        check_null_argument(tsr_state_load((tsr_state *)s, NULL), "tsr_state_load(NULL path)");
        check_null_argument(tsr_state_init_from((tsr_state *)s, NULL, NULL), "tsr_state_init_from(NULL path)");
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
