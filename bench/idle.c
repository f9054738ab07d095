/* idle.c: what waiting ranks cost a working one, for Open MPI and MPICH
 * beside gompi-bench idle. Rank 0 times a fixed CPU loop (the same chain of
 * multiply-adds as gompi-bench) while every other rank waits for it in
 * MPI_Recv, MPI_Wait, MPI_Finalize or MPI_Barrier, then releases them.
 * Run it with -np 1 for the loop alone.
 *
 *   mpicc -O2 -o idle idle.c && mpirun -np 64 ./idle recv [loops]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t spin(long n) {
    volatile uint64_t sink;
    uint64_t x = 1;
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
    return sink;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const char *in = argc > 1 ? argv[1] : "recv";
    long loops = argc > 2 ? atol(argv[2]) : 210000000L;
    int me, n;
    char b = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (strcmp(in, "recv") && strcmp(in, "wait") && strcmp(in, "finalize") && strcmp(in, "barrier")) {
        if (me == 0)
            fprintf(stderr, "idle: %s: accepted: recv, wait, finalize, barrier\n", in);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (me != 0) {
        if (!strcmp(in, "recv")) {
            MPI_Recv(&b, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (!strcmp(in, "wait")) {
            MPI_Request r;
            MPI_Irecv(&b, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else if (!strcmp(in, "barrier")) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        MPI_Finalize();
        return 0;
    }
    double t0 = now();
    uint64_t x = spin(loops);
    double ms = (now() - t0) * 1e3;
    printf("# idle.c: rank 0 runs %ld loop steps while %d ranks wait in %s (check %d)\n", loops, n - 1, in, (int)(x & 1));
    printf("%-10d %14.1f\n", n - 1, ms);
    fflush(stdout);
    if (!strcmp(in, "recv") || !strcmp(in, "wait"))
        for (int r = 1; r < n; r++)
            MPI_Send(&b, 1, MPI_CHAR, r, 1, MPI_COMM_WORLD);
    if (!strcmp(in, "barrier"))
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
