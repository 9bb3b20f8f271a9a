/* nccl_test.c — what of the NCCL engine (runtime/nccl.c, --distributed=nccl) runs without a GPU.
 *
 * Checks NCCL's data type of every element type (f16 6, f32 7, f64 8, bf16 9, none for the
 * integer types); TSR_NCCL_TIMEOUT's parsing (unset and empty are 60 s, decimals are seconds,
 * zero, negative, infinite and trailing words are errors naming the variable); the version text
 * of both of NCCL's version codes; the entry points resolved from the library (each of NCCL's
 * public functions the engine calls, once); loading: TSR_NCCL_LIBRARY naming a missing file, or
 * a library that is not NCCL (libm), is TSR_ERR_DIST with a message naming it and the missing
 * entry point.  Where NCCL itself loads (libnccl.so.2 on the library path, as on this project's
 * machines), tsr_dist_start("nccl") alone is rank 0 of 1 with the engine on and no MPI, and a
 * second start with another engine is refused; a waiting check without a communicator is TSR_OK.
 * The means themselves need a GPU: tests/gpu/nccl.sh.  Last line "N passed, N failed". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#include "check.h"

static void types(void) {
    check(tsr_nccl_type_of(TSR_DTYPE_F16) == 6 && tsr_nccl_type_of(TSR_DTYPE_F32) == 7 &&
              tsr_nccl_type_of(TSR_DTYPE_F64) == 8 && tsr_nccl_type_of(TSR_DTYPE_BF16) == 9,
          "NCCL's types: ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9", NULL);
    const uint8_t integers[] = {TSR_DTYPE_I32, TSR_DTYPE_U8, TSR_DTYPE_BOOL, TSR_DTYPE_I64};
    bool none = true;
    for (size_t i = 0; i < sizeof integers; i++) none = none && tsr_nccl_type_of(integers[i]) == -1;
    check(none, "integer types have no NCCL mean", NULL);
}

static void timeouts(void) {
    double s = -1;
    check(tsr_nccl_parse_timeout(NULL, &s) == TSR_OK && s == 60, "TSR_NCCL_TIMEOUT unset: 60 s", NULL);
    s = -1;
    check(tsr_nccl_parse_timeout("", &s) == TSR_OK && s == 60, "TSR_NCCL_TIMEOUT empty: 60 s", NULL);
    check(tsr_nccl_parse_timeout("2.5", &s) == TSR_OK && s == 2.5, "TSR_NCCL_TIMEOUT=2.5: 2.5 s", NULL);
    check(tsr_nccl_parse_timeout("600", &s) == TSR_OK && s == 600, "TSR_NCCL_TIMEOUT=600", NULL);
    const char *bad[] = {"0", "-3", "abc", "10s", "inf", "nan", " ", "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        s = 7;
        int status = tsr_nccl_parse_timeout(bad[i], &s);
        char want[64];
        snprintf(want, sizeof want, "TSR_NCCL_TIMEOUT=%s: ", bad[i]);
        char what[96];
        snprintf(what, sizeof what, "TSR_NCCL_TIMEOUT='%s' is refused", bad[i]);
        check(status == TSR_ERR_DIST && strncmp(tsr_last_error(), want, strlen(want)) == 0 && s == 7, what,
              tsr_last_error());
    }
}

static void versions(void) {
    char text[32];
    tsr_nccl_version_text(22105, text, sizeof text);
    check(strcmp(text, "2.21.5") == 0, "version code 22105 is 2.21.5", text);
    tsr_nccl_version_text(21003, text, sizeof text);
    check(strcmp(text, "2.10.3") == 0, "version code 21003 is 2.10.3", text);
    tsr_nccl_version_text(2804, text, sizeof text);
    check(strcmp(text, "2.8.4") == 0, "old version code 2804 is 2.8.4", text);
}

static void entry_points(void) {
    static const char *const wanted[] = {"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclAllReduce",
                                         "ncclGroupStart", "ncclGroupEnd", "ncclCommGetAsyncError", "ncclCommAbort",
                                         "ncclCommDestroy", "ncclGetErrorString"};
    size_t n = 0;
    while (tsr_nccl_entry_name(n)) n++;
    bool each_once = n == sizeof wanted / sizeof *wanted;
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted && each_once; i++) {
        int seen = 0;
        for (size_t k = 0; k < n; k++) seen += strcmp(tsr_nccl_entry_name(k), wanted[i]) == 0;
        each_once = seen == 1;
    }
    check(each_once, "the entry points are NCCL's ten functions the engine calls, each once", NULL);
}

static void loading(void) {
    setenv("TSR_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    int status = tsr_nccl_load();
    check(status == TSR_ERR_DIST && strstr(tsr_last_error(), "needs NCCL's library") &&
              strstr(tsr_last_error(), "/nonexistent/libnccl.so.2 cannot be loaded") &&
              strstr(tsr_last_error(), "TSR_NCCL_LIBRARY"),
          "a missing library: the message names it", tsr_last_error());
    check(tsr_dist_start("nccl") == TSR_ERR_DIST && !tsr_dist_uses_nccl(), "a missing library: the engine does not start",
          tsr_last_error());
    setenv("TSR_NCCL_LIBRARY", "libm.so.6", 1);
    status = tsr_nccl_load();
    check(status == TSR_ERR_DIST && strstr(tsr_last_error(), "libm.so.6 is not an NCCL") &&
              strstr(tsr_last_error(), "lacks ncclGetVersion"),
          "a library that is not NCCL: the message names the entry point it lacks", tsr_last_error());
    setenv("TSR_NCCL_TIMEOUT", "soon", 1);
    unsetenv("TSR_NCCL_LIBRARY");
    status = tsr_nccl_load();
    check(status == TSR_ERR_DIST && strstr(tsr_last_error(), "TSR_NCCL_TIMEOUT=soon"), "a bad TSR_NCCL_TIMEOUT stops the start",
          tsr_last_error());
    unsetenv("TSR_NCCL_TIMEOUT");
    check(tsr_nccl_watch(1e9) == TSR_OK && !tsr_nccl_failed(), "no communicator: nothing to watch", tsr_last_error());
    if (tsr_nccl_load() != TSR_OK) {
        printf("note: %s; the start with NCCL was not tried\n", tsr_last_error());
        return;
    }
    check(tsr_dist_start("nccl") == TSR_OK && tsr_dist_uses_nccl() && tsr_dist_rank() == 0 && tsr_dist_size() == 1 &&
              !tsr_dist_active(),
          "nccl alone: rank 0 of 1, the engine on, without MPI", tsr_last_error());
    check(tsr_dist_start("nccl") == TSR_OK, "starting nccl twice is one start", tsr_last_error());
    check(tsr_dist_start("mpi") == TSR_ERR_ARGUMENT, "another engine after nccl is refused", tsr_last_error());
}

int main(void) {
    types();
    timeouts();
    versions();
    entry_points();
    loading();
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
