/*
 * tcp_conns.c - does the number of connections per pair matter for an 8-byte
 * TCP ping-pong over loopback? No MPI: two processes, one per CPU, spinning
 * on recv(MSG_DONTWAIT) (what a polling progress engine does), TCP_NODELAY.
 *
 *   one  one connection carries both directions (Open MPI's btl tcp): each
 *        reply's segment carries the ACK of the request.
 *   two  one connection per direction (gompi's btl tcp before issue 30):
 *        the receiving side of each connection never sends data, so the
 *        ACK of a small segment leaves on its own, from the reader's recv
 *        (tcp_cleanup_rbuf), before the reader can answer.
 *
 * Runs the two modes interleaved ROUNDS times; prints per round the median
 * one-way µs over 7 blocks and the TCP segments sent per message
 * (/proc/net/snmp OutSegs, machine-wide: other loopback traffic adds to it).
 * Usage: tcp_conns [rounds [iterations]]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCKS 7

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void die(const char *m) { perror(m); exit(1); }
static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static long outsegs(void) {
    FILE *f = fopen("/proc/net/snmp", "r");
    char line[1024];
    int hdr = 0;
    long v = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Tcp:", 4)) continue;
        if (!hdr++) continue;
        long x[16];
        if (sscanf(line, "Tcp: %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", &x[0], &x[1], &x[2], &x[3], &x[4],
                   &x[5], &x[6], &x[7], &x[8], &x[9], &x[10]) == 11)
            v = x[10];
    }
    if (f) fclose(f);
    return v;
}
static void wr(int fd, const char *p, long n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            die("send");
        }
        p += k, n -= k;
    }
}
static void rd(int fd, char *p, long n) {
    while (n > 0) {
        ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            die("recv");
        }
        if (k == 0) exit(1);
        p += k, n -= k;
    }
}
static void prep(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)) die("TCP_NODELAY");
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}
/* Two connected pairs from one listener: c[i] dialled, a[i] accepted. */
static void pairs(int c[2], int a[2]) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 4)) die("listen");
    socklen_t l = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &l);
    for (int i = 0; i < 2; i++) {
        c[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c[i], (struct sockaddr *)&sa, sizeof sa)) die("connect");
        a[i] = accept(ls, NULL, NULL);
        if (a[i] < 0) die("accept");
        prep(c[i]);
        prep(a[i]);
    }
    close(ls);
}

static double run(int two, long iters, double *segs) {
    int c[2], a[2];
    pairs(c, a);
    /* parent sends on sfd, receives on rfd; the child the other ends */
    int psend = c[0], precv = two ? a[1] : c[0], csend = two ? c[1] : a[0], crecv = a[0];
    char buf[8] = "bbbbbbbb";
    long warm = iters / 10 + 10, total = warm + BLOCKS * iters;
    pid_t pid = fork();
    if (pid == 0) {
        pin(1);
        for (long i = 0; i < total; i++) {
            rd(crecv, buf, 8);
            wr(csend, buf, 8);
        }
        _exit(0);
    }
    pin(0);
    double v[BLOCKS], t0 = 0;
    long s0 = 0;
    int b = 0;
    for (long i = 0; i < total; i++) {
        if (i == warm) t0 = now(), s0 = outsegs();
        wr(psend, buf, 8);
        rd(precv, buf, 8);
        if (i >= warm && (i - warm + 1) % iters == 0) {
            double t1 = now();
            v[b++] = (t1 - t0) / (2.0 * iters);
            t0 = t1;
        }
    }
    *segs = (double)(outsegs() - s0) / (2.0 * BLOCKS * iters);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < 2; i++) close(c[i]), close(a[i]);
    qsort(v, BLOCKS, sizeof v[0], cmpd);
    return v[BLOCKS / 2] * 1e6;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    long iters = argc > 2 ? atol(argv[2]) : 5000;
    for (int r = 0; r < rounds; r++) {
        for (int two = 0; two < 2; two++) {
            double segs, us = run(two, iters, &segs);
            printf("tcp_conns %s us=%.3f segs_per_msg=%.2f\n", two ? "two" : "one", us, segs);
            fflush(stdout);
        }
    }
    return 0;
}
