/* aotc runtime: a small persistent thread pool.
 *
 * aotc_parallel_for(pool, count, fn, arg) calls fn(arg, i) once for every i in
 * [0, count), spread over the pool's threads and the caller. How work is cut into
 * the `count` pieces is the caller's business and must depend on the shape only, so
 * results never depend on the thread count. Nothing is allocated per dispatch.
 *
 * A pool serves one dispatch at a time; a second concurrent dispatch (another run of
 * the same model on another thread) simply runs its pieces on its own thread.
 * With AOTC_NO_THREADS the pool is a stub and every dispatch runs inline. */
#ifndef AOTC_THREADS_H_
#define AOTC_THREADS_H_

#include "aotc_base.h"

#define AOTC_MAX_THREADS 256

typedef void (*aotc_task_fn)(void *arg, int64_t index);

#ifdef AOTC_NO_THREADS

typedef struct aotc_pool { int unused; } aotc_pool;
#define AOTC_POOL_INIT {.unused = 0}
AOTC_FN void aotc_pool_set_threads(aotc_pool *pool, int n) { (void)pool; (void)n; }
AOTC_FN int aotc_pool_threads(aotc_pool *pool) { (void)pool; return 1; }
AOTC_FN void aotc_parallel_for(aotc_pool *pool, int64_t count, aotc_task_fn fn, void *arg) {
  int64_t i;
  (void)pool;
  for (i = 0; i < count; i++) fn(arg, i);
}

#else

#include <pthread.h>

typedef struct aotc_pool {
  pthread_mutex_t config;   /* serializes aotc_pool_set_threads */
  pthread_mutex_t lock;     /* guards the fields below */
  pthread_cond_t wake, done;
  pthread_t workers[AOTC_MAX_THREADS];
  int nworkers, stop, busy, pending;
  unsigned generation, start_generation;  /* workers begin from start_generation */
  aotc_task_fn fn;
  void *arg;
  int64_t count, next;
} aotc_pool;

#define AOTC_POOL_INIT {.config = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER, \
                        .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER}

AOTC_FN int64_t aotc_pool_claim_(aotc_pool *p) {
#if defined(__GNUC__) || defined(__clang__)
  return __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
#else
  int64_t i;
  pthread_mutex_lock(&p->lock);
  i = p->next++;
  pthread_mutex_unlock(&p->lock);
  return i;
#endif
}

AOTC_FN void aotc_pool_drain_(aotc_pool *p, aotc_task_fn fn, void *arg, int64_t count) {
  int64_t i;
  while ((i = aotc_pool_claim_(p)) < count) fn(arg, i);
}

AOTC_FN void *aotc_pool_worker_(void *self) {
  aotc_pool *p = (aotc_pool *)self;
  unsigned seen;
  pthread_mutex_lock(&p->lock);
  seen = p->start_generation;   /* not generation: a dispatch may already have begun */
  for (;;) {
    aotc_task_fn fn;
    void *arg;
    int64_t count;
    while (p->generation == seen && !p->stop) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    fn = p->fn;
    arg = p->arg;
    count = p->count;
    pthread_mutex_unlock(&p->lock);
    aotc_pool_drain_(p, fn, arg, count);
    pthread_mutex_lock(&p->lock);
    if (--p->pending == 0) pthread_cond_broadcast(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* Run with n threads in all (the caller counts as one); n <= 1 stops the workers. */
AOTC_FN void aotc_pool_set_threads(aotc_pool *p, int n) {
  int i, want = AOTC_MIN(AOTC_MAX(n, 1), AOTC_MAX_THREADS) - 1;
  pthread_mutex_lock(&p->config);
  if (want != p->nworkers) {
    pthread_mutex_lock(&p->lock);
    while (p->busy) pthread_cond_wait(&p->done, &p->lock);
    p->busy = 1;          /* keep dispatches out while workers change */
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
    pthread_mutex_lock(&p->lock);
    p->stop = 0;
    p->nworkers = 0;
    p->start_generation = p->generation;
    for (i = 0; i < want; i++) {
      if (pthread_create(&p->workers[i], NULL, aotc_pool_worker_, p) != 0) break;
      p->nworkers++;
    }
    p->busy = 0;
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->lock);
  }
  pthread_mutex_unlock(&p->config);
}

AOTC_FN int aotc_pool_threads(aotc_pool *p) { return p->nworkers + 1; }

AOTC_FN void aotc_parallel_for(aotc_pool *p, int64_t count, aotc_task_fn fn, void *arg) {
  int64_t i;
  if (count > 1 && p->nworkers > 0) {
    pthread_mutex_lock(&p->lock);
    if (!p->busy) {
      p->busy = 1;
      p->fn = fn;
      p->arg = arg;
      p->count = count;
      p->next = 0;
      p->pending = p->nworkers;
      p->generation++;
      pthread_cond_broadcast(&p->wake);
      pthread_mutex_unlock(&p->lock);
      aotc_pool_drain_(p, fn, arg, count);
      pthread_mutex_lock(&p->lock);
      while (p->pending > 0) pthread_cond_wait(&p->done, &p->lock);
      p->busy = 0;
      pthread_cond_broadcast(&p->done);
      pthread_mutex_unlock(&p->lock);
      return;
    }
    pthread_mutex_unlock(&p->lock);
  }
  for (i = 0; i < count; i++) fn(arg, i);
}

#endif
#endif
