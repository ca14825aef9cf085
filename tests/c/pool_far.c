/* aotc_pool_far: 0 without workers, 0 or 1 with, never a hang: not when the worker
 * sleeps, not when one thread runs both pieces of the probe, not when asked from inside
 * a dispatch (the pool busy); fixed by -DAOTC_POOL_FAR. Prints "ok" or what went wrong. */
#define _GNU_SOURCE
#include <stdio.h>
#include "aotc_threads.h"

#if defined(AOTC_POOL_FAR)
#define ALONE AOTC_POOL_FAR   /* the answer without workers */
#define PROBES 0
#elif defined(AOTC_POOL_PORTABLE)
#define ALONE 0
#define PROBES 0
#else
#define ALONE 0
#define PROBES 1   /* the probe's own pieces, to call here */
#endif

static aotc_pool pool = AOTC_POOL_INIT;
static int inner_answer = -1;

static void nothing(void *arg, int64_t piece) {
  (void)arg;
  (void)piece;
}

static void ask_inside(void *arg, int64_t piece) {   /* the pool is busy: the probe runs inline */
  (void)arg;
  if (piece == 0) {
    AOTC_POOL_STORE_(&pool, probed_us, 0);
    inner_answer = aotc_pool_far(&pool);
  }
}

static int fail(const char *what) {
  printf("%s\n", what);
  return 1;
}

int main(void) {
  int i, measured = 0;
  if (aotc_pool_far(NULL) != ALONE || aotc_pool_far(&pool) != ALONE) return fail("the answer without workers");
  aotc_pool_set_threads(&pool, 2);
  for (i = 0; i < 300; i++) {
    int far;
    if (i % 50 == 0) {   /* a worker asleep after a pause past its spin */
      struct timespec pause = {0, 12 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
    aotc_parallel_for(&pool, 4, nothing, NULL);
    AOTC_POOL_STORE_(&pool, probed_us, 0);
    far = aotc_pool_far(&pool);
    if (far != 0 && far != 1) return fail("an answer other than 0 or 1");
#if defined(AOTC_POOL_FAR)
    if (far != AOTC_POOL_FAR) return fail("not the fixed answer");
#endif
#if PROBES
    {   /* the probe as aotc_pool_far runs it, to see that the trips get timed */
      aotc_pool_probe_ s = {0, 0, -1};
      aotc_parallel_for(&pool, 2, aotc_pool_probe_piece_, &s);
      measured += s.us >= 0;
    }
#else
    measured++;
#endif
  }
  if (measured == 0) return fail("no probe was timed");
#if PROBES
  {   /* one thread runs both pieces: the first gives up, the second returns at once */
    aotc_pool_probe_ s = {0, 0, -1};
    aotc_pool_probe_piece_(&s, 0);
    aotc_pool_probe_piece_(&s, 1);
    if (s.us != -1) return fail("a probe timed without a partner");
  }
#endif
  aotc_parallel_for(&pool, 2, ask_inside, NULL);
  if (inner_answer != 0 && inner_answer != 1) return fail("no answer inside a dispatch");
  aotc_pool_set_threads(&pool, 1);
  printf("ok\n");
  return 0;
}
