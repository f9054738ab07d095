/*
 * bw_phases: the windowed bandwidth loop of mpi-anchors/pingpong.c (rank 0
 * posts WINDOW MPI_Isend, rank 1 WINDOW MPI_Irecv, both MPI_Waitall, then a
 * 4-byte ack from rank 1) with gompi-bench's --phases line after each size:
 * where each rank spends its time per message, medians over the timed
 * iterations: posting the window, its Waitall, and the rest of the
 * iteration (the ack, and waiting for it). The rank that never waits bounds
 * the rate; the same line from both MPIs says whose which part is longer.
 *
 *   mpicc -O2 -o bw_phases bench/bw_phases.c
 *   mpirun -np 2 --bind-to core bw_phases [ITERS] [SIZE...]
 *
 * ITERS defaults to 20000 (a tenth more as warm-up), SIZES to 1 8 64 512.
 * Output, rank 0:
 *   bw size=<bytes> iters=<n> MBps=<10^6 bytes/s>
 *   # phases size=N window=W rank0 post_ns=P waitall_ns=A ack_ns=K rank1 post_ns=.. waitall_ns=.. ack_ns=..
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW 64

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of part k per message: k 0 posting, 1 Waitall, 2 the rest */
static double median(const long long *t, int n, int k, double *scratch) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (k < 2)
            scratch[m++] = (double)(t[3 * i + k + 1] - t[3 * i + k]);
        else if (i + 1 < n)
            scratch[m++] = (double)(t[3 * (i + 1)] - t[3 * i + 2]);
    }
    if (m == 0)
        return 0;
    qsort(scratch, m, sizeof *scratch, cmp);
    return scratch[m / 2] / WINDOW;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np < 2) {
        if (me == 0)
            fprintf(stderr, "bw_phases needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int iters = argc > 1 ? atoi(argv[1]) : 20000;
    if (iters < 2) {
        if (me == 0)
            fprintf(stderr, "bw_phases: ITERS %s: accepted: a whole number of 2 or more\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long defaults[] = {1, 8, 64, 512};
    int nsizes = argc > 2 ? argc - 2 : 4;
    int warm = iters / 10;
    long long *t = malloc(sizeof *t * 3 * iters);
    double *scratch = malloc(sizeof *scratch * iters);
    char *sbuf = malloc(1 << 22), *rbuf = malloc(1 << 22), ack[4] = {0};
    memset(sbuf, 'a' + me, 1 << 22);
    MPI_Request reqs[WINDOW];
    for (int s = 0; s < nsizes; s++) {
        long n = argc > 2 ? atol(argv[2 + s]) : defaults[s];
        if (n < 0 || n > (1 << 22)) {
            if (me == 0)
                fprintf(stderr, "bw_phases: SIZE %ld: accepted: 0 to 4194304 bytes\n", n);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = 0;
        for (int i = 0; i < iters + warm; i++) {
            int k = i - warm;
            if (k == 0)
                t0 = MPI_Wtime();
            if (me < 2 && k >= 0)
                t[3 * k] = now_ns();
            for (int j = 0; j < WINDOW && me < 2; j++) {
                if (me == 1)
                    MPI_Irecv(rbuf, (int)n, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &reqs[j]);
                else
                    MPI_Isend(sbuf, (int)n, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &reqs[j]);
            }
            if (me < 2 && k >= 0)
                t[3 * k + 1] = now_ns();
            if (me < 2)
                MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
            if (me < 2 && k >= 0)
                t[3 * k + 2] = now_ns();
            if (me == 0)
                MPI_Recv(ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else if (me == 1)
                MPI_Send(ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
        }
        double el = MPI_Wtime() - t0;
        double mine[3] = {0, 0, 0}, peer[3];
        if (me < 2)
            for (int k = 0; k < 3; k++)
                mine[k] = median(t, iters, k, scratch);
        if (me == 1)
            MPI_Send(mine, 3, MPI_DOUBLE, 0, 102, MPI_COMM_WORLD);
        if (me == 0) {
            MPI_Recv(peer, 3, MPI_DOUBLE, 1, 102, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            printf("bw size=%ld iters=%d MBps=%.1f\n", n, iters, (double)n * WINDOW * iters / el / 1e6);
            printf("# phases size=%ld window=%d rank0 post_ns=%.1f waitall_ns=%.1f ack_ns=%.1f rank1 post_ns=%.1f waitall_ns=%.1f ack_ns=%.1f\n",
                   n, WINDOW, mine[0], mine[1], mine[2], peer[0], peer[1], peer[2]);
            fflush(stdout);
        }
    }
    free(t);
    free(scratch);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
