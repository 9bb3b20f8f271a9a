/* dist_test.c — the communicator of runtime/dist.c.
 *
 * Run alone (as tests/run.sh runs every unit test): a run of one process, without MPI — rank 0,
 * size 1, the means leave every bit as it was, values agree; an unknown engine and an MPI library
 * that cannot be loaded are errors with a message.  Run under `mpirun -np N` (N > 1;
 * tests/native/distributed.sh does): "auto" finds MPI, the rank and size are right, the mean
 * (fast, and ordered over arrays larger than one collective piece) is the mean of what the
 * processes held, the ordered mean has exactly the bits of a sum in rank order on every process,
 * and the agreement check says yes for equal values and no (on every process) for different
 * ones.  Under mpirun every process prints its failures; process 0 prints the run's total. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/internal.h"
#include "check.h"

/* Process r's cell i, a number every process can compute for every other. */
static float cell_of(int r, int64_t i) { return (float)r * 1000.0f + (float)(i % 1000) * 0.1f + 1.0f / 3.0f; }

static void alone(void) {
    check(tsr_dist_rank() == 0 && tsr_dist_size() == 1, "before start: rank 0 of 1", NULL);
    check(tsr_dist_start("bogus") == TSR_ERR_ARGUMENT, "an unknown engine is refused", tsr_last_error());
    setenv("TSR_MPI_LIBRARY", "/nonexistent/libmpi.so", 1);
    int status = tsr_dist_start("mpi");
    check(status == TSR_ERR_DIST && strstr(tsr_last_error(), "/nonexistent/libmpi.so") &&
              strstr(tsr_last_error(), "--distributed=none"),
          "a missing MPI library is TSR_ERR_DIST naming it", tsr_last_error());
    check(strcmp(tsr_status_text(TSR_ERR_DIST), "distributed run failed") == 0, "TSR_ERR_DIST's text", NULL);
    unsetenv("TSR_MPI_LIBRARY");
    check(tsr_dist_start("auto") == TSR_OK, "auto alone starts", tsr_last_error());
    check(tsr_dist_rank() == 0 && tsr_dist_size() == 1 && !tsr_dist_active(), "auto alone: one process", NULL);
    float cells[5] = {1.5f, -0.0f, NAN, 3e38f, 1e-45f}, before[5];
    memcpy(before, cells, sizeof cells);
    check(tsr_dist_mean(cells, 5) == TSR_OK && memcmp(cells, before, sizeof cells) == 0, "the mean of one is the identity",
          NULL);
    check(tsr_dist_mean_ordered(cells, 5) == TSR_OK && memcmp(cells, before, sizeof cells) == 0,
          "the ordered mean of one is the identity", NULL);
    int64_t values[3] = {1, 2, 3};
    int agree = 0;
    check(tsr_dist_agree(values, 3, &agree) == TSR_OK && agree == 1, "one process agrees with itself", NULL);
    check(tsr_dist_finalize() == TSR_OK, "finalize without MPI", NULL);
    printf("%u passed, %u failed\n", passed, failed);
}

static void several(void) {
    check(tsr_dist_start("auto") == TSR_OK, "auto under mpirun starts", tsr_last_error());
    int rank = tsr_dist_rank(), size = tsr_dist_size();
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE");
    check(tsr_dist_active() && size > 1 && launched && size == atoi(launched), "the size is the launcher's", NULL);
    check(rank >= 0 && rank < size && getenv("OMPI_COMM_WORLD_RANK") && rank == atoi(getenv("OMPI_COMM_WORLD_RANK")),
          "the rank is the launcher's", NULL);

    /* Larger than one collective piece (4M cells), so that the pieces are tested too. */
    int64_t count = 5 * 1000 * 1000 + 7;
    float *fast = malloc((size_t)count * sizeof *fast), *ordered = malloc((size_t)count * sizeof *ordered);
    if (!fast || !ordered) {
        check(false, "memory", NULL);
        return;
    }
    for (int64_t i = 0; i < count; i++) fast[i] = ordered[i] = cell_of(rank, i);
    check(tsr_dist_mean(fast, count) == TSR_OK, "fast mean", tsr_last_error());
    check(tsr_dist_mean_ordered(ordered, count) == TSR_OK, "ordered mean", tsr_last_error());
    int64_t wrong_fast = -1, wrong_ordered = -1;
    for (int64_t i = 0; i < count; i++) {
        float sum = cell_of(0, i);
        double exact = cell_of(0, i);
        for (int r = 1; r < size; r++) {
            sum += cell_of(r, i);
            exact += cell_of(r, i);
        }
        float want = sum / (float)size;
        if (wrong_ordered < 0 && memcmp(&want, &ordered[i], sizeof want) != 0) wrong_ordered = i;
        if (wrong_fast < 0 && fabs(fast[i] - exact / size) > 1e-3 * fabs(exact / size)) wrong_fast = i;
    }
    char detail[128];
    snprintf(detail, sizeof detail, "cell %lld", (long long)wrong_fast);
    check(wrong_fast < 0, "the fast mean is the mean", detail);
    snprintf(detail, sizeof detail, "cell %lld", (long long)wrong_ordered);
    check(wrong_ordered < 0, "the ordered mean is the sum in rank order, bit for bit", detail);

    /* The ordered mean's bits are the same on every process. */
    int64_t hash[2] = {0, 0};
    for (int64_t i = 0; i < count; i++) {
        uint32_t bits;
        memcpy(&bits, &ordered[i], sizeof bits);
        hash[i & 1] = hash[i & 1] * 31 + bits;
    }
    int agree = 0;
    check(tsr_dist_agree(hash, 2, &agree) == TSR_OK && agree == 1, "the ordered mean: the same bits on every process", NULL);
    free(fast);
    free(ordered);

    int64_t same[3] = {7, -1, INT64_MAX}, mine[3] = {7, rank, 9};
    check(tsr_dist_agree(same, 3, &agree) == TSR_OK && agree == 1, "equal values agree", NULL);
    check(tsr_dist_agree(mine, 3, &agree) == TSR_OK && agree == 0, "different values disagree, on every process", NULL);
    tsr_dist_difference d;
    check(tsr_dist_compare(mine, 3, &d) == TSR_OK && d.index == 1 && d.other_rank == 1 && d.value0 == 0 && d.value_other == 1,
          "the first difference and two processes' values", NULL);
    check(tsr_dist_compare(mine, (uint32_t)(1 + rank), &d) == TSR_OK && d.index == -2, "different counts are found",
          NULL);
    int64_t from_zero = rank == 0 ? 42 : -5;
    check(tsr_dist_broadcast(&from_zero) == TSR_OK && from_zero == 42, "broadcast from process 0", NULL);

    /* The run's totals: the mean of the counts times the number of processes. */
    float counts[2] = {(float)passed, (float)failed};
    unsigned mine_failed = failed;
    tsr_dist_mean(counts, 2);
    if (mine_failed) printf("process %d: %u failed\n", rank, mine_failed);
    fflush(stdout);
    unsigned all_passed = (unsigned)lroundf(counts[0] * (float)size), all_failed = (unsigned)lroundf(counts[1] * (float)size);
    check(tsr_dist_finalize() == TSR_OK, "finalize", tsr_last_error());
    if (rank == 0) printf("%u passed, %u failed\n", all_passed, all_failed + (failed - mine_failed));
    else if (failed != mine_failed) printf("process %d: finalize failed\n", rank);
}

int main(void) {
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE");
    if (launched && atoi(launched) > 1) several();
    else alone();
    return failed ? 1 : 0;
}
