// runtime [-t] N cmd args...: runs cmd N times, one after another, and
// prints each wall time in microseconds, one a line. The command's standard
// output goes to /dev/null; its standard error is this program's. With -t,
// each run gets GOMPI_STARTUP_T0 set to the CLOCK_MONOTONIC time (ns) just
// before it is spawned, so that gompi's start-up stamps (GOMPI_STARTUP_TRACE)
// count from then and show the launcher's own exec too. posix_spawn (vfork)
// keeps the timer's own cost out of the figure.
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
  int stamp = 0, a = 1;
  if (argc > 1 && strcmp(argv[1], "-t") == 0) {
    stamp = 1;
    a++;
  }
  if (argc < a + 2) {
    fprintf(stderr, "usage: runtime [-t] N cmd [args...]\n");
    return 2;
  }
  int n = atoi(argv[a]);
  char **cmd = argv + a + 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  for (int i = 0; i < n; i++) {
    struct timespec t0, t1;
    pid_t pid;
    int st;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (stamp) {
      char v[32];
      snprintf(v, sizeof v, "%lld", (long long)t0.tv_sec * 1000000000LL + t0.tv_nsec);
      setenv("GOMPI_STARTUP_T0", v, 1);
    }
    if (posix_spawnp(&pid, cmd[0], &fa, NULL, cmd, environ)) {
      perror(cmd[0]);
      return 1;
    }
    if (waitpid(pid, &st, 0) < 0) {
      perror("waitpid");
      return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fprintf(stderr, "runtime: %s: status 0x%x\n", cmd[0], st);
    printf("%ld\n", (long)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000));
    fflush(stdout);
  }
  return 0;
}
