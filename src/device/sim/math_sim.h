// Internal, part of cuda_sim.cuh: CUDA's device math for host-compiled kernels.
// A function with a documented maximum error (CUDA C++ Programming Guide,
// "Mathematical Functions", with nvcc's defaults: -prec-div=true,
// -prec-sqrt=true, no -use_fast_math) returns the correctly rounded result moved
// by a seeded number of units in the last place, never past that bound from the
// exact value, and fixed for a given input and FERRY_SIM_SEED, as one GPU's
// library is. Exact results (exp(0), log(1)) and special values stay exact.
// Division, sqrt and the other correctly rounded operations are the host's own.
#ifndef FERRY_DEVICE_SIM_MATH_SIM_H
#define FERRY_DEVICE_SIM_MATH_SIM_H

namespace fksim {
enum math_fn {
    MF_EXPF = 1, MF_LOGF, MF_POWF, MF_COSF, MF_SINF, MF_TANHF, MF_ERFF, MF_RSQRTF, MF_EXP, MF_LOG, MF_POW,
    MF_ERF, MF_TANH
};

template <typename F, typename W> static inline F ulp_move(F cr, W exact, int maxulp, unsigned fn, uint64_t key)
{
    if (!std::isfinite(cr) || (W)cr == exact)
        return cr;
    int k = (int)(ferry_simk_math_hash(fn, key) % (uint64_t)(2 * maxulp + 1)) - maxulp;
    F r = cr;
    for (; k > 0; k--)
        r = std::nextafter(r, (F)INFINITY);
    for (; k < 0; k++)
        r = std::nextafter(r, -(F)INFINITY);
    // Back toward the correctly rounded value while past the bound.
    while (r != cr) {
        F a = std::fabs(r);
        W ulp = (W)(std::nextafter(a, (F)INFINITY) - a);
        if (std::isfinite(r) && std::fabs((W)r - exact) <= (W)maxulp * ulp)
            break;
        r = std::nextafter(r, cr);
    }
    return r;
}

static inline uint64_t key1(float x) { return to_bits(x); }
static inline uint64_t key2(float x, float y) { return to_bits(x) << 32 | to_bits(y); }
static inline uint64_t key1(double x) { return to_bits(x); }
static inline uint64_t key2(double x, double y) { return to_bits(x) * UINT64_C(0x9E3779B97F4A7C15) ^ to_bits(y); }

// Single precision: the exact value in double. Bounds in ulp, from the guide.
static inline float dev_expf(float x) { double e = std::exp((double)x); return ulp_move((float)e, e, 2, MF_EXPF, key1(x)); }
static inline float dev_logf(float x) { double e = std::log((double)x); return ulp_move((float)e, e, 1, MF_LOGF, key1(x)); }
static inline float dev_powf(float x, float y)
{
    double e = std::pow((double)x, (double)y);
    return ulp_move((float)e, e, 4, MF_POWF, key2(x, y));
}
static inline float dev_cosf(float x) { double e = std::cos((double)x); return ulp_move((float)e, e, 2, MF_COSF, key1(x)); }
static inline float dev_sinf(float x) { double e = std::sin((double)x); return ulp_move((float)e, e, 2, MF_SINF, key1(x)); }
static inline float dev_tanhf(float x) { double e = std::tanh((double)x); return ulp_move((float)e, e, 2, MF_TANHF, key1(x)); }
static inline float dev_erff(float x) { double e = std::erf((double)x); return ulp_move((float)e, e, 2, MF_ERFF, key1(x)); }
static inline float dev_rsqrtf(float x)
{
    double e = 1.0 / std::sqrt((double)x);
    return ulp_move((float)e, e, 2, MF_RSQRTF, key1(x));
}

// Double precision: the exact value in long double.
static inline double dev_exp(double x) { long double e = std::exp((long double)x); return ulp_move((double)e, e, 1, MF_EXP, key1(x)); }
static inline double dev_log(double x) { long double e = std::log((long double)x); return ulp_move((double)e, e, 1, MF_LOG, key1(x)); }
static inline double dev_pow(double x, double y)
{
    long double e = std::pow((long double)x, (long double)y);
    return ulp_move((double)e, e, 2, MF_POW, key2(x, y));
}
static inline double dev_erf(double x) { long double e = std::erf((long double)x); return ulp_move((double)e, e, 2, MF_ERF, key1(x)); }
static inline double dev_tanh(double x) { long double e = std::tanh((long double)x); return ulp_move((double)e, e, 1, MF_TANH, key1(x)); }

// The _rn intrinsics round each operation on its own: an empty asm between the
// operation and its use keeps the compiler from contracting it into an FMA.
template <typename T> static inline T rn(T v)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+x"(v));
#else
    volatile T t = v;
    v = t;
#endif
    return v;
}
} // namespace fksim

static inline float __fmul_rn(float a, float b) { return fksim::rn(a * b); }
static inline float __fadd_rn(float a, float b) { return fksim::rn(a + b); }
static inline float __fsub_rn(float a, float b) { return fksim::rn(a - b); }
static inline double __dmul_rn(double a, double b) { return fksim::rn(a * b); }
static inline double __dadd_rn(double a, double b) { return fksim::rn(a + b); }
static inline double __dsub_rn(double a, double b) { return fksim::rn(a - b); }
static inline float rsqrtf(float x) { return fksim::dev_rsqrtf(x); }

#define expf(x) fksim::dev_expf(x)
#define logf(x) fksim::dev_logf(x)
#define powf(x, y) fksim::dev_powf((x), (y))
#define cosf(x) fksim::dev_cosf(x)
#define sinf(x) fksim::dev_sinf(x)
#define tanhf(x) fksim::dev_tanhf(x)
#define erff(x) fksim::dev_erff(x)
#define exp(x) fksim::dev_exp(x)
#define log(x) fksim::dev_log(x)
#define pow(x, y) fksim::dev_pow((x), (y))
#define erf(x) fksim::dev_erf(x)
#define tanh(x) fksim::dev_tanh(x)

#endif
