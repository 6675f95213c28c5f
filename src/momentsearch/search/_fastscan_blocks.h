/* The scan's inner loops, included by _fastscan.c: the scores of one block of 64 clips under one query's byte
 * tables (m sub-quantizers, 256 bytes of table each), and the largest of a run of them. */
#ifndef MOMENTSEARCH_FASTSCAN_BLOCKS_H
#define MOMENTSEARCH_FASTSCAN_BLOCKS_H
#include <stdint.h>

#include "_fastscan.h"

#define BLOCK 64

/* ---- the block scores: 64 clips x B queries -> buf[q * 64 + i] ------------------------------------- */

/* portable loops; mask 0x7F for 7-bit codes (the top bit ignored, as vpermi2b ignores it) */
static inline void block_scores_masked(const uint8_t *cb, int m, const uint8_t *luts, int B, uint16_t *buf,
                                       uint8_t mask)
{
    for (int q = 0; q < B; q++) {
        const uint8_t *L = luts + (size_t)q * m * 256;
        for (int i = 0; i < BLOCK; i++) {
            int pos = i < 32 ? 2 * i : 2 * (i - 32) + 1;
            uint32_t s = 0;
            for (int j = 0; j < m; j++)
                s += L[j * 256 + (cb[j * BLOCK + pos] & mask)];
            buf[q * BLOCK + i] = (uint16_t)s;
        }
    }
}

static void block_scores_scalar(const uint8_t *cb, int m, const uint8_t *luts, int B, uint16_t *buf)
{
    block_scores_masked(cb, m, luts, B, buf, 0xFF);
}

static void block_scores_scalar7(const uint8_t *cb, int m, const uint8_t *luts, int B, uint16_t *buf)
{
    block_scores_masked(cb, m, luts, B, buf, 0x7F);
}

#if MS_X86
#define VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,sse4.1")))

/* 64 look-ups of sub-quantizer table t (256 bytes) by the codes c: two vpermi2b and a blend by the code's top bit */
VBMI_TARGET static inline __m512i look8(const uint8_t *t, __m512i c)
{
    __m512i lo = _mm512_permutex2var_epi8(_mm512_loadu_si512(t), c, _mm512_loadu_si512(t + 64));
    __m512i hi = _mm512_permutex2var_epi8(_mm512_loadu_si512(t + 128), c, _mm512_loadu_si512(t + 192));
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(c), lo, hi);
}

/* 7-bit codes (128 centroids): the table is two registers and 64 look-ups one vpermi2b (bit 6 of the code picks
 * the register, bits 0-5 the byte; bit 7 is ignored) */
VBMI_TARGET static inline __m512i look7(const uint8_t *t, __m512i c)
{
    return _mm512_permutex2var_epi8(_mm512_loadu_si512(t), c, _mm512_loadu_si512(t + 64));
}

/* The block's 64 sums per query: the looked-up bytes added in 16-bit lanes, even and odd bytes apart, over two
 * independent chains of sub-quantizers; lane i of a0 is even byte 2i (clip i) plus 256 x odd byte (clip 32 + i),
 * modulo 2^16 */
#define BLOCK_SCORES_VBMI(NAME, LOOK)                                                                        \
    VBMI_TARGET static inline void NAME(const uint8_t *cb, int m, const uint8_t *luts, int B, uint16_t *buf) \
    {                                                                                                      \
        for (int q = 0; q < B; q++) {                                                                      \
            const uint8_t *L = luts + (size_t)q * m * 256;                                                 \
            __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();                              \
            __m512i b0 = _mm512_setzero_si512(), b1 = _mm512_setzero_si512();                              \
            int j = 0;                                                                                     \
            for (; j + 1 < m; j += 2) {                                                                    \
                __m512i r = LOOK(L + j * 256, _mm512_loadu_si512((const void *)(cb + j * BLOCK)));         \
                a0 = _mm512_add_epi16(a0, r);                                                              \
                a1 = _mm512_add_epi16(a1, _mm512_srli_epi16(r, 8));                                       \
                __m512i r2 = LOOK(L + (j + 1) * 256, _mm512_loadu_si512((const void *)(cb + (j + 1) * BLOCK))); \
                b0 = _mm512_add_epi16(b0, r2);                                                             \
                b1 = _mm512_add_epi16(b1, _mm512_srli_epi16(r2, 8));                                       \
            }                                                                                              \
            if (j < m) {                                                                                   \
                __m512i r = LOOK(L + j * 256, _mm512_loadu_si512((const void *)(cb + j * BLOCK)));         \
                a0 = _mm512_add_epi16(a0, r);                                                              \
                a1 = _mm512_add_epi16(a1, _mm512_srli_epi16(r, 8));                                        \
            }                                                                                              \
            a0 = _mm512_add_epi16(a0, b0);                                                                 \
            a1 = _mm512_add_epi16(a1, b1);                                                                 \
            __m512i even = _mm512_sub_epi16(a0, _mm512_slli_epi16(a1, 8));                                 \
            _mm512_storeu_si512((void *)(buf + q * BLOCK), even);                                          \
            _mm512_storeu_si512((void *)(buf + q * BLOCK + 32), a1);                                       \
        }                                                                                                  \
    }

BLOCK_SCORES_VBMI(block_scores_vbmi, look8)
BLOCK_SCORES_VBMI(block_scores_vbmi7, look7)
#endif

static uint16_t seg_max_scalar(const uint16_t *x, int s, int e)
{
    uint16_t mx = 0;
    for (int i = s; i < e; i++)
        mx = x[i] > mx ? x[i] : mx;
    return mx;
}

#if MS_X86
/* the largest of x[s..e-1] (0 <= s < e <= 64): two masked loads, a max, a halving reduction, phminposuw */
__attribute__((target("avx512f,avx512bw,avx512vl,sse4.1")))
static inline uint16_t seg_max_avx512(const uint16_t *x, int s, int e)
{
    uint64_t bits = (e == 64 ? ~0ULL : ((1ULL << e) - 1)) & ~((1ULL << s) - 1);
    __m512i a = _mm512_maskz_loadu_epi16((__mmask32)(bits & 0xFFFFFFFFu), x);
    __m512i b = _mm512_maskz_loadu_epi16((__mmask32)(bits >> 32), x + 32);
    __m512i mx = _mm512_max_epu16(a, b);
    __m256i h = _mm256_max_epu16(_mm512_castsi512_si256(mx), _mm512_extracti64x4_epi64(mx, 1));
    __m128i g = _mm_max_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    g = _mm_minpos_epu16(_mm_xor_si128(g, _mm_set1_epi32(-1)));
    return (uint16_t)(0xFFFF - _mm_extract_epi16(g, 0));
}
#endif

#endif
