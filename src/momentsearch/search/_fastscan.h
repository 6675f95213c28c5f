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
extern int ms_have_amx;  /* its AMX path (tile products of 16 clips and 16 queries) is on */
int ms_amx_permit(void); /* asks Linux for the AMX tile state; 0 where the CPU or the kernel has none */
extern int ms_have_vnni; /* the int8 pass's AVX-512 VNNI path is on (set by set_simd) */
/* out[b * V + v], b < nq <= 16, v in [lo, hi): each video's best clip per stream under the int8 queries packed in
 * qpack (S, d/4, 16, 4) as qi + 128, times mult (N, S) and qscale (S, 16), the mean over streams (_fastscan_i8.c) */
void ms_scan_i8(const int8_t *rows, const float *mult, const int32_t *rowsum, int S, int d, const uint8_t *qpack,
                const float *qscale, int nq, const int64_t *off, int64_t lo, int64_t hi, int64_t V, float *out);
#endif
