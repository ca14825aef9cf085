/* aotc_pool_leave_cpu_ moves the calling thread off a core and leaves its CPU-affinity
 * mask as it was. Run where at least two cores are allowed. Prints "ok" or what went
 * wrong. */
#define _GNU_SOURCE
#include <stdio.h>
#include "aotc_threads.h"

int main(void) {
  cpu_set_t before, after;
  int attempt, from, to = -1;
  if (sched_getaffinity(0, sizeof before, &before) != 0 || CPU_COUNT(&before) < 2) {
    printf("fewer than two cores allowed\n");
    return 2;
  }
  /* The scheduler may move the thread back on its own between the two reads: retry. */
  for (attempt = 0; attempt < 5; attempt++) {
    from = sched_getcpu();
    aotc_pool_leave_cpu_(from, 2);
    to = sched_getcpu();
    if (to != from) break;
  }
  if (to == from) {
    printf("still on core %d\n", from);
    return 1;
  }
  if (sched_getaffinity(0, sizeof after, &after) != 0 || !CPU_EQUAL(&before, &after)) {
    printf("the affinity mask changed\n");
    return 1;
  }
  printf("ok\n");
  return 0;
}
