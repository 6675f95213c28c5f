/* What _fastscan.c (the scan, the Python module) and _fastscan_rescore.c (the exact re-score) share. */
#ifndef MOMENTSEARCH_FASTSCAN_H
#define MOMENTSEARCH_FASTSCAN_H
#include <stdint.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define MS_X86 1
#else
#define MS_X86 0
#endif

extern int ms_have_avx512; /* the re-score's AVX-512 + F16C path is on (set by the module's set_simd) */

/* out[u]: the mean over the S streams of video videos[u]'s best clip by inner product with q (S, d), divided
 * by the clip's norm when cosine; rows (N, S, d) fp16 bit patterns */
void ms_rescore(const uint16_t *rows, int S, int d, const float *q, const int64_t *off, const int64_t *videos,
                int64_t U, int cosine, float *out);
/* the same over int8 rows (N, S, d): each (clip, stream) product times mult (N, S) */
void ms_rescore_i8(const int8_t *rows, const float *mult, int S, int d, const float *q, const int64_t *off,
                   const int64_t *videos, int64_t U, float *out);
#endif
