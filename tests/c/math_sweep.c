/* Sweep driver for runtime_c/aotc_math.h (run by tests/test_math.py).
 *
 *   math_sweep sweep COARSE DENSE   every COARSE-th float bit pattern, plus every DENSE-th
 *                                   one (in value order) of each function's busy range
 *   math_sweep full NAME [LO HI]    every bit pattern in [LO, HI) (hex), one function
 *   math_sweep specials             special values
 *   math_sweep bench N REPS         ns per element of the fast, exact and libm loops
 *
 * A sweep prints one line per function: the largest distance in ulp from the float64
 * reference rounded to float (ordered bit patterns, so subnormals count like the rest),
 * the largest error in fractional ulp of the unrounded reference, a checksum of every
 * output (NaN counted as one pattern), and how many results had the wrong class
 * (NaN, infinity or sign of zero). libm is used here only as the reference. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aotc_math.h"

typedef float (*unary_f32)(float);
typedef void (*loop_f32)(const float *, float *, int64_t);

static double ref_exp(double x) { return exp(x); }
static double ref_log(double x) { return log(x); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_erf(double x) { return erf(x); }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static float libm_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

typedef struct {
    const char *name;
    unary_f32 fn;
    double (*ref)(double);
    float lo, hi; /* busy range for the dense part of a sweep */
    loop_f32 loop;
    float (*libm)(float);
} math_fn;

static const math_fn FUNCS[] = {
    {"exact_exp", aotc_exact_expf, ref_exp, -104.0f, 89.0f, aotc_exact_exp_f32, expf},
    {"exact_log", aotc_exact_logf, ref_log, 0.0f, INFINITY, aotc_exact_log_f32, logf},
    {"exact_tanh", aotc_exact_tanhf, ref_tanh, -9.1f, 9.1f, aotc_exact_tanh_f32, tanhf},
    {"exact_erf", aotc_exact_erff, ref_erf, -4.0f, 4.0f, aotc_exact_erf_f32, erff},
    {"exact_sigmoid", aotc_exact_sigmoidf, ref_sigmoid, -104.0f, 18.0f, aotc_exact_sigmoid_f32,
     libm_sigmoidf},
    {"fast_exp", aotc_fast_expf, ref_exp, -104.0f, 89.0f, aotc_fast_exp_f32, expf},
    {"fast_log", aotc_fast_logf, ref_log, 0.0f, INFINITY, aotc_fast_log_f32, logf},
    {"fast_tanh", aotc_fast_tanhf, ref_tanh, -9.1f, 9.1f, aotc_fast_tanh_f32, tanhf},
    {"fast_erf", aotc_fast_erff, ref_erf, -4.0f, 4.0f, aotc_fast_erf_f32, erff},
    {"fast_sigmoid", aotc_fast_sigmoidf, ref_sigmoid, -104.0f, 18.0f, aotc_fast_sigmoid_f32,
     libm_sigmoidf},
};
#define NFUNCS ((int)(sizeof FUNCS / sizeof FUNCS[0]))

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* bit patterns in value order: -0 and +0 both 0 */
static int64_t ordered(uint32_t b) {
    return (b & 0x80000000u) ? -(int64_t)(b & 0x7fffffffu) : (int64_t)b;
}

static uint32_t from_ordered(int64_t o) {
    return o < 0 ? 0x80000000u | (uint32_t)(-o) : (uint32_t)o;
}

typedef struct {
    int64_t max_ulp;
    uint32_t worst_input;
    double max_frac;
    uint64_t checksum;
    int64_t count, bad_class;
    uint32_t first_bad;
} stats;

static void stats_init(stats *s) {
    memset(s, 0, sizeof *s);
    s->checksum = 0xcbf29ce484222325ull;
}

static int fclass(float y) {
    if (y != y)
        return 0;
    if (isinf(y))
        return y > 0 ? 1 : 2;
    if (y == 0.0f)
        return bits_of(y) ? 3 : 4;
    return 5;
}

static void check_one(const math_fn *f, uint32_t b, stats *s) {
    float x = float_of(b);
    float y = f->fn(x);
    double refd = f->ref((double)x);
    float ref = (float)refd;
    uint32_t yb = y != y ? 0x7fc00000u : bits_of(y);
    for (int i = 0; i < 4; i++) {
        s->checksum ^= (yb >> (8 * i)) & 0xffu;
        s->checksum *= 0x100000001b3ull;
    }
    s->count++;
    if (fclass(y) != fclass(ref)) {
        if (!s->bad_class)
            s->first_bad = b;
        s->bad_class++;
        return;
    }
    if (y != y || isinf(y))
        return;
    int64_t d = llabs(ordered(bits_of(y)) - ordered(bits_of(ref)));
    if (d > s->max_ulp) {
        s->max_ulp = d;
        s->worst_input = b;
    }
    if (!isinf(ref)) {
        int e;
        frexp(refd, &e);
        double ulp = ldexp(1.0, (e - 24 < -149 ? -149 : e - 24));
        double frac = fabs((double)y - refd) / ulp;
        if (frac > s->max_frac)
            s->max_frac = frac;
    }
}

static void print_stats(const char *name, const stats *s) {
    printf("%s max_ulp=%" PRId64 " worst=0x%08" PRIx32 " max_frac=%.4f checksum=%016" PRIx64
           " count=%" PRId64 " bad_class=%" PRId64 " first_bad=0x%08" PRIx32 "\n",
           name, s->max_ulp, s->worst_input, s->max_frac, s->checksum, s->count, s->bad_class,
           s->first_bad);
}

static int sweep(int64_t coarse, int64_t dense) {
    for (int i = 0; i < NFUNCS; i++) {
        const math_fn *f = &FUNCS[i];
        stats s;
        stats_init(&s);
        for (uint64_t b = 0; b < 0x100000000ull; b += (uint64_t)coarse)
            check_one(f, (uint32_t)b, &s);
        int64_t hi = ordered(bits_of(f->hi));
        for (int64_t o = ordered(bits_of(f->lo)); o <= hi; o += dense)
            check_one(f, from_ordered(o), &s);
        print_stats(f->name, &s);
    }
    return 0;
}

static int full(const char *name, uint64_t lo, uint64_t hi) {
    for (int i = 0; i < NFUNCS; i++) {
        if (strcmp(FUNCS[i].name, name))
            continue;
        stats s;
        stats_init(&s);
        for (uint64_t b = lo; b < hi; b++)
            check_one(&FUNCS[i], (uint32_t)b, &s);
        print_stats(name, &s);
        return 0;
    }
    fprintf(stderr, "unknown function %s\n", name);
    return 2;
}

/* ---- special values ------------------------------------------------------------- */

static int n_checked, n_failed;

/* want_bits: the exact result; or, with want_bits == ANY_NAN, any NaN */
#define ANY_NAN 0xffffffffu
static void expect_bits(const char *what, float x, float y, uint32_t want_bits) {
    n_checked++;
    int ok = want_bits == ANY_NAN ? y != y : bits_of(y) == want_bits;
    if (!ok) {
        n_failed++;
        printf("FAIL %s(%a = 0x%08" PRIx32 ") = %a (0x%08" PRIx32 "), want 0x%08" PRIx32 "\n",
               what, x, bits_of(x), y, bits_of(y), want_bits);
    }
}

/* within max_ulp of the reference, same class (zero sign, infinity) */
static void expect_near(const math_fn *f, float x, int64_t max_ulp) {
    n_checked++;
    float y = f->fn(x), ref = (float)f->ref((double)x);
    if (fclass(y) != fclass(ref) || (fclass(y) == 5 &&
        llabs(ordered(bits_of(y)) - ordered(bits_of(ref))) > max_ulp)) {
        n_failed++;
        printf("FAIL %s(%a) = %a, reference %a\n", f->name, x, y, ref);
    }
}

static const math_fn *find(const char *name) {
    for (int i = 0; i < NFUNCS; i++)
        if (!strcmp(FUNCS[i].name, name))
            return &FUNCS[i];
    return NULL;
}

static int specials(void) {
    const float nan_q = float_of(0x7fc00000u), nan_neg = float_of(0xffc12345u);
    const float snan = float_of(0x7f800001u), inf = INFINITY;
    const float tiny = float_of(1u), sub = float_of(0x00400000u), minnorm = float_of(0x00800000u);
    const char *kinds[2] = {"exact", "fast"};
    for (int kind = 0; kind < 2; kind++) {
        char name[32];
        int64_t bound = 2;
#define FN(base) (snprintf(name, sizeof name, "%s_%s", kinds[kind], base), find(name))
        const math_fn *e = FN("exp"), *l = FN("log"), *t = FN("tanh"), *r = FN("erf"),
                      *s = FN("sigmoid");
#undef FN
        const math_fn *all[5] = {e, l, t, r, s};
        for (int i = 0; i < 5; i++) {
            expect_bits(all[i]->name, nan_q, all[i]->fn(nan_q), ANY_NAN);
            expect_bits(all[i]->name, nan_neg, all[i]->fn(nan_neg), ANY_NAN);
            expect_bits(all[i]->name, snan, all[i]->fn(snan), ANY_NAN);
        }
        /* exp */
        expect_bits(e->name, inf, e->fn(inf), 0x7f800000u);
        expect_bits(e->name, -inf, e->fn(-inf), 0x00000000u);
        expect_bits(e->name, 0.0f, e->fn(0.0f), 0x3f800000u);
        expect_bits(e->name, -0.0f, e->fn(-0.0f), 0x3f800000u);
        expect_bits(e->name, tiny, e->fn(tiny), 0x3f800000u);
        expect_bits(e->name, -tiny, e->fn(-tiny), 0x3f800000u);
        /* overflow threshold: the largest float whose exp rounds below inf, and the next */
        expect_near(e, float_of(0x42b17217u), bound);
        expect_bits(e->name, float_of(0x42b17217u), e->fn(float_of(0x42b17217u)), 0x7f7fff84u);
        expect_bits(e->name, float_of(0x42b17218u), e->fn(float_of(0x42b17218u)), 0x7f800000u);
        expect_bits(e->name, 1000.0f, e->fn(1000.0f), 0x7f800000u);
        /* gradual underflow down to the last subnormal, then +0 */
        for (float x = -87.0f; x > -104.5f; x -= 0.0625f)
            expect_near(e, x, bound);
        expect_bits(e->name, float_of(0xc2cff1b4u), e->fn(float_of(0xc2cff1b4u)), 0x00000001u);
        expect_bits(e->name, float_of(0xc2cff1b5u), e->fn(float_of(0xc2cff1b5u)), 0x00000000u);
        expect_bits(e->name, -104.0f, e->fn(-104.0f), 0x00000000u);
        expect_bits(e->name, -1000.0f, e->fn(-1000.0f), 0x00000000u);
        /* log */
        expect_bits(l->name, inf, l->fn(inf), 0x7f800000u);
        expect_bits(l->name, -inf, l->fn(-inf), ANY_NAN);
        expect_bits(l->name, 0.0f, l->fn(0.0f), 0xff800000u);
        expect_bits(l->name, -0.0f, l->fn(-0.0f), 0xff800000u);
        expect_bits(l->name, -1.0f, l->fn(-1.0f), ANY_NAN);
        expect_bits(l->name, -tiny, l->fn(-tiny), ANY_NAN);
        expect_bits(l->name, 1.0f, l->fn(1.0f), 0x00000000u);
        expect_near(l, tiny, bound);
        expect_near(l, sub, bound);
        expect_near(l, minnorm, bound);
        expect_near(l, float_of(0x7f7fffffu), bound);
        expect_near(l, float_of(0x3f7fffffu), bound);
        expect_near(l, float_of(0x3f800001u), bound);
        /* tanh, erf: odd, +-1 at the ends, zero sign kept, subnormals */
        const math_fn *odd[2] = {t, r};
        for (int i = 0; i < 2; i++) {
            expect_bits(odd[i]->name, inf, odd[i]->fn(inf), 0x3f800000u);
            expect_bits(odd[i]->name, -inf, odd[i]->fn(-inf), 0xbf800000u);
            expect_bits(odd[i]->name, 0.0f, odd[i]->fn(0.0f), 0x00000000u);
            expect_bits(odd[i]->name, -0.0f, odd[i]->fn(-0.0f), 0x80000000u);
            expect_bits(odd[i]->name, 50.0f, odd[i]->fn(50.0f), 0x3f800000u);
            expect_bits(odd[i]->name, -50.0f, odd[i]->fn(-50.0f), 0xbf800000u);
            expect_near(odd[i], tiny, bound);
            expect_near(odd[i], -tiny, bound);
            expect_near(odd[i], sub, bound);
            expect_near(odd[i], -sub, bound);
            expect_near(odd[i], minnorm, bound);
        }
        expect_bits(t->name, tiny, t->fn(tiny), 0x00000001u);
        /* sigmoid */
        expect_bits(s->name, inf, s->fn(inf), 0x3f800000u);
        expect_bits(s->name, -inf, s->fn(-inf), 0x00000000u);
        expect_bits(s->name, 0.0f, s->fn(0.0f), 0x3f000000u);
        expect_bits(s->name, -0.0f, s->fn(-0.0f), 0x3f000000u);
        expect_bits(s->name, 100.0f, s->fn(100.0f), 0x3f800000u);
        for (float x = -87.0f; x > -104.5f; x -= 0.0625f)
            expect_near(s, x, bound);
        expect_bits(s->name, -200.0f, s->fn(-200.0f), 0x00000000u);
    }
    printf("specials: %d passed, %d failed\n", n_checked - n_failed, n_failed);
    return n_failed != 0;
}

/* ---- speed ---------------------------------------------------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine may be shared */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float sink;

/* the best of 5 timings of reps passes */
static double time_loop(loop_f32 loop, float (*fn)(float), const float *x, float *y, int64_t n,
                        int reps) {
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now();
        for (int r = 0; r < reps; r++) {
            if (loop) {
                loop(x, y, n);
            } else {
                for (int64_t i = 0; i < n; i++)
                    y[i] = fn(x[i]);
            }
            sink = y[r % n];
        }
        double t = (now() - t0) * 1e9 / ((double)n * reps);
        best = t < best ? t : best;
    }
    return best;
}

static int bench(int64_t n, int reps) {
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    if (!x || !y)
        return 1;
    printf("%-8s %10s %10s %10s   (ns per element, %" PRId64 " elements)\n", "function",
           "fast", "exact", "libm", n);
    const char *names[5] = {"exp", "log", "tanh", "erf", "sigmoid"};
    for (int i = 0; i < 5; i++) {
        const math_fn *fast = &FUNCS[5 + i], *exact = &FUNCS[i];
        uint32_t state = 12345u;
        for (int64_t j = 0; j < n; j++) {
            state = state * 1664525u + 1013904223u;
            float u = (float)(state >> 8) * 0x1p-24f; /* [0, 1) */
            x[j] = i == 1 ? 1e-3f + 100.0f * u : -10.0f + 20.0f * u;
        }
        double tf = time_loop(fast->loop, NULL, x, y, n, reps);
        double te = time_loop(exact->loop, NULL, x, y, n, reps);
        double tl = time_loop(NULL, fast->libm, x, y, n, reps);
        printf("%-8s %10.3f %10.3f %10.3f\n", names[i], tf, te, tl);
    }
    free(x);
    free(y);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "sweep"))
        return sweep(atoll(argv[2]), atoll(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "full"))
        return full(argv[2], argc > 3 ? strtoull(argv[3], NULL, 16) : 0,
                    argc > 4 ? strtoull(argv[4], NULL, 16) : 0x100000000ull);
    if (argc == 2 && !strcmp(argv[1], "specials"))
        return specials();
    if (argc == 4 && !strcmp(argv[1], "bench"))
        return bench(atoll(argv[2]), atoi(argv[3]));
    fprintf(stderr, "usage: math_sweep sweep COARSE DENSE | full NAME [LO HI] | specials | "
                    "bench N REPS\n");
    return 2;
}
