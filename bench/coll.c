/*
 * coll.c - one MPI collective's latency per size, measured as
 * mpi-anchors/allreduce.c measures MPI_Allreduce, for the operations it
 * does not have (and gompi-bench's definitions of them):
 *
 *   barrier    MPI_Barrier
 *   bcast      MPI_Bcast of SIZE bytes (MPI_BYTE) from rank 0
 *   reduce     MPI_Reduce of SIZE bytes of MPI_DOUBLE, MPI_SUM, to rank 0
 *   allreduce  MPI_Allreduce of SIZE bytes of MPI_DOUBLE, MPI_SUM
 *   allgather  MPI_Allgather of SIZE bytes (MPI_BYTE) from every rank
 *   alltoall   MPI_Alltoall of SIZE bytes (MPI_BYTE) to every rank
 *   gather     MPI_Gather of SIZE bytes (MPI_BYTE) from every rank to rank 0
 *   scatter    MPI_Scatter of SIZE bytes (MPI_BYTE) to every rank from rank 0
 *
 * Per size: a warm-up (a tenth of the calls, at least 2), a barrier, then
 * `iters` back-to-back calls timed on every rank; the value is the mean
 * over ranks of each rank's time per call, with the min and max over ranks.
 * Iterations are allreduce.c's by size (100000 at 8 B or less and for the
 * barrier, 50000 to 1 KiB, 5000 to 64 KiB, 500 to 1 MiB, 100 above) times
 * SCALE, at least 2. The reductions check their sum.
 *
 * Output (rank 0), allreduce.c's lines without its placement probe:
 *   # lib: <MPI library version>
 *   # nprocs=<n> scale=<scale>
 *   <op> size=<bytes> iters=<n> us=<avg> min=<..> max=<..>
 *
 * Usage: coll OP [SIZES [SCALE]]   SIZES: comma-separated bytes, k and m
 *        suffixes binary (default 8,1k,64k,1m; ignored for barrier)
 * Build: mpicc -O2 -Wall -o coll coll.c
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iterations(const char *op, long size) {
    if (!strcmp(op, "barrier") || size <= 8) return 100000;
    if (size <= 1024) return 50000;
    if (size <= 65536) return 5000;
    if (size <= 1 << 20) return 500;
    return 100;
}

static long parse_size(const char *s) {
    char *end;
    long n = strtol(s, &end, 10);
    if (*end == 'k' || *end == 'K') n <<= 10, end++;
    else if (*end == 'm' || *end == 'M') n <<= 20, end++;
    if (end == s || *end || n < 0 || n > 4L << 20) return -1;
    return n;
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    static const char *ops[] = {"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter"};
    const char *op = argc > 1 ? argv[1] : "";
    int known = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) known |= !strcmp(op, ops[i]);
    if (!known) {
        if (rank == 0)
            fprintf(stderr, "usage: coll barrier|bcast|reduce|allreduce|allgather|alltoall|gather|scatter [SIZES [SCALE]]\n");
        MPI_Finalize();
        return 2;
    }
    char sizes_arg[256] = "8,1k,64k,1m";
    if (argc > 2) snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[2]);
    double scale = argc > 3 ? atof(argv[3]) : 1.0;
    if (!(scale > 0)) scale = 1.0;
    int is_barrier = !strcmp(op, "barrier"), is_red = !strcmp(op, "reduce") || !strcmp(op, "allreduce");

    long sizes[64];
    int ns = 0;
    if (is_barrier) {
        sizes[ns++] = 0;
    } else {
        for (char *tok = strtok(sizes_arg, ","); tok && ns < 64; tok = strtok(NULL, ",")) {
            long s = parse_size(tok);
            if (s < 0 || (is_red && s % 8)) {
                if (rank == 0) fprintf(stderr, "coll: size %s: want 0 to 4m bytes%s\n", tok, is_red ? ", a multiple of 8" : "");
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            sizes[ns++] = s;
        }
    }
    long maxs = 0;
    for (int k = 0; k < ns; k++) maxs = sizes[k] > maxs ? sizes[k] : maxs;
    /* Room for SIZE bytes from (or to) every rank, and a byte more so that
     * no buffer is empty. */
    char *sb = malloc(maxs * n + 8), *rb = malloc(maxs * n + 8);
    if (!sb || !rb) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(sb, 1, maxs * n + 8);
    memset(rb, 0, maxs * n + 8);
    double *sd = (double *)sb, *rd = (double *)rb;
    for (long i = 0; i < maxs / 8; i++) sd[i] = rank + 1;

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        printf("# lib: %s\n# nprocs=%d scale=%g\n", lib, n, scale);
        fflush(stdout);
    }

    for (int k = 0; k < ns; k++) {
        long size = sizes[k];
        int c = (int)size, cd = (int)(size / 8);
        int iters = (int)(iterations(op, size) * scale);
        if (iters < 2) iters = 2;
        int w = iters / 10 < 2 ? 2 : iters / 10;
        for (int phase = 0; phase < 2; phase++) {
            int calls = phase == 0 ? w : iters;
            double t0 = 0;
            if (phase == 1) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            for (int i = 0; i < calls; i++) {
                switch (op[0] == 'a' ? op[3] : op[0]) {
                case 'b': /* barrier, bcast */
                    if (is_barrier) MPI_Barrier(MPI_COMM_WORLD);
                    else MPI_Bcast(sb, c, MPI_BYTE, 0, MPI_COMM_WORLD);
                    break;
                case 'r': /* reduce, allreduce */
                    if (op[0] == 'r') MPI_Reduce(sd, rd, cd, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                    else MPI_Allreduce(sd, rd, cd, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                    break;
                case 'g': /* allgather, gather */
                    if (op[0] == 'a') MPI_Allgather(sb, c, MPI_BYTE, rb, c, MPI_BYTE, MPI_COMM_WORLD);
                    else MPI_Gather(sb, c, MPI_BYTE, rb, c, MPI_BYTE, 0, MPI_COMM_WORLD);
                    break;
                case 't': /* alltoall */
                    MPI_Alltoall(sb, c, MPI_BYTE, rb, c, MPI_BYTE, MPI_COMM_WORLD);
                    break;
                case 's': /* scatter */
                    MPI_Scatter(sb, c, MPI_BYTE, rb, c, MPI_BYTE, 0, MPI_COMM_WORLD);
                    break;
                }
            }
            if (phase == 0 && is_red && cd > 0 && (op[0] == 'a' || rank == 0)) {
                double expect = n * (n + 1) / 2.0;
                if (rd[0] != expect || rd[cd - 1] != expect) {
                    fprintf(stderr, "%s check failed: %g != %g\n", op, rd[cd - 1], expect);
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
            }
            if (phase == 1) {
                double t = (MPI_Wtime() - t0) / iters, sum, mn, mx;
                MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                MPI_Reduce(&t, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
                MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                if (rank == 0) {
                    printf("%s size=%ld iters=%d us=%.3f min=%.3f max=%.3f\n", op, size, iters, sum / n * 1e6, mn * 1e6,
                           mx * 1e6);
                    fflush(stdout);
                }
            }
        }
    }
    free(sb);
    free(rb);
    MPI_Finalize();
    return 0;
}
