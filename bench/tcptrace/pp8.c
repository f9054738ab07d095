/* pp8.c - 8-byte blocking MPI_Send/MPI_Recv ping-pong for system-call traces
 * (bench/tcp_trace.sh): argv[1] round trips after argv[2] warm-up round trips,
 * rank 0 prints the one-way time in µs. The same loop as mpi-anchors'
 * pingpong.c, one size, so that a trace holds nothing else. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n = argc > 1 ? atoi(argv[1]) : 10000, warm = argc > 2 ? atoi(argv[2]) : 1000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char sbuf[8] = "bbbbbbbb", rbuf[8];
    double t0 = 0;
    for (int i = -warm; i < n; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(sbuf, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(rbuf, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    if (rank == 0)
        printf("pp8 size=8 iters=%d us=%.3f\n", n, t * 1e6 / (2.0 * n));
    MPI_Finalize();
    return 0;
}
