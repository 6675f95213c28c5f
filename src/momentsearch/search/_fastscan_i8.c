/* The int8 tier's pass over every clip for a batch of queries (scan_i8): each video's best clip per stream under
 * mult[c, s] * qscale[b, s] * <qi[b, s], rows[c, s]>, the mean over streams, for up to 16 queries at once.
 *
 * The queries are quantized to int8 (qi, one scale per query and stream) and handed over as unsigned bytes
 * qi + 128, packed so that one 64-byte register holds 4 dimensions of all 16 queries: qpack[s][g][b][j] =
 * qi[b, s, 4g + j] + 128. With AVX-512 VNNI a clip row's 4 bytes are broadcast from memory to the 16 lanes and
 * vpdpbusd adds (qi + 128) . r for every query at once: one instruction per 4 dimensions and 16 queries, so a
 * batch reads each row from memory once. rowsum[c, s] = sum of the row's bytes gives back the exact integer
 * <qi, r> = acc - 128 * rowsum. The integers are exact and the float steps (to float, times mult, max, times
 * qscale, the sum over streams in order, over S) are the same in the portable loop, so both paths agree bit for
 * bit. A video without clips scores -inf. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "_fastscan.h"

int ms_have_vnni = 0;

#define LANES 16

static void scan_i8_scalar(const int8_t *rows, const float *mult, const int32_t *rowsum, int S, int d,
                           const uint8_t *qpack, const float *qscale, int nq, const int64_t *off, int64_t lo,
                           int64_t hi, int64_t V, float *out)
{
    int G = d / 4;
    size_t row_len = (size_t)S * d;
    for (int64_t v = lo; v < hi; v++) {
        float total[LANES] = {0};
        for (int s = 0; s < S; s++) {
            const uint8_t *Q = qpack + (size_t)s * G * 64;
            float best[LANES];
            for (int b = 0; b < LANES; b++)
                best[b] = -INFINITY;
            for (int64_t c = off[v]; c < off[v + 1]; c++) {
                const int8_t *r = rows + (size_t)c * row_len + (size_t)s * d;
                int32_t corr = rowsum[c * S + s] * 128;
                float f = mult[c * S + s];
                for (int b = 0; b < nq; b++) {
                    int32_t acc = 0;
                    for (int g = 0; g < G; g++)
                        for (int j = 0; j < 4; j++)
                            acc += (int32_t)Q[g * 64 + b * 4 + j] * (int32_t)r[4 * g + j];
                    float x = (float)(acc - corr) * f;
                    if (x > best[b])
                        best[b] = x;
                }
            }
            for (int b = 0; b < nq; b++)
                total[b] = total[b] + best[b] * qscale[s * LANES + b];
        }
        for (int b = 0; b < nq; b++)
            out[(size_t)b * V + v] = total[b] / (float)S;
    }
}

#if MS_X86
static inline int32_t word_at(const int8_t *p)
{
    int32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* 4 clips' rows at once for one stream: acc[j] lane b = (qi_b + 128) . r_j */
__attribute__((target("avx512f,avx512vnni"))) static inline void dots4(const int8_t *r, size_t stride,
                                                                          const uint8_t *Q, int G, __m512i acc[4])
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (int g = 0; g < G; g++) {
        __m512i qg = _mm512_loadu_si512((const void *)(Q + (size_t)g * 64));
        a0 = _mm512_dpbusd_epi32(a0, qg, _mm512_set1_epi32(word_at(r + 4 * g)));
        a1 = _mm512_dpbusd_epi32(a1, qg, _mm512_set1_epi32(word_at(r + stride + 4 * g)));
        a2 = _mm512_dpbusd_epi32(a2, qg, _mm512_set1_epi32(word_at(r + 2 * stride + 4 * g)));
        a3 = _mm512_dpbusd_epi32(a3, qg, _mm512_set1_epi32(word_at(r + 3 * stride + 4 * g)));
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* a clip row's 16 scores: (acc - 128 * its sum) times its factor, the same in both SIMD paths */
__attribute__((target("avx512f"))) static inline __m512 row_score(__m512i acc, int32_t rowsum, float f)
{
    __m512i dot = _mm512_sub_epi32(acc, _mm512_set1_epi32(rowsum * 128));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(f));
}

/* video v's score: the mean over streams of best[s] times the queries' scales, written for the nq queries; best[s]
 * reset for the next video */
__attribute__((target("avx512f"))) static inline void finish(__m512 *best, const float *qscale, int S, int nq,
                                                              int64_t v, int64_t V, float *out)
{
    float lanes[LANES] __attribute__((aligned(64)));
    __m512 total = _mm512_setzero_ps();
    for (int s = 0; s < S; s++) {
        total = _mm512_add_ps(total, _mm512_mul_ps(best[s], _mm512_loadu_ps(qscale + s * LANES)));
        best[s] = _mm512_set1_ps(-INFINITY);
    }
    _mm512_store_ps(lanes, _mm512_div_ps(total, _mm512_set1_ps((float)S)));
    for (int b = 0; b < nq; b++)
        out[(size_t)b * V + v] = lanes[b];
}


__attribute__((target("avx512f,avx512vnni"))) static void scan_i8_vnni(
    const int8_t *rows, const float *mult, const int32_t *rowsum, int S, int d, const uint8_t *qpack,
    const float *qscale, int nq, const int64_t *off, int64_t lo, int64_t hi, int64_t V, float *out)
{
    int G = d / 4;
    size_t row_len = (size_t)S * d;
    __m512 best[64];
    for (int s = 0; s < S; s++)
        best[s] = _mm512_set1_ps(-INFINITY);
    for (int64_t v = lo; v < hi; v++) {
        for (int s = 0; s < S; s++) {
            const uint8_t *Q = qpack + (size_t)s * G * 64;
            int64_t c = off[v], e = off[v + 1];
            for (; c + 4 <= e; c += 4) {
                __m512i acc[4];
                dots4(rows + (size_t)c * row_len + (size_t)s * d, row_len, Q, G, acc);
                for (int j = 0; j < 4; j++)
                    best[s] = _mm512_max_ps(best[s], row_score(acc[j], rowsum[(c + j) * S + s], mult[(c + j) * S + s]));
            }
            for (; c < e; c++) {
                const int8_t *r = rows + (size_t)c * row_len + (size_t)s * d;
                __m512i acc = _mm512_setzero_si512();
                for (int g = 0; g < G; g++)
                    acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512((const void *)(Q + (size_t)g * 64)),
                                              _mm512_set1_epi32(word_at(r + 4 * g)));
                best[s] = _mm512_max_ps(best[s], row_score(acc, rowsum[c * S + s], mult[c * S + s]));
            }
        }
        finish(best, qscale, S, nq, v, V, out);
    }
}

/* ---- AMX: 16 clips x 16 queries x 64 dimensions per tile product ---------------------------------------------- */
int ms_have_amx = 0;

struct tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* folds clip c's scores (cbuf[s] row j, every stream) into best[s] */
__attribute__((target("avx512f"))) static inline void fold(const int32_t *cbuf, int j, const int32_t *rowsum,
                                                          const float *mult, int64_t c, int S, __m512 *best)
{
    for (int s = 0; s < S; s++) {
        __m512i acc = _mm512_load_si512((const void *)(cbuf + (size_t)s * 256 + j * 16));
        best[s] = _mm512_max_ps(best[s], row_score(acc, rowsum[c * S + s], mult[c * S + s]));
    }
}

/* the next tile's rows are prefetched into L1 (a tile load waits for each of its lines; measured at 100k videos,
 * 16 queries: 37 ms a pass with the next tile's prefetched to L1, 43 with two tiles ahead, 51-54 into L2 or none) */
#define AHEAD 1

/* one stream's products for 16 clips into tile CT (0 or 1): the d/64 steps alternate tiles 2/4 and 3/5 for the
 * clips' and the queries' bytes, so that a load need not wait for the product before it */
#define STREAM_PRODUCTS(CT, A, Q, K, stride)                                                                 \
    do {                                                                                                    \
        _tile_zero(CT);                                                                                     \
        int k_ = 0;                                                                                         \
        for (; k_ + 2 <= (K); k_ += 2) {                                                                    \
            _tile_loadd(2, (A) + 64 * k_, stride);                                                          \
            _tile_loadd(4, (Q) + 1024 * k_, 64);                                                            \
            _tile_dpbsud(CT, 2, 4);                                                                         \
            _tile_loadd(3, (A) + 64 * (k_ + 1), stride);                                                    \
            _tile_loadd(5, (Q) + 1024 * (k_ + 1), 64);                                                      \
            _tile_dpbsud(CT, 3, 5);                                                                         \
        }                                                                                                   \
        if (k_ < (K)) {                                                                                     \
            _tile_loadd(2, (A) + 64 * k_, stride);                                                          \
            _tile_loadd(4, (Q) + 1024 * k_, 64);                                                            \
            _tile_dpbsud(CT, 2, 4);                                                                         \
        }                                                                                                   \
    } while (0)

/* folds a tile's 16 clips (n of them real, from clip c0) into their videos' bests, writing each video whose clips
 * end; returns the video the next clip belongs to */
__attribute__((target("avx512f"))) static int64_t fold_tile(const int32_t *cbuf, int n, int64_t c0, int64_t v,
                                                             const int64_t *off, const int32_t *rowsum,
                                                             const float *mult, const float *qscale, int S, int nq,
                                                             int64_t V, float *out, __m512 *best)
{
    for (int j = 0; j < n; j++) {
        int64_t c = c0 + j;
        while (off[v + 1] <= c)
            finish(best, qscale, S, nq, v++, V, out);
        fold(cbuf, j, rowsum, mult, c, S, best);
    }
    return v;
}

/* the clips of videos lo..hi-1 in tiles of 16 (a last partial tile copied to a zeroed buffer); per tile and stream
 * the d/64 products tdpbsud(rows, qpack) give (qi + 128) . r for 16 clips and 16 queries, streams alternating two
 * result tiles; a tile's clips are folded into their videos' bests while the next tile's products run (two result
 * buffers). Returns 0 where memory for the buffers was lacking */
__attribute__((target("avx512f,amx-tile,amx-int8"))) static int scan_i8_amx(
    const int8_t *rows, const float *mult, const int32_t *rowsum, int S, int d, const uint8_t *qpack,
    const float *qscale, int nq, const int64_t *off, int64_t lo, int64_t hi, int64_t V, float *out)
{
    size_t row_len = (size_t)S * d;
    int K = d / 64;
    int32_t *cbuf = aligned_alloc(64, (size_t)S * 2048); /* two tiles' results, every stream */
    int8_t *pad = aligned_alloc(64, 16 * row_len);
    __m512 best[64];
    if (!cbuf || !pad) {
        free(cbuf);
        free(pad);
        return 0;
    }
    struct tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 6; t++) { /* tmm0-1: 16 x 16 int32 results, tmm2-3: 16 clips' 64 bytes, tmm4-5: the queries' */
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    for (int s = 0; s < S; s++)
        best[s] = _mm512_set1_ps(-INFINITY);
    int64_t v = lo, c1 = off[hi], prev = -1;
    int prev_n = 0, half = 0;
    for (int64_t c0 = off[lo]; c0 < c1; c0 += 16, half ^= 1) {
        int n = c1 - c0 < 16 ? (int)(c1 - c0) : 16;
        const int8_t *base = rows + (size_t)c0 * row_len;
        if (n < 16) {
            memset(pad, 0, 16 * row_len);
            memcpy(pad, base, (size_t)n * row_len);
            base = pad;
        }
        int32_t *res = cbuf + (size_t)half * S * 256;
        if (c0 + 16 * AHEAD + 16 <= c1) { /* a later tile's rows on their way (tile loads wait for each line) */
            const char *p = (const char *)(rows + (size_t)(c0 + 16 * AHEAD) * row_len);
            for (size_t b = 0; b < 16 * row_len; b += 64)
                _mm_prefetch(p + b, _MM_HINT_T0);
        }
        for (int s = 0; s < S; s++) {
            const int8_t *A = base + (size_t)s * d;
            const uint8_t *Q = qpack + (size_t)s * d * 16;
            if (s & 1) {
                STREAM_PRODUCTS(1, A, Q, K, row_len);
                _tile_stored(1, res + (size_t)s * 256, 64);
            } else {
                STREAM_PRODUCTS(0, A, Q, K, row_len);
                _tile_stored(0, res + (size_t)s * 256, 64);
            }
        }
        if (prev >= 0)
            v = fold_tile(cbuf + (size_t)(half ^ 1) * S * 256, prev_n, prev, v, off, rowsum, mult, qscale, S, nq, V,
                          out, best);
        prev = c0;
        prev_n = n;
    }
    if (prev >= 0)
        v = fold_tile(cbuf + (size_t)(half ^ 1) * S * 256, prev_n, prev, v, off, rowsum, mult, qscale, S, nq, V, out,
                      best);
    for (; v < hi; v++)
        finish(best, qscale, S, nq, v, V, out);
    _tile_release();
    free(cbuf);
    free(pad);
    return 1;
}

/* asks Linux for the AMX tile state (once a process); 0 where the CPU or the kernel has none */
int ms_amx_permit(void)
{
#if defined(__linux__)
    unsigned a, b, c, dx;
    __cpuid_count(7, 0, a, b, c, dx);
    if (!((dx >> 24) & 1) || !((dx >> 25) & 1)) /* AMX-TILE, AMX-INT8 */
        return 0;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}
#endif

void ms_scan_i8(const int8_t *rows, const float *mult, const int32_t *rowsum, int S, int d, const uint8_t *qpack,
                const float *qscale, int nq, const int64_t *off, int64_t lo, int64_t hi, int64_t V, float *out)
{
#if MS_X86
    if (ms_have_amx && d % 64 == 0 && scan_i8_amx(rows, mult, rowsum, S, d, qpack, qscale, nq, off, lo, hi, V, out))
        return;
    if (ms_have_vnni) {
        scan_i8_vnni(rows, mult, rowsum, S, d, qpack, qscale, nq, off, lo, hi, V, out);
        return;
    }
#endif
    scan_i8_scalar(rows, mult, rowsum, S, d, qpack, qscale, nq, off, lo, hi, V, out);
}
