/* aotc runtime: a small persistent thread pool.
 *
 * aotc_parallel_for(pool, count, fn, arg) calls fn(arg, i) once for every i in
 * [0, count), spread over the pool's threads and the caller. How work is cut into
 * the `count` pieces is the caller's business and must depend on the shape only, so
 * results never depend on the thread count. Nothing is allocated per dispatch. A NULL
 * pool runs every piece on the calling thread (a kernel's task that calls another
 * kernel).
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
AOTC_FN int aotc_pool_far(aotc_pool *pool) {
  (void)pool;
#if defined(AOTC_POOL_FAR)
  return AOTC_POOL_FAR;
#else
  return 0;
#endif
}
AOTC_FN void aotc_parallel_for(aotc_pool *pool, int64_t count, aotc_task_fn fn, void *arg) {
  int64_t i;
  (void)pool;
  for (i = 0; i < count; i++) fn(arg, i);
}

#else

#include <pthread.h>
#include <sched.h>
#include <sys/time.h>

/* A worker that finished a piece spins this long (microseconds) for the next dispatch
 * before it sleeps: a model dispatches every few microseconds, waking a sleeping
 * thread costs about as much as a small kernel, and the scheduler may wake it on the
 * caller's core (seen on a 2-core VM: a 2-thread MLP as slow as 1 thread, unless its
 * worker spun through the caller's pauses between calls). */
#ifndef AOTC_POOL_SPIN_US
#define AOTC_POOL_SPIN_US 10000
#endif
/* A spinning thread yields its core every this many pauses, so that a thread that
 * shares the core with it (a worker put on the caller's) gets to run. */
#define AOTC_POOL_PAUSES_PER_YIELD 64

/* After a sleep the scheduler often wakes a worker on the core of the caller that woke
 * it (on a VM an idle vCPU can look busy), where it gets no time while the caller
 * computes: on a 2-vCPU VM a 2-thread product ran at 1-thread speed for 10 ms and more
 * after every pause. So a worker that sees a dispatch while on the caller's core moves
 * off it, by a CPU-affinity mask without that core, put back at once (the move stays).
 * Linux only, with _GNU_SOURCE (the generated C defines it); elsewhere a no-op. */
#if defined(__linux__) && defined(CPU_SET)
#define AOTC_POOL_CPU_() sched_getcpu()
AOTC_FN void aotc_pool_leave_cpu_(int cpu, int threads) {
  cpu_set_t all, others;
  if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < threads) return;
  others = all;
  CPU_CLR(cpu, &others);
  if (sched_setaffinity(0, sizeof others, &others) == 0) sched_setaffinity(0, sizeof all, &all);
}
#else
#define AOTC_POOL_CPU_() (-1)
#define aotc_pool_leave_cpu_(cpu, threads) ((void)0)
#endif

typedef struct aotc_pool {
  pthread_mutex_t config;   /* serializes aotc_pool_set_threads */
  pthread_mutex_t lock;     /* sleeping and waking; guards busy, sleeping, nworkers */
  pthread_mutex_t atomics;  /* the atomic operations, where the compiler has none */
  pthread_cond_t wake, done;
  pthread_t workers[AOTC_MAX_THREADS];
  int nworkers, busy, sleeping;
  /* One dispatch: fn, arg and next are written before `ticket` announces it. */
  aotc_task_fn fn;
  void *arg;
  /* Read and written atomically (next: aotc_pool_claim_): */
  int64_t stop, next, finished;
  /* generation << 32 | AOTC_POOL_CLOSED_ | workers that joined. A worker joins only an
   * open dispatch of the generation it saw; the caller closes it once it has drained
   * the pieces and waits for the workers that joined, never for one still asleep. */
  int64_t ticket;
  int64_t caller_cpu;   /* the core of the last dispatching thread, -1 if unknown */
  int64_t far, probed_us;   /* aotc_pool_far's last answer, and when it was measured */
} aotc_pool;

#define AOTC_POOL_CLOSED_ ((int64_t)1 << 31)
#define AOTC_POOL_GENERATION_(ticket) ((ticket) >> 32)
#define AOTC_POOL_INIT {.config = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER, \
                        .atomics = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, \
                        .done = PTHREAD_COND_INITIALIZER, .caller_cpu = -1}

#if (defined(__GNUC__) || defined(__clang__)) && !defined(AOTC_POOL_PORTABLE)
#define AOTC_POOL_LOAD_(p, field) __atomic_load_n(&(p)->field, __ATOMIC_ACQUIRE)
#define AOTC_POOL_STORE_(p, field, v) __atomic_store_n(&(p)->field, (int64_t)(v), __ATOMIC_RELEASE)
#define AOTC_POOL_ADD_(p, field, v) __atomic_fetch_add(&(p)->field, (int64_t)(v), __ATOMIC_ACQ_REL)
#define AOTC_POOL_OR_(p, field, v) __atomic_fetch_or(&(p)->field, (int64_t)(v), __ATOMIC_ACQ_REL)
#define AOTC_POOL_CAS_(p, field, expected, v) \
  __atomic_compare_exchange_n(&(p)->field, &(expected), (v), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#if defined(__x86_64__) || defined(__i386__)
#define AOTC_POOL_PAUSE_() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define AOTC_POOL_PAUSE_() __asm__ __volatile__("yield")
#else
#define AOTC_POOL_PAUSE_() ((void)0)
#endif
#else   /* any C99 compiler: the same operations under a mutex */
enum { AOTC_POOL_OP_LOAD_, AOTC_POOL_OP_STORE_, AOTC_POOL_OP_ADD_, AOTC_POOL_OP_OR_, AOTC_POOL_OP_CAS_ };
AOTC_FN int64_t aotc_pool_atomic_(aotc_pool *p, int64_t *field, int op, int64_t v, int64_t expected) {
  int64_t old;
  pthread_mutex_lock(&p->atomics);
  old = *field;
  if (op == AOTC_POOL_OP_STORE_ || (op == AOTC_POOL_OP_CAS_ && old == expected)) *field = v;
  if (op == AOTC_POOL_OP_ADD_) *field = old + v;
  if (op == AOTC_POOL_OP_OR_) *field = old | v;
  pthread_mutex_unlock(&p->atomics);
  return old;
}
AOTC_FN int aotc_pool_cas_(aotc_pool *p, int64_t *field, int64_t *expected, int64_t v) {
  int64_t old = aotc_pool_atomic_(p, field, AOTC_POOL_OP_CAS_, v, *expected);
  if (old == *expected) return 1;
  *expected = old;
  return 0;
}
#define AOTC_POOL_LOAD_(p, field) aotc_pool_atomic_(p, &(p)->field, AOTC_POOL_OP_LOAD_, 0, 0)
#define AOTC_POOL_STORE_(p, field, v) ((void)aotc_pool_atomic_(p, &(p)->field, AOTC_POOL_OP_STORE_, (v), 0))
#define AOTC_POOL_ADD_(p, field, v) aotc_pool_atomic_(p, &(p)->field, AOTC_POOL_OP_ADD_, (v), 0)
#define AOTC_POOL_OR_(p, field, v) aotc_pool_atomic_(p, &(p)->field, AOTC_POOL_OP_OR_, (v), 0)
#define AOTC_POOL_CAS_(p, field, expected, v) aotc_pool_cas_(p, &(p)->field, &(expected), (v))
#define AOTC_POOL_PAUSE_() ((void)0)
#endif

/* The wall clock in microseconds, for spin budgets only. */
AOTC_FN int64_t aotc_pool_now_us_(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* Spin until ready(p, arg), or AOTC_POOL_SPIN_US pass (a clock that steps back ends
 * the spin); returns whether it became ready. */
AOTC_FN int aotc_pool_spin_(aotc_pool *p, int (*ready)(aotc_pool *, int64_t), int64_t arg) {
  int64_t start = aotc_pool_now_us_(), now;
  int i;
  for (i = 1; !ready(p, arg); i++) {
    AOTC_POOL_PAUSE_();
    if (i % AOTC_POOL_PAUSES_PER_YIELD == 0) {
      sched_yield();
      now = aotc_pool_now_us_();
      if (now < start || now - start >= AOTC_POOL_SPIN_US) return ready(p, arg);
    }
  }
  return 1;
}

/* A dispatch after generation `seen`, or a stop. */
AOTC_FN int aotc_pool_dispatched_(aotc_pool *p, int64_t seen) {
  return AOTC_POOL_GENERATION_(AOTC_POOL_LOAD_(p, ticket)) != seen || AOTC_POOL_LOAD_(p, stop);
}

/* All `joined` workers finished the current dispatch. */
AOTC_FN int aotc_pool_finished_(aotc_pool *p, int64_t joined) {
  return AOTC_POOL_LOAD_(p, finished) >= joined;
}

/* The next piece of the dispatch, -1 when none is left: `next` holds front << 32 | back,
 * the pieces not yet taken. The caller takes them from the front, the workers from the
 * back, so at two threads each thread works the same end of every step and mostly reads
 * what it wrote the step before from its own core's cache (MobileNetV2 and ResNet-50 at
 * two threads took 0.88x and 0.95x the time of pieces taken in turn from the front). */
AOTC_FN int64_t aotc_pool_claim_(aotc_pool *p, int from_back) {
  int64_t r = AOTC_POOL_LOAD_(p, next);
  for (;;) {
    const int64_t front = r >> 32, back = r & 0xFFFFFFFF;
    if (front >= back) return -1;
    if (AOTC_POOL_CAS_(p, next, r, from_back ? r - 1 : r + ((int64_t)1 << 32)))
      return from_back ? back - 1 : front;
  }
}

AOTC_FN void aotc_pool_drain_(aotc_pool *p, aotc_task_fn fn, void *arg, int from_back) {
  int64_t i;
  while ((i = aotc_pool_claim_(p, from_back)) >= 0) fn(arg, i);
}

/* Join the dispatch of `generation` if it is still open. */
AOTC_FN int aotc_pool_join_(aotc_pool *p, int64_t generation) {
  int64_t t = AOTC_POOL_LOAD_(p, ticket);
  while (AOTC_POOL_GENERATION_(t) == generation && !(t & AOTC_POOL_CLOSED_))
    if (AOTC_POOL_CAS_(p, ticket, t, t + 1)) return 1;
  return 0;
}

AOTC_FN void *aotc_pool_worker_(void *self) {
  aotc_pool *p = (aotc_pool *)self;
  int64_t seen = AOTC_POOL_GENERATION_(AOTC_POOL_LOAD_(p, ticket));   /* from now on */
  for (;;) {
    int64_t g, cpu;
    if (!aotc_pool_spin_(p, aotc_pool_dispatched_, seen)) {   /* sleep until a dispatch or stop */
      pthread_mutex_lock(&p->lock);
      p->sleeping++;
      while (!aotc_pool_dispatched_(p, seen)) pthread_cond_wait(&p->wake, &p->lock);
      p->sleeping--;
      pthread_mutex_unlock(&p->lock);
    }
    g = AOTC_POOL_GENERATION_(AOTC_POOL_LOAD_(p, ticket));
    if (g == seen) break;   /* stopped */
    seen = g;
    /* Before the join: on the caller's core this thread mostly runs once the caller
     * has drained the dispatch alone, and would never move if it joined first. */
    cpu = AOTC_POOL_LOAD_(p, caller_cpu);
    if (cpu >= 0 && AOTC_POOL_CPU_() == cpu) aotc_pool_leave_cpu_((int)cpu, p->nworkers + 1);
    if (!aotc_pool_join_(p, g)) continue;   /* the caller finished it alone */
    aotc_pool_drain_(p, p->fn, p->arg, 1);
    AOTC_POOL_ADD_(p, finished, 1);
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->lock);
  }
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
    AOTC_POOL_STORE_(p, stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
    pthread_mutex_lock(&p->lock);
    AOTC_POOL_STORE_(p, stop, 0);
    p->nworkers = 0;
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
  int64_t i, joined;
  int woke;
  if (p && count > 1 && count <= 0x7FFFFFFF && p->nworkers > 0) {   /* (next holds 32-bit ends) */
    pthread_mutex_lock(&p->lock);
    if (!p->busy) {
      int64_t generation = (AOTC_POOL_GENERATION_(AOTC_POOL_LOAD_(p, ticket)) + 1) & 0x7FFFFFFF;
      p->busy = 1;
      p->fn = fn;
      p->arg = arg;
      AOTC_POOL_STORE_(p, caller_cpu, AOTC_POOL_CPU_());
      AOTC_POOL_STORE_(p, next, count);   /* front 0, back count */
      AOTC_POOL_STORE_(p, finished, 0);
      AOTC_POOL_STORE_(p, ticket, generation << 32);   /* publishes the above */
      woke = p->sleeping > 0;
      if (woke) pthread_cond_broadcast(&p->wake);
      pthread_mutex_unlock(&p->lock);
      /* A worker just woken may have been put on this core: let it run now, see the
       * dispatch and move off (else it waits for this thread's time slice to end). */
      if (woke) sched_yield();
      aotc_pool_drain_(p, fn, arg, 0);
      joined = AOTC_POOL_OR_(p, ticket, AOTC_POOL_CLOSED_) & (AOTC_POOL_CLOSED_ - 1);
      aotc_pool_spin_(p, aotc_pool_finished_, joined);
      pthread_mutex_lock(&p->lock);
      while (!aotc_pool_finished_(p, joined)) pthread_cond_wait(&p->done, &p->lock);
      p->busy = 0;
      pthread_cond_broadcast(&p->done);
      pthread_mutex_unlock(&p->lock);
      return;
    }
    pthread_mutex_unlock(&p->lock);
  }
  for (i = 0; i < count; i++) fn(arg, i);
}

/* Whether the pool's threads are far apart: a cache line's round trip between the
 * caller and a worker slower than AOTC_POOL_FAR_NS, as between the dies of one CPU or
 * between sockets. A VM's vCPUs may move between one die and two every few seconds
 * (56 and 330 ns a round trip on the machine this was tuned on), so the answer is
 * measured again when it is older than AOTC_POOL_PROBE_US, by AOTC_POOL_PROBE_TRIPS
 * trips of a line between the two ends of a dispatch of two pieces (1-3 us near
 * there, some 11 far; a piece that waits past AOTC_POOL_PROBE_WAIT_US gives up and
 * the last answer stands). Kernels ask it on the calling thread, outside their
 * dispatches; results never depend on it. A build for a known machine may fix the answer with
 * -DAOTC_POOL_FAR=0 or 1; without atomics (AOTC_POOL_PORTABLE) it is 0. */
#ifndef AOTC_POOL_FAR_NS
#define AOTC_POOL_FAR_NS 250
#endif
#define AOTC_POOL_PROBE_US 20000
#define AOTC_POOL_PROBE_TRIPS 32
#define AOTC_POOL_PROBE_WAIT_US 50

#if !defined(AOTC_POOL_FAR) && !defined(AOTC_POOL_PORTABLE) && (defined(__GNUC__) || defined(__clang__))
typedef struct {
  int64_t partner;   /* 1 once the second piece started, -1 once the first gave up on it */
  int64_t line;      /* trip k: the first piece stores 2k + 1, the second answers 2k + 2; -1: given up */
  int64_t us;        /* the trips' time, -1 if they did not finish */
} aotc_pool_probe_;

/* Wait until *at is `want` (or, with `or_gave_up`, -1); 0 if AOTC_POOL_PROBE_WAIT_US
 * pass first. */
AOTC_FN int aotc_pool_probe_wait_(int64_t *at, int64_t want, int or_gave_up) {
  const int64_t start = aotc_pool_now_us_();
  int i;
  for (i = 1;; i++) {
    const int64_t v = __atomic_load_n(at, __ATOMIC_ACQUIRE);
    if (v == want || (or_gave_up && v == -1)) return v == want;
    AOTC_POOL_PAUSE_();
    if (i % AOTC_POOL_PAUSES_PER_YIELD == 0) {
      const int64_t now = aotc_pool_now_us_();
      if (now < start || now - start > AOTC_POOL_PROBE_WAIT_US) return 0;
    }
  }
}

AOTC_FN void aotc_pool_probe_piece_(void *arg, int64_t piece) {
  aotc_pool_probe_ *s = (aotc_pool_probe_ *)arg;
  int64_t k, expected = 0, start;
  if (piece == 1) {   /* the worker's end: answer each trip */
    if (!__atomic_compare_exchange_n(&s->partner, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    for (k = 0; k < AOTC_POOL_PROBE_TRIPS; k++) {
      if (!aotc_pool_probe_wait_(&s->line, 2 * k + 1, 1)) return;
      __atomic_store_n(&s->line, 2 * k + 2, __ATOMIC_RELEASE);
    }
    return;
  }
  if (!aotc_pool_probe_wait_(&s->partner, 1, 0) &&   /* (one thread ran both, or the worker slept) */
      __atomic_compare_exchange_n(&s->partner, &expected, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  start = aotc_pool_now_us_();
  for (k = 0; k < AOTC_POOL_PROBE_TRIPS; k++) {
    __atomic_store_n(&s->line, 2 * k + 1, __ATOMIC_RELEASE);
    if (!aotc_pool_probe_wait_(&s->line, 2 * k + 2, 0)) {
      __atomic_store_n(&s->line, -1, __ATOMIC_RELEASE);
      return;
    }
  }
  s->us = aotc_pool_now_us_() - start;
}
#endif

AOTC_FN int aotc_pool_far(aotc_pool *p) {
#if defined(AOTC_POOL_FAR)
  (void)p;
  return AOTC_POOL_FAR;
#elif defined(AOTC_POOL_PORTABLE) || !(defined(__GNUC__) || defined(__clang__))
  (void)p;
  return 0;
#else
  int64_t now, last;
  if (!p || p->nworkers == 0) return 0;
  now = aotc_pool_now_us_();
  last = AOTC_POOL_LOAD_(p, probed_us);
  if (now < last || now - last >= AOTC_POOL_PROBE_US) {
    aotc_pool_probe_ s = {0, 0, -1};
    AOTC_POOL_STORE_(p, probed_us, now);
    aotc_parallel_for(p, 2, aotc_pool_probe_piece_, &s);
    if (s.us >= 0) AOTC_POOL_STORE_(p, far, s.us * 1000 > (int64_t)AOTC_POOL_FAR_NS * AOTC_POOL_PROBE_TRIPS);
  }
  return (int)AOTC_POOL_LOAD_(p, far);
#endif
}

#endif
#endif
