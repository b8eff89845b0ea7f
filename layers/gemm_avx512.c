/* gemm_avx512.c - the AVX-512 SGEMM micro-kernel: an 8 x 32 tile in 16 zmm accumulators; per k,
 * two loads of B and eight broadcasts of A feed 16 FMAs. Compiled with -mavx512f; called only
 * when the CPU has it (ki_gemm_ukernel_for). */
#include <immintrin.h>

#include "gemm.h"

#define ROW(r)                                                                                     \
    do {                                                                                           \
        __m512 av = _mm512_set1_ps(a##r[k]);                                                       \
        c##r##l = _mm512_fmadd_ps(av, bl, c##r##l);                                                \
        c##r##h = _mm512_fmadd_ps(av, bh, c##r##h);                                                \
    } while (0)

#define INIT(r)                                                                                    \
    __m512 c##r##l = acc ? _mm512_loadu_ps(c + (r)*ldc) : _mm512_setzero_ps();                     \
    __m512 c##r##h = acc ? _mm512_loadu_ps(c + (r)*ldc + 16) : _mm512_setzero_ps()

#define STORE(r)                                                                                   \
    do {                                                                                           \
        if (fin) {                                                                                 \
            __m512 bv = _mm512_set1_ps(fin->bias ? fin->bias[r] : 0.0f);                           \
            c##r##l = fin->bias ? _mm512_add_ps(c##r##l, bv) : c##r##l;                            \
            c##r##h = fin->bias ? _mm512_add_ps(c##r##h, bv) : c##r##h;                            \
            if (fin->res) {                                                                        \
                c##r##l = _mm512_add_ps(c##r##l, _mm512_loadu_ps(fin->res + (r)*ldc));             \
                c##r##h = _mm512_add_ps(c##r##h, _mm512_loadu_ps(fin->res + (r)*ldc + 16));        \
            }                                                                                      \
            c##r##l = _mm512_min_ps(hi, _mm512_max_ps(lo, c##r##l));                               \
            c##r##h = _mm512_min_ps(hi, _mm512_max_ps(lo, c##r##h));                               \
        }                                                                                          \
        _mm512_storeu_ps(c + (r)*ldc, c##r##l);                                                    \
        _mm512_storeu_ps(c + (r)*ldc + 16, c##r##h);                                               \
    } while (0)

void ki_gemm_ukernel_avx512(int64_t kc, const float *const *a, const float *b, int64_t ldb,
                            float *c, int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const float *a4 = a[4], *a5 = a[5], *a6 = a[6], *a7 = a[7];
    INIT(0);
    INIT(1);
    INIT(2);
    INIT(3);
    INIT(4);
    INIT(5);
    INIT(6);
    INIT(7);
    for (int64_t k = 0; k < kc; k++) {
        __m512 bl = _mm512_loadu_ps(b + k * ldb);
        __m512 bh = _mm512_loadu_ps(b + k * ldb + 16);
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
        ROW(4);
        ROW(5);
        ROW(6);
        ROW(7);
    }
    /* max(lo, v): a NaN v is returned (second operand), as the scalar comparisons keep it */
    const __m512 lo = _mm512_set1_ps(fin ? fin->lo : 0.0f),
                 hi = _mm512_set1_ps(fin ? fin->hi : 0.0f);
    STORE(0);
    STORE(1);
    STORE(2);
    STORE(3);
    STORE(4);
    STORE(5);
    STORE(6);
    STORE(7);
}

#define ROW16(r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(a##r[k]), bv, c##r)

void ki_gemm_ukernel16_avx512(int64_t kc, const float *const *a, const float *b, int64_t ldb,
                              float *c, int64_t ldc, bool acc)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const float *a4 = a[4], *a5 = a[5], *a6 = a[6], *a7 = a[7];
    __m512 c0 = acc ? _mm512_loadu_ps(c) : _mm512_setzero_ps();
    __m512 c1 = acc ? _mm512_loadu_ps(c + ldc) : _mm512_setzero_ps();
    __m512 c2 = acc ? _mm512_loadu_ps(c + 2 * ldc) : _mm512_setzero_ps();
    __m512 c3 = acc ? _mm512_loadu_ps(c + 3 * ldc) : _mm512_setzero_ps();
    __m512 c4 = acc ? _mm512_loadu_ps(c + 4 * ldc) : _mm512_setzero_ps();
    __m512 c5 = acc ? _mm512_loadu_ps(c + 5 * ldc) : _mm512_setzero_ps();
    __m512 c6 = acc ? _mm512_loadu_ps(c + 6 * ldc) : _mm512_setzero_ps();
    __m512 c7 = acc ? _mm512_loadu_ps(c + 7 * ldc) : _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m512 bv = _mm512_loadu_ps(b + k * ldb);
        ROW16(0);
        ROW16(1);
        ROW16(2);
        ROW16(3);
        ROW16(4);
        ROW16(5);
        ROW16(6);
        ROW16(7);
    }
    _mm512_storeu_ps(c, c0);
    _mm512_storeu_ps(c + ldc, c1);
    _mm512_storeu_ps(c + 2 * ldc, c2);
    _mm512_storeu_ps(c + 3 * ldc, c3);
    _mm512_storeu_ps(c + 4 * ldc, c4);
    _mm512_storeu_ps(c + 5 * ldc, c5);
    _mm512_storeu_ps(c + 6 * ldc, c6);
    _mm512_storeu_ps(c + 7 * ldc, c7);
}
