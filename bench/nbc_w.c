/*
 * nbc_w.c - W, a nonblocking collective's own CPU time per call, for Open
 * MPI and MPICH, measured exactly as gompi-bench nbc measures gompi's (its
 * <op>_w line; cmd/gompi-bench/nbc.go has the definition), so that the
 * three can be set side by side with mpi-anchors/nbc.c's overlap.
 *
 * Why W: with each rank bound to one core, the collective's own CPU work
 * shares that core with the computation, so OSU's overlap,
 * 100 * (1 - (ovrl - cpu) / pure), cannot exceed 100 * (1 - W / pure).
 *
 * Per operation (Ibarrier; Iallreduce of float64 sums at 8 B, 1 KiB, 64 KiB,
 * 1 MiB) every rank, with nbc.c's iteration counts times SCALE (at least 10)
 * and nbc.c's warm-up (a tenth of them plus one):
 *
 *   pure     Ixxx + Wait back to back, timed as nbc.c's pure; around it the
 *            process's CPU time (CLOCK_PROCESS_CPUTIME_ID: every thread) and
 *            context switches (getrusage) per call: pure_cpu_us, pure_csw
 *   test_us  one MPI_Test's own CPU time when it finds nothing to do: 4096
 *            Tests of a receive on MPI_COMM_SELF that never matches (then
 *            cancelled)
 *   alone    the process CPU time of `iters` runs of the compute loop
 *            (nbc.c's spin, calibrated again as nbc.c does) lasting
 *            compute_us = 4 * pure (pure: the mean over ranks), in 64 slices
 *            with no Test
 *   with     the process CPU time of `iters` runs of: Ixxx, the same loop
 *            with an MPI_Test of the request after each slice until it is
 *            complete (none after), MPI_Wait
 *   W        w_us = ((with - alone) - tests * test_us) / iters
 *   done     the fraction of runs whose request was complete before the
 *            Wait: below 1, some runs waited in MPI_Wait and W includes
 *            that polling
 *
 * Output (rank 0; every figure is the mean over ranks; one parser reads
 * these and gompi-bench's):
 *   # nbc_w ranks=<n> lib=<library>
 *   ibarrier_w size=0 iters=.. w_us=.. done=.. compute_us=.. pure_cpu_us=.. pure_csw=.. test_us=.. pre=.. post=..
 *   iallreduce_w size=<bytes> ...
 * compute_us / 4 is the pure latency this program measured (the mean over
 * ranks), as in gompi-bench's line. pre/post: the placement probe
 * (placement.h) before the pure runs and after the W runs; -1 unless
 * exactly 2 ranks.
 *
 * Usage: nbc_w [scale]
 * Build: mpicc -O2 -Wall -I<mpi-anchors> -o nbc_w nbc_w.c   (placement.h)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#define PLACEMENT_MPI
#include "placement.h"

static const int counts[] = {1, 128, 8192, 131072}; /* 8 B, 1 KiB, 64 KiB, 1 MiB of doubles */
static const int base_iters[] = {20000, 10000, 2000, 200}; /* nbc.c's */
#define NSIZES ((int)(sizeof(counts) / sizeof(counts[0])))

#define SLICES 64          /* nbc.c's slices of ovrl_t's compute loop */
#define COMPUTE_FACTOR 4.0 /* gompi-bench's wComputeFactor */
#define TEST_CALLS 4096    /* gompi-bench's wTestCalls */
#define TAG_IDLE 202       /* gompi-bench's tagNBCIdle */

static volatile double sink;
static double ns_per_spin;

/* spin: nbc.c's; `n` iterations of dependent floating-point work */
static void spin(long n) {
    double x = 1.0;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

/* calibrate: nbc.c's; ns per spin iteration, measured again before each figure */
static void calibrate(void) {
    long n = 1 << 21;
    double t0 = MPI_Wtime();
    spin(n);
    double t = MPI_Wtime() - t0;
    ns_per_spin = t * 1e9 / n;
}

/* process_cpu_us: the CPU time of every thread of the process so far */
static double process_cpu_us(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* context_switches: voluntary and not, so far; -1 when unknown */
static double context_switches(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

/* compute: gompi-bench's (nbc.c's with the Tests counted): the loop for us
 * µs, in slices with an MPI_Test of *req between (none when req is NULL or
 * with one slice); a completed request is not tested again. Returns the
 * Tests made; *done says whether *req was complete at the end. */
static int compute(double us, MPI_Request *req, int slices, int *done) {
    long n = (long)(us * 1000.0 / ns_per_spin);
    int tests = 0;
    *done = 0;
    if (slices <= 1) { spin(n); return 0; }
    for (int s = 0; s < slices; s++) {
        spin(n / slices);
        if (req && !*done) {
            tests++;
            MPI_Test(req, done, MPI_STATUS_IGNORE);
        }
    }
    return tests;
}

static double mean_over_ranks(double v, int nprocs) {
    double sum = 0;
    MPI_Reduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum / nprocs;
}

static mpi_probe_t probe;

static void start(int barrier, double *s, double *r, int count, MPI_Request *req) {
    if (barrier) MPI_Ibarrier(MPI_COMM_WORLD, req);
    else MPI_Iallreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, req);
}

/* check: the sum, so that a wrong one stops the program rather than giving
 * a fast number */
static void check(int barrier, const double *r, int count, int nprocs) {
    if (barrier || count == 0) return;
    double want = nprocs * (nprocs + 1) / 2.0;
    if (r[0] != want || r[count - 1] != want) {
        fprintf(stderr, "nbc_w: the sum is %g, want %g\n", r[count - 1], want);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* test_cost: µs of process CPU per MPI_Test that finds nothing to do */
static double test_cost(void) {
    char b;
    int flag = 0;
    MPI_Request req;
    MPI_Irecv(&b, 1, MPI_BYTE, 0, TAG_IDLE, MPI_COMM_SELF, &req);
    double c0 = process_cpu_us();
    for (int i = 0; i < TEST_CALLS; i++) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            fprintf(stderr, "nbc_w: a receive that nobody sends to completed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    double us = (process_cpu_us() - c0) / TEST_CALLS;
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return us;
}

static void measure(int barrier, double *s, double *r, int count, int iters, int rank, int nprocs) {
    MPI_Request req;
    const char *name = barrier ? "ibarrier" : "iallreduce";
    int size = barrier ? 0 : count * 8, done;

    /* pure, as nbc.c's, with the process's CPU time and context switches */
    double pre = mpi_probe_ns(&probe, MPI_COMM_WORLD);
    for (int i = 0; i < iters / 10 + 1; i++) { start(barrier, s, r, count, &req); MPI_Wait(&req, MPI_STATUS_IGNORE); }
    check(barrier, r, count, nprocs);
    double cpu0 = process_cpu_us(), csw0 = context_switches();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) { start(barrier, s, r, count, &req); MPI_Wait(&req, MPI_STATUS_IGNORE); }
    double pure = (MPI_Wtime() - t0) / iters * 1e6;
    double pure_cpu = (process_cpu_us() - cpu0) / iters;
    double pure_csw = (context_switches() - csw0) / iters;
    double pure_all;
    MPI_Allreduce(&pure, &pure_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    pure_all /= nprocs;

    /* W */
    double compute_us = COMPUTE_FACTOR * pure_all;
    double test_us = test_cost();
    calibrate();
    MPI_Barrier(MPI_COMM_WORLD);
    cpu0 = process_cpu_us();
    for (int i = 0; i < iters; i++) compute(compute_us, NULL, SLICES, &done); /* the same loop, no Test */
    double alone = process_cpu_us() - cpu0;
    MPI_Barrier(MPI_COMM_WORLD);
    long tests = 0;
    int complete = 0;
    cpu0 = process_cpu_us();
    for (int i = 0; i < iters; i++) {
        start(barrier, s, r, count, &req);
        tests += compute(compute_us, &req, SLICES, &done);
        if (done) complete++;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    double with = process_cpu_us() - cpu0;
    double w_us = ((with - alone) - tests * test_us) / iters;
    double post = mpi_probe_ns(&probe, MPI_COMM_WORLD);
    check(barrier, r, count, nprocs);

    double m[6] = {w_us, (double)complete / iters, compute_us, pure_cpu, pure_csw, test_us};
    for (int i = 0; i < 6; i++) m[i] = mean_over_ranks(m[i], nprocs);
    if (rank == 0) {
        printf("%s_w size=%d iters=%d w_us=%.3f done=%.2f compute_us=%.3f pure_cpu_us=%.3f pure_csw=%.2f test_us=%.3f "
               "pre=%.1f post=%.1f\n",
               name, size, iters, m[0], m[1], m[2], m[3], m[4], m[5], pre, post);
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    int rank, nprocs;
    double scale = 1.0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc > 1) scale = atof(argv[1]);
    mpi_probe_init(&probe, MPI_COMM_WORLD);
    calibrate();

    int maxc = counts[NSIZES - 1];
    double *s = malloc(sizeof(double) * maxc), *r = malloc(sizeof(double) * maxc);
    if (!s || !r) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < maxc; i++) { s[i] = rank + 1; r[i] = 0; }
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        for (int i = 0; i < len; i++) if (lib[i] == '\n') lib[i] = ' ';
        printf("# nbc_w ranks=%d lib=%.80s\n", nprocs, lib);
    }
    int it = (int)(base_iters[0] * scale);
    measure(1, s, r, 0, it > 10 ? it : 10, rank, nprocs);
    for (int k = 0; k < NSIZES; k++) {
        it = (int)(base_iters[k] * scale);
        measure(0, s, r, counts[k], it > 10 ? it : 10, rank, nprocs);
    }
    mpi_probe_free(&probe);
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
