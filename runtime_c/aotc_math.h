/* aotc runtime: elementary functions of aotc's own (exp, log, tanh, erf, sigmoid).
 *
 * Exact functions, aotc_exact_<f>f: the same bits on every machine, compiler and
 * optimisation level, each within 2 ulp of the correctly rounded result (about 0.5 ulp
 * measured, tests/test_math.py). They compute in double and round once to float, and
 * they call no libm function.
 *
 * Why contraction cannot change them: a compiler allowed to contract (-ffp-contract=fast,
 * gcc's default outside ISO mode) may fuse any product with an addition or subtraction
 * that uses it, even across statements, and a fused multiply-add rounds once where the
 * separate operations round twice. Here every product that feeds an addition or a
 * subtraction is exact in double: its two factors have at most 53 significant bits
 * together (a value rounded to float has 24, what remains of a double after taking its
 * float part has at most 29, a power of two has 1). An exact product rounds to itself,
 * so the fused and the separate forms give the same bits. Products that feed only a
 * multiplication, a division or a conversion cannot be fused. Keep this rule in every
 * edit; the test builds with and without contraction and compares every output.
 * Needs IEEE binary32/binary64 evaluated in their own precision (FLT_EVAL_METHOD 0: SSE,
 * NEON, not x87), round to nearest, subnormals kept (no flush-to-zero), no -ffast-math.
 *
 * Fast functions, aotc_fast_<f>f: float arithmetic without branches or tables, so that
 * a loop of them vectorizes (aotc_fast_<f>_f32 at the end; selections are bit-mask blends,
 * which vectorize on every x86-64 level where a conditional may stay a branch);
 * contraction allowed. The maximum error of each is stated next to it, in ulp against
 * the float64 result rounded to float, subnormal results included. */
#ifndef AOTC_MATH_H_
#define AOTC_MATH_H_

#include "aotc_base.h"

/* ---- bit access and exact-product helpers ------------------------------------------ */

/* y with the sign bit of s */
AOTC_FN float aotc_math_copysign_(float y, float s) {
    return aotc_f32_from_bits((aotc_f32_bits(y) & 0x7fffffffu) | (aotc_f32_bits(s) & 0x80000000u));
}

/* c ? a : b as a bit-mask blend: it vectorizes where a conditional may stay a branch */
AOTC_FN float aotc_math_select_(int c, float a, float b) {
    uint32_t mask = 0u - (uint32_t)(c != 0);
    return aotc_f32_from_bits((aotc_f32_bits(a) & mask) | (aotc_f32_bits(b) & ~mask));
}

/* x rounded to float precision. For |x| in [2^-126, 2^127] the rest x - hi(x) is exact
 * and has at most 29 significant bits, so hi(x) times a 29-bit value is exact. */
AOTC_FN double aotc_math_hi_(double x) { return (double)(float)x; }

/* 2^e as a double, for -1022 <= e <= 1023 */
AOTC_FN double aotc_math_pow2_(int32_t e) {
    uint64_t u = (uint64_t)(uint32_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* c + a*b where a*b is summed from exact partial products (a and b split into their float
 * part and the rest; the dropped product of the rests is below 2^-53 |a*b|): no rounding
 * depends on contraction. |a| and |b| in [2^-126, 2^127] or 0. */
AOTC_FN double aotc_math_mul_add_(double a, double b, double c) {
    double ah = aotc_math_hi_(a), al = a - ah;
    double bh = aotc_math_hi_(b), bl = b - bh;
    double high = ah * bh;
    double cross = ah * bl;
    cross = cross + al * bh;
    return c + (high + cross);
}

/* ---- exact exp core ---------------------------------------------------------------- */

/* 2^(j/64), j = 0..63, correctly rounded */
static const double aotc_math_exp_table_[64] = {
    0x1p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0, 0x1.0874518759bc8p+0,
    0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0, 0x1.11301d0125b51p+0, 0x1.1429aaea92dep+0,
    0x1.172b83c7d517bp+0, 0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
    0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0, 0x1.2d285a6e4030bp+0,
    0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0, 0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0,
    0x1.3dea64c123422p+0, 0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cdp+0,
    0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0, 0x1.56f4736b527dap+0,
    0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0, 0x1.6247eb03a5585p+0, 0x1.6623882552225p+0,
    0x1.6a09e667f3bcdp+0, 0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
    0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0, 0x1.868d99b4492edp+0,
    0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0, 0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e5p+0,
    0x1.9c49182a3f09p+0, 0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
    0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0, 0x1.bcc1e904bc1d2p+0,
    0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0, 0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0,
    0x1.d5818dcfba487p+0, 0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
    0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e454p+0, 0x1.fa7c1819e90d8p+0};

/* exp(x) = 2^e * t * (1 + m) for |x| <= 120: returns 2^e, sets *t = 2^(j/64) and *m =
 * expm1(x - (64 e + j) ln2/64), that argument at most 0.0055, m to about 2^-52 relative.
 * Constants: 64/ln2 rounded to float (so x's float part times it is exact; the multiple
 * of ln2/64 need not be the nearest); ln2/64 in two 38-bit parts (times k < 2^15: exact). */
AOTC_FN double aotc_math_exp_reduce_(double x, double *t, double *m) {
    double kd = aotc_math_hi_(x) * 0x1.715476p+6 + 0x1.8p52;
    kd = kd - 0x1.8p52;
    uint32_t kb = (uint32_t)((int32_t)kd + 65536);
    *t = aotc_math_exp_table_[kb & 63u];
    double r = x - kd * 0x1.62e42fefap-7;
    r = r - kd * 0x1.cf79abc9ep-46;
    /* r = rh + rl, rh a float, rl the (exact, 29-bit) rest; expm1(r) = rh + rh^2/2 + ...
     * + rl (1 + rh), the tail r^3/6 + r^4/24 + r^5/120 formed from float-sized factors */
    double rh = aotc_math_hi_(r), rl = r - rh;
    double r2 = rh * rh;
    double p = rh * (double)0x1.111112p-7f + (double)0x1.555556p-5f;
    p = aotc_math_hi_(p) * rh + 0x1.5555555555555p-3;
    double tail = aotc_math_hi_(r2) * aotc_math_hi_(rh * p);
    double s = 0.5 * r2 + tail;
    s = rl * rh + s;
    s = rl + s;
    *m = rh + s;
    return aotc_math_pow2_((int32_t)(kb >> 6) - 1024);
}

/* exp(x) in double for |x| <= 120 (relative error about 2^-50). The last product is by a
 * power of two, exact: the result may feed an addition. */
AOTC_FN double aotc_math_exp_double_(double x) {
    double t, m;
    double two_e = aotc_math_exp_reduce_(x, &t, &m);
    return two_e * aotc_math_mul_add_(t, m, t);
}

/* ---- exact functions --------------------------------------------------------------- */

AOTC_FN float aotc_exact_expf(float x) {
    if (x != x)
        return x + x;
    /* beyond these exp rounds to inf / +0 in float, and stays finite in double */
    double xd = x > 89.0f ? 89.0 : (x < -110.0f ? -110.0 : (double)x);
    return (float)aotc_math_exp_double_(xd);
}

AOTC_FN float aotc_exact_sigmoidf(float x) {
    if (x != x)
        return x + x;
    /* 1 / (1 + e^-|x|), or e^-|x| / (1 + e^-|x|) for negative x: no cancellation */
    double a = x < 0.0f ? -(double)x : (double)x;
    a = a > 120.0 ? 120.0 : a;
    double e = aotc_math_exp_double_(-a);
    double num = x < 0.0f ? e : 1.0;
    return (float)(num / (1.0 + e));
}

AOTC_FN float aotc_exact_tanhf(float x) {
    if (x != x)
        return x + x;
    /* tanh|x| = expm1(2|x|) / (expm1(2|x|) + 2); rounds to 1 beyond 9.02 */
    double a = x < 0.0f ? -(double)x : (double)x;
    a = a > 10.0 ? 10.0 : a;
    double t, m;
    double scale = aotc_math_exp_reduce_(2.0 * a, &t, &m) * t; /* at most e^20 */
    double em1 = aotc_math_mul_add_(scale, m, scale - 1.0);
    float y = (float)(em1 / (em1 + 2.0));
    return aotc_math_copysign_(y, x);
}

/* erf(x)/x as a polynomial in x^2 on [0, 0.75^2] (relative error 5e-15) */
static const double aotc_math_erf_small_[9] = {
    0x1.20dd750429b52p+0, -0x1.812746b030154p-2, 0x1.ce2f219abdab3p-4, -0x1.b82ce1827b0bbp-6,
    0x1.565b941c1c1c2p-8, -0x1.c0248ec2ecebfp-11, 0x1.f8c4fe04ed9efp-14, -0x1.e868fb20ab39fp-17,
    0x1.57e711cd5c626p-20};

/* erfc(x) e^(x^2) as polynomials in x - center on [0.75, 1.5), [1.5, 2.5), [2.5, 4)
 * (relative error below 1e-12) */
static const double aotc_math_erfcx_center_[3] = {1.125, 2.0, 3.25};
static const double aotc_math_erfcx_[3][12] = {
    {0x1.9531e09b14755p-2, -0x1.e78b356772605p-3, 0x1.05e7252263732p-3, -0x1.01343a2b48be3p-4,
     0x1.d4e71012dca8ep-6, -0x1.910a5e965f679p-7, 0x1.446d0fae113fcp-8, -0x1.f38c4a94280a2p-10,
     0x1.6f881017caae9p-11, -0x1.0409d0e3e04c1p-12, 0x1.727ed096b58adp-14, -0x1.e1aca113bf71bp-16},
    {0x1.058671b52c48p-2, -0x1.b57034efd624dp-4, 0x1.5672b9ebc1c8dp-5, -0x1.fa9d3ac525095p-7,
     0x1.64906f9fab8p-8, -0x1.e028ea3db935cp-10, 0x1.36a14aafb70b7p-11, -0x1.838250b334e29p-13,
     0x1.d2d989994b17dp-15, -0x1.112e303f1108bp-16, 0x1.48786fa3edb54p-18, -0x1.66c4fba5d52cep-20},
    {0x1.54a7a08d4aa5cp-3, -0x1.82a8522b8e0d3p-5, 0x1.a7eddca76c3d8p-7, -0x1.c24b49b8f0c4ep-9,
     0x1.d0857a61b8303p-11, -0x1.d25ebdefd3bd5p-13, 0x1.c88833c30c989p-15, -0x1.b45e7d84ee3b3p-17,
     0x1.96bdb8634be13p-19, -0x1.749db4f8fdcd1p-21, 0x1.6ad36188a6fbdp-23, -0x1.3ae9e73d19e64p-25}};

AOTC_FN float aotc_exact_erff(float x) {
    if (x != x)
        return x + x;
    double a = x < 0.0f ? -(double)x : (double)x;
    double y = 1.0; /* erf rounds to 1 from 3.92 on */
    if (a < 0.75) {
        /* below 2^-20 the x^3 term is under 2^-41 relative and x^2 would not split exactly */
        double s = a < 0x1p-20 ? 0.0 : a * a;
        double p = aotc_math_erf_small_[8];
        for (int i = 7; i >= 0; i--)
            p = aotc_math_mul_add_(s, p, aotc_math_erf_small_[i]);
        y = a * p;
    } else if (a < 4.0) {
        /* erf = 1 - e^(-x^2) erfcx(x); erfc <= 0.29 here, so its error is not amplified */
        int piece = a < 1.5 ? 0 : (a < 2.5 ? 1 : 2);
        double t = a - aotc_math_erfcx_center_[piece];
        double f = aotc_math_erfcx_[piece][11];
        for (int i = 10; i >= 0; i--)
            f = aotc_math_mul_add_(t, f, aotc_math_erfcx_[piece][i]);
        double e = aotc_math_exp_double_(-(a * a));
        y = aotc_math_mul_add_(-e, f, 1.0);
    }
    return aotc_math_copysign_((float)y, x);
}

/* log: x = 2^k z with z in [0.699, 1.398) cut into 64 pieces by its top mantissa bits;
 * invc = 1/(piece center) rounded to float (1 for the piece holding 1.0, so log near 1 has
 * no cancellation), logc = -log(invc) rounded to double. r = z invc - 1 is then exact
 * (24-bit factors, |r| <= 2^-7). */
static const float aotc_math_log_invc_[64] = {
    0x1.6c16c2p+0f, 0x1.681682p+0f, 0x1.642c86p+0f, 0x1.605816p+0f,
    0x1.5c9882p+0f, 0x1.58ed24p+0f, 0x1.555556p+0f, 0x1.51d07ep+0f,
    0x1.4e5e0ap+0f, 0x1.4afd6ap+0f, 0x1.47ae14p+0f, 0x1.446f86p+0f,
    0x1.414142p+0f, 0x1.3e22ccp+0f, 0x1.3b13b2p+0f, 0x1.381382p+0f,
    0x1.3521dp+0f, 0x1.323e34p+0f, 0x1.2f684cp+0f, 0x1.2c9fb4p+0f,
    0x1.29e412p+0f, 0x1.27350cp+0f, 0x1.24924ap+0f, 0x1.21fb78p+0f,
    0x1.1f7048p+0f, 0x1.1cf06ap+0f, 0x1.1a7b96p+0f, 0x1.181182p+0f,
    0x1.15b1e6p+0f, 0x1.135c82p+0f, 0x1.111112p+0f, 0x1.0ecf56p+0f,
    0x1.0c9714p+0f, 0x1.0a681p+0f, 0x1.08421p+0f, 0x1.0624dep+0f,
    0x1.041042p+0f, 0x1.020408p+0f, 0x1p+0f, 0x1.f81f82p-1f,
    0x1.f07c2p-1f, 0x1.e9131ap-1f, 0x1.e1e1e2p-1f, 0x1.dae608p-1f,
    0x1.d41d42p-1f, 0x1.cd8568p-1f, 0x1.c71c72p-1f, 0x1.c0e07p-1f,
    0x1.bacf92p-1f, 0x1.b4e81cp-1f, 0x1.af286cp-1f, 0x1.a98ef6p-1f,
    0x1.a41a42p-1f, 0x1.9ec8eap-1f, 0x1.99999ap-1f, 0x1.948b1p-1f,
    0x1.8f9c18p-1f, 0x1.8acb9p-1f, 0x1.861862p-1f, 0x1.818182p-1f,
    0x1.7d05f4p-1f, 0x1.78a4c8p-1f, 0x1.745d18p-1f, 0x1.702e06p-1f};
static const double aotc_math_log_logc_[64] = {
    -0x1.68ac8589c6a0fp-2, -0x1.5d5bdfa595f2ap-2, -0x1.522ae1b38a3d5p-2, -0x1.4718dc171c41bp-2,
    -0x1.3c2525533317bp-2, -0x1.314f20fd35cd3p-2, -0x1.269623134db8ap-2, -0x1.1bf99425a6b8cp-2,
    -0x1.1178e6c27e478p-2, -0x1.071385f4d5862p-2, -0x1.f991c3cb3b37p-3, -0x1.e530edde7100ep-3,
    -0x1.d10383e655e65p-3, -0x1.bd0874c3bd8abp-3, -0x1.a93ed8c8ad9cap-3, -0x1.95a5b2ef70165p-3,
    -0x1.823c18551a3bep-3, -0x1.6f01247756aaap-3, -0x1.5bf407b543db1p-3, -0x1.4913d2733b54p-3,
    -0x1.365fc6c159004p-3, -0x1.23d715e49c1f7p-3, -0x1.1178ee227e458p-3, -0x1.fe89129dbd565p-4,
    -0x1.da727838446ap-4, -0x1.b6ac7c9ad5ad1p-4, -0x1.9335e4d594988p-4, -0x1.700d3deeac089p-4,
    -0x1.4d31165207eacp-4, -0x1.2aa0580471746p-4, -0x1.08599959e39a5p-4, -0x1.ccb7265ddb24dp-5,
    -0x1.894a8349fb262p-5, -0x1.466ad942de386p-5, -0x1.0415c89e74404p-5, -0x1.8492858c8c979p-6,
    -0x1.0205a38935667p-6, -0x1.01014f588de6dp-7, 0.0, 0x1.fc0a890fc03e4p-7,
    0x1.f82990e78338p-6, 0x1.77459be32dd23p-5, 0x1.f0a30a01162a7p-5, 0x1.341d7461bd1ddp-4,
    0x1.6f0d272e56b4dp-4, 0x1.a926d8a4ad57p-4, 0x1.e27074e2af2e8p-4, 0x1.0d77e8cd08e5ap-3,
    0x1.29552c41ff52ep-3, 0x1.44d2b38cb7d29p-3, 0x1.5ff3060a793d5p-3, 0x1.7ab890410d909p-3,
    0x1.9525a80f456b8p-3, 0x1.af3c91880bffep-3, 0x1.c8ff7a79a9a26p-3, 0x1.e27075e2af2e7p-3,
    0x1.fb918bd5e3e44p-3, 0x1.0a3250a7390fp-2, 0x1.1675c97aba611p-2, 0x1.22941e6cf7969p-2,
    0x1.2e8e2bee11d31p-2, 0x1.3a64c596945eap-2, 0x1.4618ba21c5ecap-2, 0x1.51aad7c2df82ep-2};

AOTC_FN float aotc_exact_logf(float x) {
    if (x != x)
        return x + x;
    if (x < 0.0f)
        return AOTC_NAN;
    if (x == 0.0f)
        return -AOTC_INF;
    if (x == AOTC_INF)
        return x;
    uint32_t ix = aotc_f32_bits(x);
    int32_t k = 0;
    if (ix < 0x00800000u) { /* subnormal: scale into the normal range */
        ix = aotc_f32_bits(x * 0x1p23f);
        k = -23;
    }
    /* ix - bits(0.699) with 128 added to the exponent field, so no value goes negative */
    uint32_t d = ix + (0x40000000u - 0x3f330000u);
    k += (int32_t)(d >> 23) - 128;
    uint32_t mant = d & 0x007fffffu;
    uint32_t piece = mant >> 17;
    double z = (double)aotc_f32_from_bits(0x3f330000u + mant);
    double r = z * (double)aotc_math_log_invc_[piece] - 1.0;
    /* log1p(r) = log1p(rh) + rl (1 - rh), r = rh + rl with rh a float, rl the 18-bit rest;
     * log1p(rh) = rh - rh^2/2 + rh^3 (1/3 - rh/4 + rh^2/5 - rh^3/6), the tail formed from
     * float-sized factors */
    double rh = aotc_math_hi_(r), rl = r - rh;
    double r2 = rh * rh;
    double p = rh * (double)-0x1.555556p-3f + 0x1.999999999999ap-3;
    p = aotc_math_hi_(p) * rh - 0.25;
    p = aotc_math_hi_(p) * rh + 0x1.5555555555555p-2;
    double tail = aotc_math_hi_(r2 * rh) * aotc_math_hi_(p);
    double s = rl - rl * rh;
    s = tail + s;
    s = s - 0.5 * r2;
    s = rh + s;
    /* k ln2 with ln2 in two 44-bit parts (times |k| < 2^8: exact) */
    double kd = (double)k;
    double high = kd * 0x1.62e42fefa3ap-1 + aotc_math_log_logc_[piece];
    return (float)(high + (kd * -0x1.0ca86c3898cp-49 + s));
}

/* ---- fast functions ---------------------------------------------------------------- */

/* exp, max error 2 ulp (1 measured; subnormal results and the overflow threshold included) */
AOTC_INLINE_ALWAYS float aotc_fast_expf(float x) {
    float xc = aotc_math_select_(x < 88.8f, x, 88.8f); /* NaN: 88.8 here, put back below */
    xc = aotc_math_select_(xc > -104.0f, xc, -104.0f);
    /* n = round(x / ln2) in the low bits of t; kb = n + 256 in [105, 385] */
    float t = xc * 0x1.715476p+0f + 0x1.8p23f;
    float n = t - 0x1.8p23f;
    uint32_t kb = aotc_f32_bits(t) - (0x4b400000u - 256u);
    float r = xc - n * 0x1.62e4p-1f; /* 16-bit ln2 part: n * it is exact */
    r = r - n * 0x1.7f7d1cp-20f;
    float q = 0x1.6c37ecp-10f;
    q = q * r + 0x1.120afcp-7f;
    q = q * r + 0x1.5555eap-5f;
    q = q * r + 0x1.5554dep-3f;
    q = q * r + 0.5f;
    float p = 1.0f + (r + r * r * q);
    /* 2^n as 2^floor(n/2) * 2^ceil(n/2): both normal, so only the last product rounds */
    uint32_t h = kb >> 1;
    float y = p * aotc_f32_from_bits((h - 1u) << 23) * aotc_f32_from_bits((kb - h - 1u) << 23);
    return aotc_math_select_(x != x, x, y);
}

/* sigmoid, max error 3 ulp (2 measured) */
AOTC_INLINE_ALWAYS float aotc_fast_sigmoidf(float x) {
    float e = aotc_fast_expf(-aotc_math_copysign_(x, 1.0f));
    return aotc_math_select_(x < 0.0f, e, 1.0f) / (1.0f + e);
}

/* tanh, max error 2 ulp (1 measured) */
AOTC_INLINE_ALWAYS float aotc_fast_tanhf(float x) {
    float a = aotc_math_copysign_(x, 1.0f);
    float s = x * x;
    float q = 0x1.2c1edcp-9f;
    q = q * s - 0x1.115146p-7f;
    q = q * s + 0x1.64a52ep-6f;
    q = q * s - 0x1.ba0878p-5f;
    q = q * s + 0x1.1110e8p-3f;
    q = q * s - 0x1.555556p-2f;
    float small = a + a * s * q;
    float e = aotc_fast_expf(2.0f * aotc_math_select_(a < 9.1f, a, 9.1f));
    float big = 1.0f - 2.0f / (e + 1.0f);
    float y = aotc_math_copysign_(aotc_math_select_(a < 0.625f, small, big), x);
    return aotc_math_select_(x != x, x, y);
}

/* erf, max error 3 ulp (2 measured) */
AOTC_INLINE_ALWAYS float aotc_fast_erff(float x) {
    float a = aotc_math_copysign_(x, 1.0f);
    float s = x * x;
    float p = 0x1.5eda92p-14f;
    p = p * s - 0x1.aad7eap-11f;
    p = p * s + 0x1.54d8b6p-8f;
    p = p * s - 0x1.b8103ep-6f;
    p = p * s + 0x1.ce2e1cp-4f;
    p = p * s - 0x1.812744p-2f;
    p = p * s + 0x1.06ebbp-3f; /* 2/sqrt(pi) - 1: x + x p keeps 2/sqrt(pi) x to 0.5 ulp */
    float small = x + x * p;
    /* erf = 1 - exp(-x^2 + g(x)), g = log(erfc(x) e^(x^2)) fitted on [0.92, 4] */
    float ac = aotc_math_select_(a < 4.0f, a, 4.0f);
    ac = aotc_math_select_(ac > 0.921875f, ac, 0.921875f);
    float t = ac - 2.5f;
    float g = -0x1.56c7c2p-25f;
    g = g * t + 0x1.ad3f72p-20f;
    g = g * t - 0x1.b784a6p-17f;
    g = g * t + 0x1.44e094p-14f;
    g = g * t - 0x1.b8f19ap-12f;
    g = g * t + 0x1.1bc80ep-9f;
    g = g * t - 0x1.63cdccp-7f;
    g = g * t + 0x1.cb9fa2p-5f;
    g = g * t - 0x1.692522p-2f;
    g = g * t - 0x1.8e8b72p+0f;
    float big = aotc_math_copysign_(1.0f - aotc_fast_expf(g - ac * ac), x);
    float y = aotc_math_select_(a < 0.921875f, small, big);
    return aotc_math_select_(x != x, x, y);
}

/* log, max error 2 ulp (1 measured) */
AOTC_INLINE_ALWAYS float aotc_fast_logf(float x) {
    /* Selections here are bit masks, not conditionals: several tests of the same bits
     * would let the compiler thread them into branches, and the loop would not vectorize. */
    uint32_t ix = aotc_f32_bits(x);
    uint32_t sub = 0u - (uint32_t)(ix < 0x00800000u); /* +0, positive subnormals: scale */
    uint32_t iy = (aotc_f32_bits(x * 0x1p23f) & sub) | (ix & ~sub);
    /* m in [sqrt(1/2), sqrt(2)), x = 2^k m */
    iy = iy + (0x3f800000u - 0x3f3504f3u);
    int32_t k = (int32_t)(iy >> 23) - 127 - (int32_t)(sub & 23u);
    float f = aotc_f32_from_bits((iy & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    /* log1p(f) = f - f^2/2 + f^3 R(f) */
    float q = 0x1.1914ep-4f;
    q = q * f - 0x1.d3d314p-4f;
    q = q * f + 0x1.df31bp-4f;
    q = q * f - 0x1.fd55a2p-4f;
    q = q * f + 0x1.23cffep-3f;
    q = q * f - 0x1.55591p-3f;
    q = q * f + 0x1.999d5ap-3f;
    q = q * f - 0x1.000002p-2f;
    q = q * f + 0x1.555554p-2f;
    float kf = (float)k;
    uint32_t y = aotc_f32_bits(kf * 0x1.62e4p-1f + (f + (f * f * (f * q - 0.5f) + kf * 0x1.7f7d1cp-20f)));
    uint32_t zero = 0u - (uint32_t)((ix & 0x7fffffffu) == 0);        /* -> -inf */
    uint32_t negative = 0u - (uint32_t)(ix > 0x80000000u);           /* x < 0, -inf, NaN: NaN */
    uint32_t itself = 0u - (uint32_t)(ix - 0x7f800000u < 0x00800000u); /* +inf, NaN */
    y = (y & ~zero) | (0xff800000u & zero);
    y = (y & ~negative) | (0x7fc00000u & negative);
    y = (y & ~itself) | (ix & itself);
    return aotc_f32_from_bits(y);
}

/* ---- loops ------------------------------------------------------------------------- */
/* y[i] = f(x[i]); y may be x. The fast ones vectorize at -O3. */

AOTC_FN void aotc_fast_exp_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_fast_expf(x[i]);
}
AOTC_FN void aotc_fast_log_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_fast_logf(x[i]);
}
AOTC_FN void aotc_fast_tanh_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_fast_tanhf(x[i]);
}
AOTC_FN void aotc_fast_erf_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_fast_erff(x[i]);
}
AOTC_FN void aotc_fast_sigmoid_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_fast_sigmoidf(x[i]);
}
AOTC_FN void aotc_exact_exp_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_exact_expf(x[i]);
}
AOTC_FN void aotc_exact_log_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_exact_logf(x[i]);
}
AOTC_FN void aotc_exact_tanh_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_exact_tanhf(x[i]);
}
AOTC_FN void aotc_exact_erf_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_exact_erff(x[i]);
}
AOTC_FN void aotc_exact_sigmoid_f32(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = aotc_exact_sigmoidf(x[i]);
}

/* ---- what generated element-wise code calls ------------------------------------------
 * aotc's exact functions in exact mode (the same bits everywhere), its fast ones
 * otherwise: within 3 ulp, and a loop of them vectorizes where libm's would be a call
 * per element (Gelu's erf in a transformer's epilogue, softmax's exp). */
#ifdef AOTC_EXACT
#define AOTC_EXPF(x) aotc_exact_expf(x)
#define AOTC_LOGF(x) aotc_exact_logf(x)
#define AOTC_TANHF(x) aotc_exact_tanhf(x)
#define AOTC_ERFF(x) aotc_exact_erff(x)
#else
#define AOTC_EXPF(x) aotc_fast_expf(x)
#define AOTC_LOGF(x) aotc_fast_logf(x)
#define AOTC_TANHF(x) aotc_fast_tanhf(x)
#define AOTC_ERFF(x) aotc_fast_erff(x)
#endif

#endif
