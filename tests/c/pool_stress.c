/* Stress for aotc_threads.h: many dispatches of every small size, the thread count
 * changing between them, and a second caller dispatching on the same pool at once.
 * Every piece must run exactly once per dispatch, and the pieces the caller runs must
 * come before all that the workers run (the caller takes them from the front, the
 * workers from the back). Prints "ok" or what went wrong. */
/* As the generated C: with Linux's affinity calls (a worker leaves the caller's core). */
#ifndef WITHOUT_GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include "aotc_threads.h"

#define PIECES 67
#define ROUNDS 4000

static aotc_pool pool = AOTC_POOL_INIT;

typedef struct {
  pthread_t caller;
  int64_t hits[PIECES];
  int by_caller[PIECES];
} counts;

static void count_piece(void *arg, int64_t i) {
  counts *c = (counts *)arg;
  c->hits[i]++;   /* each piece once per dispatch: no two threads share an index */
  c->by_caller[i] = pthread_equal(pthread_self(), c->caller) != 0;
}

/* Pieces the caller ran after one a worker ran. */
static int out_of_order(const counts *c, int64_t n) {
  int64_t i, first_worker = n;
  int errors = 0;
  for (i = 0; i < n; i++) {
    if (!c->by_caller[i] && first_worker == n) first_worker = i;
    errors += c->by_caller[i] && i > first_worker;
  }
  return errors;
}

static int run_rounds(int salt) {
  counts c;
  int r, errors = 0;
  int64_t i;
  c.caller = pthread_self();
  for (r = 0; r < ROUNDS; r++) {
    int64_t n = (r * 7 + salt) % PIECES;
    for (i = 0; i < PIECES; i++) c.hits[i] = 0;
    aotc_parallel_for(&pool, n, count_piece, &c);
    for (i = 0; i < PIECES; i++) errors += c.hits[i] != (i < n);
    errors += out_of_order(&c, n);
  }
  return errors;
}

static void *second_caller(void *arg) {
  *(int *)arg = run_rounds(3);
  return NULL;
}

int main(void) {
  int errors = 0, other = 0, threads;
  pthread_t t;
  for (threads = 1; threads <= 4; threads++) {
    aotc_pool_set_threads(&pool, threads);
    errors += run_rounds(threads);
  }
  aotc_pool_set_threads(&pool, 3);
  if (pthread_create(&t, NULL, second_caller, &other) != 0) return 2;
  errors += run_rounds(1);
  pthread_join(t, NULL);
  aotc_pool_set_threads(&pool, 1);
  if (errors + other) {
    printf("%d pieces ran a wrong number of times or out of order\n", errors + other);
    return 1;
  }
  printf("ok\n");
  return 0;
}
