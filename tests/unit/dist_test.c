/* dist_test.c — the communicator of runtime/dist.c.
 *
 * Run alone (as tests/run.sh runs every unit test): a run of one process, without MPI — rank 0,
 * size 1, the means leave every bit as it was, values agree; an unknown engine and an MPI library
 * that cannot be loaded are errors with a message.  Run under `mpirun -np N` (N > 1;
 * tests/native/distributed.sh does): "auto" finds MPI, the rank and size are right (and the
 * rank and count among the processes on this machine, against Open MPI's variables), the mean
 * (fast, and ordered over arrays larger than one collective piece) is the mean of what the
 * processes held, the ordered mean has exactly the bits of a sum in rank order on every process,
 * and the agreement check says yes for equal values and no (on every process) for different
 * ones; the f64 means add in f64.  Under mpirun every process prints its failures; process 0
 * prints the run's total.
 *
 * Alone, it also checks the readers of sharded data sets for process r of N (they take the shard
 * as arguments, so one process can play every rank): a .npy and a CSV file of N·D0 rows give
 * rows r, r+N, …; a file of other length is an error naming the item, the file, both counts and
 * the number of processes; sequential token windows are the file's windows k·N + r, random ones
 * are the rows k·N + r of one process's draw of N times the rows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/internal.h"
#include "check.h"

/* Process r's cell i, a number every process can compute for every other. */
static float cell_of(int r, int64_t i) { return (float)r * 1000.0f + (float)(i % 1000) * 0.1f + 1.0f / 3.0f; }

/* A .npy file of `rows`×2 float32, cell (i, j) = 10·i + j. */
static void write_npy(const char *path, int rows) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 2), }", rows);
    while ((10 + n + 1) % 64) dict[n++] = ' ';
    dict[n++] = '\n';
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    unsigned char len[2] = {(unsigned char)(n & 255), (unsigned char)(n >> 8)};
    fwrite(len, 1, 2, f);
    fwrite(dict, 1, (size_t)n, f);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < 2; j++) {
            float v = (float)(10 * i + j);
            fwrite(&v, 4, 1, f);
        }
    fclose(f);
}

static void sharded_readers(void) {
    char dir[] = "/tmp/dist_test.XXXXXX", npy[64], small[64], csv[64];
    if (!mkdtemp(dir)) {
        check(false, "a temporary directory", NULL);
        return;
    }
    snprintf(npy, sizeof npy, "%s/six.npy", dir);
    snprintf(small, sizeof small, "%s/three.npy", dir);
    snprintf(csv, sizeof csv, "%s/six.csv", dir);
    write_npy(npy, 6);
    write_npy(small, 3);
    FILE *f = fopen(csv, "w");
    for (int i = 0; f && i < 6; i++) fprintf(f, "%d,%d\n", 10 * i, 10 * i + 1);
    if (f) fclose(f);
    int64_t dims[2] = {3, 2};
    for (int shards = 1; shards <= 3; shards++)
        for (int r = 0; r < shards; r++) {
            int64_t local[2] = {6 / shards, 2};
            float cells[12], from_csv[12];
            int a = tsr_load_npy_shard(npy, cells, TSR_DTYPE_F32, 2, local, "x", r, shards, 1);
            int b = tsr_load_csv_shard(csv, from_csv, TSR_DTYPE_F32, 2, local, "x", r, shards, 1);
            bool right = a == TSR_OK && b == TSR_OK;
            for (int64_t i = 0; right && i < local[0]; i++)
                for (int j = 0; j < 2; j++)
                    right = cells[i * 2 + j] == (float)(10 * (i * shards + r) + j) && from_csv[i * 2 + j] == cells[i * 2 + j];
            char what[64];
            snprintf(what, sizeof what, "npy and CSV rows of process %d of %d", r, shards);
            check(right, what, tsr_last_error());
        }
    /* Samples under two batch axes: the one-process file of 6 samples (a [3, 2] of samples of 1
     * cell... here [6, 2] read as batches [3, 1] of samples of shape [2]) serves two processes
     * with batches of half the size, process r taking samples r, r + 2, …; and a file whose
     * leading axes differ from the target's ([6, 2] against [3, 1, 2]) is the same samples. */
    int64_t batches[3] = {3, 1, 2};
    for (int r = 0; r < 2; r++) {
        float cells[6];
        int a = tsr_load_npy_shard(npy, cells, TSR_DTYPE_F32, 3, batches, "x", r, 2, 2);
        bool right = a == TSR_OK;
        for (int64_t i = 0; right && i < 3; i++)
            for (int j = 0; j < 2; j++) right = cells[i * 2 + j] == (float)(10 * (i * 2 + r) + j);
        char what[64];
        snprintf(what, sizeof what, "npy samples under two batch axes, process %d of 2", r);
        check(right, what, tsr_last_error());
    }
    /* Every axis a sample axis (~b:[2; 4] of one number a sample, as 2 × 2 a process): a CSV file
     * of 2 lines of 4 holds the 8 samples as a .npy of shape (2, 4) would, whatever its lines. */
    char wide[64];
    snprintf(wide, sizeof wide, "%s/wide.csv", dir);
    FILE *w = fopen(wide, "w");
    if (w) fputs("1 2 3 4\n5 6 7 8\n", w);
    if (w) fclose(w);
    int64_t scalars[2] = {2, 2};
    for (int r = 0; r < 2; r++) {
        float got[4];
        bool right = tsr_load_csv_shard(wide, got, TSR_DTYPE_F32, 2, scalars, "ys", r, 2, 2) == TSR_OK;
        for (int i = 0; right && i < 4; i++) right = got[i] == (float)(2 * i + r + 1);
        char what[80];
        snprintf(what, sizeof what, "a CSV of 2 lines of 4 as samples of ~b:[2; 2], process %d of 2", r);
        check(right, what, tsr_last_error());
    }
    remove(wide);
    float cells[6];
    int status = tsr_load_npy_shard(small, cells, TSR_DTYPE_F32, 2, dims, "train_x", 0, 2, 1);
    char want[256];
    snprintf(want, sizeof want, "data 'train_x': a run of 2 processes needs 6 samples in %s (3 for each), it has 3 "
             "(its shape is (3, 2))", small);
    check(status == TSR_ERR_DATA && strcmp(tsr_last_error(), want) == 0, "too few .npy samples for 2 processes", tsr_last_error());
    /* A run-time length (a negative count of sample axes): spare samples are left unused. */
    int64_t two[2] = {2, 2};
    status = tsr_load_npy_shard(npy, cells, TSR_DTYPE_F32, 2, two, "x", 1, 2, -1);
    check(status == TSR_OK && cells[0] == 10 && cells[2] == 30, "a run-time length: samples 1 and 3 of 6 for process 1 of 2",
          tsr_last_error());
    status = tsr_load_npy_shard(npy, cells, TSR_DTYPE_F32, 2, two, "x", 1, 2, 1);
    check(status == TSR_ERR_DATA, "a fixed length: 6 samples are not 2 for each of 2 processes", tsr_last_error());
    status = tsr_load_csv_shard(csv, cells, TSR_DTYPE_F32, 2, dims, "train_x", 1, 3, 1);
    snprintf(want, sizeof want, "data 'train_x': a run of 3 processes needs 9 samples in %s (3 for each), it has 6", csv);
    check(status == TSR_ERR_DATA && strcmp(tsr_last_error(), want) == 0, "too few CSV samples for 3 processes", tsr_last_error());
    remove(npy);
    remove(small);
    remove(csv);
    remove(dir);

    /* Tokens 0, 1, …, 40: windows of 4 share one token; 13 windows. */
    int32_t ids[41];
    for (int i = 0; i < 41; i++) ids[i] = i;
    tsr_tokens tokens = {ids, 41, false};
    float one[6 * 4], part[3 * 4];
    bool same = tsr_tokens_random(&tokens, one, 6, 4, 7, 2, "t", "t.bin") == TSR_OK;
    for (int r = 0; r < 2 && same; r++) {
        same = tsr_tokens_random_shard(&tokens, part, 3, 4, 7, 2, r, 2, "t", "t.bin") == TSR_OK;
        for (int k = 0; k < 3 && same; k++) same = memcmp(part + k * 4, one + (k * 2 + r) * 4, 4 * sizeof *part) == 0;
    }
    check(same, "random windows: the processes' rows are one process's draw of all of them", tsr_last_error());
    bool sequential = tsr_tokens_sequential_shard(&tokens, part, 3, 4, 1, 4, "t", "t.bin") == TSR_OK;
    for (int k = 0; k < 3 && sequential; k++) {
        int32_t first;
        memcpy(&first, part + k * 4, sizeof first);
        sequential = first == (k * 4 + 1) * 3;
    }
    check(sequential, "sequential windows of process 1 of 4: windows 1, 5, 9", tsr_last_error());
    status = tsr_tokens_sequential_shard(&tokens, part, 3, 4, 0, 5, "t", "t.bin");
    check(status == TSR_ERR_DATA && strstr(tsr_last_error(), "a run of 5 processes needs 15 windows") &&
              strstr(tsr_last_error(), "it has 13"), "too few windows for 5 processes", tsr_last_error());
}

static void alone(void) {
    sharded_readers();
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
    check(tsr_dist_local_rank() == 0 && tsr_dist_local_size() == 1, "alone: process 0 of 1 on this machine", NULL);
    float cells[5] = {1.5f, -0.0f, NAN, 3e38f, 1e-45f}, before[5];
    memcpy(before, cells, sizeof cells);
    check(tsr_dist_mean(cells, 5) == TSR_OK && memcmp(cells, before, sizeof cells) == 0, "the mean of one is the identity",
          NULL);
    check(tsr_dist_mean_ordered(cells, 5) == TSR_OK && memcmp(cells, before, sizeof cells) == 0,
          "the ordered mean of one is the identity", NULL);
    double wide[3] = {1 + 0x1p-40, -0.0, 1e300}, wide_before[3];
    memcpy(wide_before, wide, sizeof wide);
    check(tsr_dist_mean_f64(wide, 3) == TSR_OK && tsr_dist_mean_ordered_f64(wide, 3) == TSR_OK &&
              memcmp(wide, wide_before, sizeof wide) == 0, "the f64 means of one are the identity", NULL);
    int64_t values[3] = {1, 2, 3};
    int agree = 0;
    check(tsr_dist_agree(values, 3, &agree) == TSR_OK && agree == 1, "one process agrees with itself", NULL);
    check(tsr_dist_finalize() == TSR_OK, "finalize without MPI", NULL);
    printf("%u passed, %u failed\n", passed, failed);
}

/* Process r's f64 cell i: differences of 2^-40 that an f32 sum would lose. */
static double wide_cell_of(int r, int64_t i) { return 1.0 + (double)(r + 1) * 0x1p-40 + (double)(i % 1000) * 1e-3; }

/* The f64 means: summed in f64 (the fast one to 1e-15, the ordered one bit for bit in rank
 * order), an f32 sum would miss the 2^-40 steps. */
static void f64_means(int rank, int size) {
    int64_t count = 1000 * 1000 + 3;
    double *fast = malloc((size_t)count * sizeof *fast), *ordered = malloc((size_t)count * sizeof *ordered);
    if (!fast || !ordered) {
        check(false, "memory", NULL);
        free(fast);
        free(ordered);
        return;
    }
    for (int64_t i = 0; i < count; i++) fast[i] = ordered[i] = wide_cell_of(rank, i);
    check(tsr_dist_mean_f64(fast, count) == TSR_OK, "fast f64 mean", tsr_last_error());
    check(tsr_dist_mean_ordered_f64(ordered, count) == TSR_OK, "ordered f64 mean", tsr_last_error());
    int64_t wrong_fast = -1, wrong_ordered = -1;
    for (int64_t i = 0; i < count; i++) {
        double sum = wide_cell_of(0, i);
        for (int r = 1; r < size; r++) sum += wide_cell_of(r, i);
        double want = sum / size;
        if (wrong_ordered < 0 && memcmp(&want, &ordered[i], sizeof want) != 0) wrong_ordered = i;
        if (wrong_fast < 0 && fabs(fast[i] - want) > 1e-15 * fabs(want)) wrong_fast = i;
    }
    char detail[128];
    snprintf(detail, sizeof detail, "cell %lld", (long long)wrong_fast);
    check(wrong_fast < 0, "the fast f64 mean is the mean to 1e-15", detail);
    snprintf(detail, sizeof detail, "cell %lld", (long long)wrong_ordered);
    check(wrong_ordered < 0, "the ordered f64 mean is the f64 sum in rank order, bit for bit", detail);
    free(fast);
    free(ordered);
}

static void several(void) {
    check(tsr_dist_start("auto") == TSR_OK, "auto under mpirun starts", tsr_last_error());
    int rank = tsr_dist_rank(), size = tsr_dist_size();
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE");
    check(tsr_dist_active() && size > 1 && launched && size == atoi(launched), "the size is the launcher's", NULL);
    check(rank >= 0 && rank < size && getenv("OMPI_COMM_WORLD_RANK") && rank == atoi(getenv("OMPI_COMM_WORLD_RANK")),
          "the rank is the launcher's", NULL);
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK"), *local_size = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    check(local && local_size && tsr_dist_local_rank() == atoi(local) && tsr_dist_local_size() == atoi(local_size),
          "the rank and count on this machine are the launcher's", NULL);

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
    uint64_t hash_bits[2] = {0, 0}; /* unsigned: the hash wraps, as a signed product must not */
    for (int64_t i = 0; i < count; i++) {
        uint32_t bits;
        memcpy(&bits, &ordered[i], sizeof bits);
        hash_bits[i & 1] = hash_bits[i & 1] * 31 + bits;
    }
    int64_t hash[2];
    memcpy(hash, hash_bits, sizeof hash);
    int agree = 0;
    check(tsr_dist_agree(hash, 2, &agree) == TSR_OK && agree == 1, "the ordered mean: the same bits on every process", NULL);
    free(fast);
    free(ordered);

    f64_means(rank, size);

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
