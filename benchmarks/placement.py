"""Where the host put CPUs 0 and 1: on one L3, or on two.

A VM's two vCPUs may share a last-level cache or sit on different dies, and on the
machine these benchmarks were tuned on the host moved them between the two every few
seconds: the round trip of a cache line between the CPUs went from 56 ns to 330 ns and
back. On two L3s every piece of data one thread wrote and the other reads crosses the
dies, and a two-thread run of ResNet-50 took 1.2-1.3x the time (onnxruntime's 1.1x).
So the benchmarks label each measurement with the placement it ran under (labeller()).
"""
import os
import statistics

import native

ROUND_TRIP_C = r"""
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

static volatile int64_t flag __attribute__((aligned(64)));

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set);
}

static void *answer(void *trips) {
  int64_t i, n = *(const int64_t *)trips;
  if (pin(1) != 0) return NULL;
  for (i = 0; i < n; i++) {
    while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != 2 * i + 1) {}
    __atomic_store_n(&flag, 2 * i + 2, __ATOMIC_RELEASE);
  }
  return NULL;
}

/* Nanoseconds per round trip of a cache line between CPUs 0 and 1 over `trips` trips;
 * -1 where the thread cannot run on both. The caller's affinity is restored. */
double round_trip_ns(int64_t trips) {
  cpu_set_t saved;
  pthread_t thread;
  struct timespec t0, t1;
  int64_t i;
  if (sched_getaffinity(0, sizeof saved, &saved) != 0 || !CPU_ISSET(0, &saved) || !CPU_ISSET(1, &saved))
    return -1.0;
  __atomic_store_n(&flag, 0, __ATOMIC_RELEASE);
  if (pin(0) != 0 || pthread_create(&thread, NULL, answer, &trips) != 0) {
    sched_setaffinity(0, sizeof saved, &saved);
    return -1.0;
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < trips; i++) {
    __atomic_store_n(&flag, 2 * i + 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != 2 * i + 2) {}
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pthread_join(thread, NULL);
  sched_setaffinity(0, sizeof saved, &saved);
  return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)trips;
}
"""
TRIPS = 50000        # about 3-17 ms
SPLIT_NS = 200       # between the two placements seen (56 and 330 ns)
_module = None


def round_trip_ns():
    """The round trip between CPUs 0 and 1 (ns), or None where it cannot be measured."""
    global _module
    if not hasattr(os, "sched_getaffinity") or not {0, 1} <= os.sched_getaffinity(0):
        return None
    if _module is None:
        _module = native.load("_aotc_bench_round_trip", "double round_trip_ns(int64_t trips);",
                              ROUND_TRIP_C, extra_compile_args=["-O2"], libraries=["pthread"])
    ns = _module.lib.round_trip_ns(TRIPS)
    return ns if ns > 0 else None


def split():
    """True when CPUs 0 and 1 are on different L3s now, False on one, None unknown."""
    ns = round_trip_ns()
    return None if ns is None else ns > SPLIT_NS


def labeller(threads):
    """What labels a pair of blocks at `threads` threads: split, or None at one thread,
    where the placement changes nothing."""
    return split if threads > 1 else None


def medians(pairs):
    """[(placement, median ratio, pairs)] of interleaved()'s labelled pairs, for each
    placement some pairs ran under."""
    out = []
    for tag, where in ((False, "one L3"), (True, "two L3s")):
        ratios = [ratio for t, ratio in pairs if t is tag]
        if ratios:
            out.append((where, statistics.median(ratios), len(ratios)))
    return out
