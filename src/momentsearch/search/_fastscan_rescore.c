/* The exact re-score of the scan first stage (see _fastscan.c): fp16 clip rows converted in registers (F16C),
 * the inner product (divided by the row's norm for cosine) in fp32, each stream's best clip, the mean over
 * streams; the next video's rows prefetched while one is scored. ms_rescore_i8: the same over int8 rows, each
 * (clip, stream) row's product times its own factor (scale, over the fp16 row's norm for cosine). */
#include <math.h>
#include <string.h>

#include "_fastscan.h"

int ms_have_avx512 = 0;

/* ---- the exact re-score ---------------------------------------------------------------------------- */

static float mean_best(const float *best, int S) /* a video's score: the mean over streams of each one's best clip */
{
    float total = 0.f;
    for (int s = 0; s < S; s++)
        total += best[s & 63];
    return total / (float)S;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF, bits;
    if (e == 0x1F)
        bits = sign | 0x7F800000u | (m << 13);
    else if (e)
        bits = sign | ((e + 112) << 23) | (m << 13);
    else if (!m)
        bits = sign;
    else {
        uint32_t k = 0;
        while (!(m & 0x400)) {
            m <<= 1;
            k++;
        }
        bits = sign | ((113 - k) << 23) | ((m & 0x3FF) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void dot_norm_scalar(const uint16_t *row, const float *q, int d, float *dot, float *nn)
{
    float s = 0.f, n = 0.f;
    for (int i = 0; i < d; i++) {
        float x = half_to_float(row[i]);
        s += x * q[i];
        n += x * x;
    }
    *dot = s;
    *nn = n;
}

#if MS_X86
__attribute__((target("avx512f,f16c,fma")))
static void dot_norm_avx512(const uint16_t *row, const float *q, int d, float *dot, float *nn)
{
    __m512 s = _mm512_setzero_ps(), n = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= d; i += 16) {
        __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + i)));
        s = _mm512_fmadd_ps(x, _mm512_loadu_ps(q + i), s);
        n = _mm512_fmadd_ps(x, x, n);
    }
    float ts = _mm512_reduce_add_ps(s), tn = _mm512_reduce_add_ps(n);
    for (; i < d; i++) {
        float x = half_to_float(row[i]);
        ts += x * q[i];
        tn += x * x;
    }
    *dot = ts;
    *nn = tn;
}
#endif

void ms_rescore(const uint16_t *rows, int S, int d, const float *q, const int64_t *off, const int64_t *videos,
                    int64_t U, int cosine, float *out)
{
    float best[64];
    size_t row_len = (size_t)S * d; /* halves a clip row holds, every stream */
    for (int64_t u = 0; u < U; u++) {
        int64_t v = videos[u];
        int64_t next = u + 1 < U ? off[videos[u + 1]] : -1, next_n = u + 1 < U ? off[videos[u + 1] + 1] - next : 0;
        for (int s = 0; s < S && s < 64; s++)
            best[s] = -INFINITY;
        for (int64_t c = off[v]; c < off[v + 1]; c++) {
#if MS_X86
            int64_t i = c - off[v];
            if (i < next_n) { /* the next video's rows on their way while this one is scored */
                const char *p = (const char *)(rows + (size_t)(next + i) * row_len);
                for (size_t b = 0; b < row_len * 2; b += 64)
                    _mm_prefetch(p + b, _MM_HINT_T0);
            }
#endif
            for (int s = 0; s < S; s++) {
                float dot, nn;
                const uint16_t *row = rows + (size_t)c * row_len + (size_t)s * d;
#if MS_X86
                if (ms_have_avx512)
                    dot_norm_avx512(row, q + s * d, d, &dot, &nn);
                else
#endif
                    dot_norm_scalar(row, q + s * d, d, &dot, &nn);
                if (cosine) {
                    float norm = sqrtf(nn);
                    dot = dot / (norm > 1e-12f ? norm : 1e-12f);
                }
                if (dot > best[s & 63])
                    best[s & 63] = dot;
            }
        }
        out[u] = mean_best(best, S);
    }
}


/* ---- the int8 rows' re-score (the rows8 tier) ------------------------------------------------------- */

static float dot_i8_scalar(const int8_t *row, const float *q, int d)
{
    float s = 0.f;
    for (int i = 0; i < d; i++)
        s += (float)row[i] * q[i];
    return s;
}

#if MS_X86
__attribute__((target("avx512f")))
static float dot_i8_avx512(const int8_t *row, const float *q, int d)
{
    __m512 s = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= d; i += 16) {
        __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(row + i))));
        s = _mm512_fmadd_ps(x, _mm512_loadu_ps(q + i), s);
    }
    float t = _mm512_reduce_add_ps(s);
    for (; i < d; i++)
        t += (float)row[i] * q[i];
    return t;
}
#endif

void ms_rescore_i8(const int8_t *rows, const float *mult, int S, int d, const float *q, const int64_t *off,
                   const int64_t *videos, int64_t U, float *out)
{
    float best[64];
    size_t row_len = (size_t)S * d; /* bytes a clip row holds, every stream */
    for (int64_t u = 0; u < U; u++) {
        int64_t v = videos[u];
#if MS_X86
        if (u + 1 < U) { /* the next video's rows and factors on their way while this one is scored */
            int64_t c0 = off[videos[u + 1]], c1 = off[videos[u + 1] + 1];
            const char *p = (const char *)(rows + (size_t)c0 * row_len), *e = (const char *)(rows + (size_t)c1 * row_len);
            for (; p < e; p += 64)
                _mm_prefetch(p, _MM_HINT_T0);
            for (const char *f = (const char *)(mult + c0 * S); f < (const char *)(mult + c1 * S); f += 64)
                _mm_prefetch(f, _MM_HINT_T0);
        }
#endif
        for (int s = 0; s < S && s < 64; s++)
            best[s] = -INFINITY;
        for (int64_t c = off[v]; c < off[v + 1]; c++)
            for (int s = 0; s < S; s++) {
                const int8_t *row = rows + (size_t)c * row_len + (size_t)s * d;
                float dot;
#if MS_X86
                if (ms_have_avx512)
                    dot = dot_i8_avx512(row, q + s * d, d);
                else
#endif
                    dot = dot_i8_scalar(row, q + s * d, d);
                dot *= mult[c * S + s];
                if (dot > best[s & 63])
                    best[s & 63] = dot;
            }
        out[u] = mean_best(best, S);
    }
}
