/* A C trainer for the end-to-end tests of `goldminer profile` and `goldminer run`:
 * tests/e2e/sleep_trainer.py over the client C ABI (include/goldminer/client.h),
 * built as ${PROJECT_BINARY_DIR}/tests/sleep_trainer.
 *
 * It connects to the run ($GOLDMINER_ADDR, $RANK, $WORLD_SIZE from `goldminer run`),
 * reads the batches of epoch 0 and "trains" on each by sleeping --step-ms
 * milliseconds (no CPU, like a step that waits for the GPU).
 *
 *   --step-ms MS      sleep per batch (default 0)
 *   --steps N         stop after N batches and exit 0 (default: the whole epoch)
 *   --crash-after K   exit 1 after K batches, without closing the client
 *   --own-log FILE    append "PID STEP NS" per step: the trainer's own measure of
 *                     the step's compute (from the return of one read to the start
 *                     of the next), as tests/e2e/sleep_trainer.py does
 *
 * At a normal end it prints "sleep_trainer: STEPS steps, SAMPLES samples". A client
 * error prints gm_last_error() and exits 2; bad flags exit 64.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/client.h"

struct options {
  double step_ms;
  long steps;       /* -1: the whole epoch */
  long crash_after; /* -1: never */
  const char* own_log; /* NULL: none */
};

static int parse_number(const char* text, double* out) {
  char* end = NULL;
  errno = 0;
  *out = strtod(text, &end);
  return errno == 0 && end != text && *end == '\0' && *out >= 0;
}

static int parse_options(int argc, char** argv, struct options* o) {
  o->step_ms = 0;
  o->steps = -1;
  o->crash_after = -1;
  o->own_log = NULL;
  for (int i = 1; i < argc; ++i) {
    double value = 0;
    if (strcmp(argv[i], "--own-log") == 0 && i + 1 < argc) {
      o->own_log = argv[++i];
      continue;
    }
    if (i + 1 >= argc || !parse_number(argv[i + 1], &value)) {
      fprintf(stderr, "sleep_trainer: %s needs a number >= 0\n", argv[i]);
      return 0;
    }
    if (strcmp(argv[i], "--step-ms") == 0) {
      o->step_ms = value;
    } else if (strcmp(argv[i], "--steps") == 0) {
      o->steps = (long)value;
    } else if (strcmp(argv[i], "--crash-after") == 0) {
      o->crash_after = (long)value;
    } else {
      fprintf(stderr,
              "sleep_trainer: unknown flag %s (--step-ms, --steps, --crash-after, --own-log)\n",
              argv[i]);
      return 0;
    }
    ++i;
  }
  return 1;
}

static void sleep_ms(double ms) {
  struct timespec t;
  t.tv_sec = (time_t)(ms / 1000);
  t.tv_nsec = (long)((ms - (double)t.tv_sec * 1000) * 1e6);
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static long long monotonic_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Appends "PID STEP NS" to the --own-log file (fd >= 0), one write per line. */
static void own_log(int fd, long step, long long ns) {
  char line[96];
  int n = snprintf(line, sizeof line, "%ld %ld %lld\n", (long)getpid(), step, ns);
  if (fd >= 0 && n > 0) (void)!write(fd, line, (size_t)n);
}

int main(int argc, char** argv) {
  struct options o;
  if (!parse_options(argc, argv, &o)) return 64;
  gm_client* client = NULL;
  if (gm_client_open(NULL, -1, -1, &client) != GM_OK) {
    fprintf(stderr, "sleep_trainer: %s\n", gm_last_error());
    return 2;
  }
  int own = o.own_log ? open(o.own_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  long steps = 0;
  long long got = -1;
  unsigned long long samples = 0;
  while (o.steps < 0 || steps < o.steps) {
    gm_batch* batch = NULL;
    if (got >= 0) own_log(own, steps - 1, monotonic_ns() - got);
    const int rc = gm_client_next(client, &batch);
    got = monotonic_ns();
    if (rc != GM_OK) {
      fprintf(stderr, "sleep_trainer: %s\n", gm_last_error());
      gm_client_close(client);
      return 2;
    }
    if (batch == NULL) break; /* the end of the epoch */
    sleep_ms(o.step_ms);
    ++steps;
    samples += gm_batch_size(batch);
    gm_batch_free(batch);
    if (o.crash_after >= 0 && steps >= o.crash_after) {
      fprintf(stderr, "sleep_trainer: crashing after %ld steps, as asked\n", steps);
      exit(1);
    }
  }
  gm_client_close(client);
  printf("sleep_trainer: %ld steps, %llu samples\n", steps, samples);
  return 0;
}
