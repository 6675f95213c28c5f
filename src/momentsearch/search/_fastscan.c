/* The scan first stage's two loops, compiled by `pip install .` (momentsearch.search.fastscan is the
 * Python side and holds the NumPy twins the tests compare them with).
 *
 * video_max_u8: each video's best clip under a product-quantized inner product whose look-up tables are
 *   quantized to bytes, for a batch of queries. The codes are laid out in blocks of 64 clips: for each
 *   block and sub-quantizer j, 64 bytes, the code of clip i at byte 2i (i < 32) or 2(i - 32) + 1 (i >= 32).
 *   With AVX-512 VBMI the 256-entry table of a sub-quantizer sits in four registers and 64 look-ups are two
 *   vpermi2b and a blend by the code's top bit (FAISS's fast-scan, 4-bit codes and pshufb, made 8-bit);
 *   with 7-bit codes (128 centroids) one vpermi2b and no blend. The bytes are summed in 16-bit lanes
 *   (even and odd bytes apart, FAISS's trick), so that a clip's
 *   score is an exact integer sum, whichever path computes it. Each block is read once for the whole
 *   batch of queries. out[q, v] = max over the clips of video v of sum_j lut[q, j, code_j]
 *   (0 for a video without clips).
 * rescore_f16 (_fastscan_rescore.c): the exact scores of some videos: fp16 clip rows (N, S, d) converted in
 *   registers (F16C),
 *   the inner product (divided by the row's norm for cosine) in fp32, each stream's best clip, the mean
 *   over streams.
 * rescore_i8 (_fastscan_rescore.c): the same over int8 rows, each product times its row's factor.
 * scan_i8 (_fastscan_i8.c): every video's approximate score from the int8 rows for up to 16 queries at once
 *   (AVX-512 VNNI: one vpdpbusd per 4 dimensions of a row and 16 queries), each row read once for the batch.
 * All release the GIL: callers split the work over their own threads. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#include "_fastscan.h"

#define MAX_BATCH 64

static int have_vbmi = 0;

#include "_fastscan_blocks.h"

/* out[q, v] for videos lo..hi-1. The blocks go by in chunks that stay in L2 (CHUNK blocks); within a chunk
 * one query at a time, its tables in L1: each block scored, then the max of each video's part of it */
#define CHUNK 32
#define SCAN_RANGE(NAME, ATTR, BLOCK_SCORES, SEG_MAX)                                                        \
    ATTR static void NAME(const uint8_t *codes, int m, const uint8_t *luts, int B, const int64_t *off,      \
                          int64_t lo, int64_t hi, uint16_t *out, int64_t V)                                 \
    {                                                                                                      \
        uint16_t buf[BLOCK] __attribute__((aligned(64)));                                                  \
        for (int q = 0; q < B; q++)                                                                        \
            memset(out + q * V + lo, 0, (size_t)(hi - lo) * sizeof(uint16_t));                            \
        int64_t c0 = off[lo], c1 = off[hi], first = lo;                                                    \
        if (c1 <= c0)                                                                                      \
            return;                                                                                        \
        for (int64_t b0 = c0 / BLOCK; b0 * BLOCK < c1; b0 += CHUNK) {                                      \
            int64_t v = first;                                                                             \
            for (int q = 0; q < B; q++) {                                                                  \
                const uint8_t *L = luts + (size_t)q * m * 256;                                             \
                uint16_t *oq = out + q * V;                                                                \
                v = first;                                                                                 \
                for (int64_t b = b0; b < b0 + CHUNK && b * BLOCK < c1; b++) {                              \
                    int64_t bs = b * BLOCK, be = bs + BLOCK;                                               \
                    BLOCK_SCORES(codes + b * (int64_t)m * BLOCK, m, L, 1, buf);                            \
                    while (v < hi && off[v] < be) {                                                        \
                        int64_t s = off[v] > bs ? off[v] : bs, e = off[v + 1] < be ? off[v + 1] : be;      \
                        if (e > s) {                                                                       \
                            uint16_t mx = SEG_MAX(buf, (int)(s - bs), (int)(e - bs));                      \
                            if (mx > oq[v])                                                                \
                                oq[v] = mx;                                                                \
                        }                                                                                  \
                        if (off[v + 1] <= be)                                                              \
                            v++;                                                                           \
                        else                                                                               \
                            break;                                                                         \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
            first = v; /* the first video not finished before the next chunk */                            \
        }                                                                                                  \
    }

SCAN_RANGE(scan_range_scalar, , block_scores_scalar, seg_max_scalar)
SCAN_RANGE(scan_range_scalar7, , block_scores_scalar7, seg_max_scalar)
#if MS_X86
SCAN_RANGE(scan_range_vbmi, VBMI_TARGET, block_scores_vbmi, seg_max_avx512)
SCAN_RANGE(scan_range_vbmi7, VBMI_TARGET, block_scores_vbmi7, seg_max_avx512)
#endif

/* bits: 8 (256 centroids a sub-quantizer) or 7 (128: one vpermi2b a look-up) */
static void scan_range(const uint8_t *codes, int m, const uint8_t *luts, int B, const int64_t *off, int64_t lo,
                       int64_t hi, uint16_t *out, int64_t V, int bits)
{
#if MS_X86
    if (have_vbmi) {
        (bits == 7 ? scan_range_vbmi7 : scan_range_vbmi)(codes, m, luts, B, off, lo, hi, out, V);
        return;
    }
#endif
    (bits == 7 ? scan_range_scalar7 : scan_range_scalar)(codes, m, luts, B, off, lo, hi, out, V);
}

/* One query over listed videos: each video's own blocks only, the blocks of the video PREFETCH_AHEAD places
 * on already on their way */
#define PREFETCH_AHEAD 3
#define VIDEO_LIST(NAME, ATTR, BLOCK_SCORES, SEG_MAX)                                                        \
    ATTR static void NAME(const uint8_t *codes, int m, const uint8_t *L, const int64_t *off, const int64_t *vid, \
                          int64_t U, uint16_t *out)                                                         \
    {                                                                                                      \
        uint16_t buf[BLOCK] __attribute__((aligned(64)));                                                  \
        for (int64_t u = 0; u < U; u++) {                                                                  \
            if (MS_X86 && u + PREFETCH_AHEAD < U) {                                                        \
                int64_t w = vid[u + PREFETCH_AHEAD], p0 = off[w] / BLOCK * m * BLOCK;                      \
                int64_t p1 = (off[w + 1] + BLOCK - 1) / BLOCK * m * BLOCK;                                 \
                for (int64_t i = p0; i < p1 && i < p0 + 16384; i += 64)                                    \
                    PREFETCH(codes + i);                                                                   \
            }                                                                                              \
            int64_t v = vid[u], c0 = off[v], c1 = off[v + 1];                                              \
            uint16_t best = 0;                                                                             \
            for (int64_t b = c0 / BLOCK; b * BLOCK < c1; b++) {                                            \
                int64_t bs = b * BLOCK, s = c0 > bs ? c0 : bs, e = c1 < bs + BLOCK ? c1 : bs + BLOCK;      \
                BLOCK_SCORES(codes + b * (int64_t)m * BLOCK, m, L, 1, buf);                                \
                uint16_t mx = SEG_MAX(buf, (int)(s - bs), (int)(e - bs));                                  \
                best = mx > best ? mx : best;                                                              \
            }                                                                                              \
            out[v] = best;                                                                                 \
        }                                                                                                  \
    }

#if MS_X86
#define PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define PREFETCH(p) ((void)(p))
#endif
VIDEO_LIST(video_list_scalar, , block_scores_scalar, seg_max_scalar)
VIDEO_LIST(video_list_scalar7, , block_scores_scalar7, seg_max_scalar)
#if MS_X86
VIDEO_LIST(video_list_vbmi, VBMI_TARGET, block_scores_vbmi, seg_max_avx512)
VIDEO_LIST(video_list_vbmi7, VBMI_TARGET, block_scores_vbmi7, seg_max_avx512)
#endif

static void video_list(const uint8_t *codes, int m, const uint8_t *L, const int64_t *off, const int64_t *vid,
                       int64_t U, uint16_t *out, int bits)
{
#if MS_X86
    if (have_vbmi) {
        (bits == 7 ? video_list_vbmi7 : video_list_vbmi)(codes, m, L, off, vid, U, out);
        return;
    }
#endif
    (bits == 7 ? video_list_scalar7 : video_list_scalar)(codes, m, L, off, vid, U, out);
}

/* ---- Python ---------------------------------------------------------------------------------------- */

static int need(Py_buffer *b, Py_ssize_t bytes, const char *what)
{
    if (b->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, %zd needed", what, b->len, bytes);
        return 0;
    }
    return 1;
}

static void release(Py_buffer *b, int n)
{
    for (int i = 0; i < n; i++)
        PyBuffer_Release(&b[i]);
}

/* every listed video inside the offsets (and the rows), its clips in order */
static int check_videos(const int64_t *o, const int64_t *vid, Py_ssize_t U, int64_t V, int64_t n_rows,
                        const char *what)
{
    for (Py_ssize_t u = 0; u < U; u++)
        if (vid[u] < 0 || vid[u] >= V || o[vid[u]] < 0 || o[vid[u]] > o[vid[u] + 1] || o[vid[u] + 1] > n_rows) {
            PyErr_Format(PyExc_ValueError, "%s: video %lld outside the index", what, (long long)vid[u]);
            return 0;
        }
    return 1;
}

static PyObject *py_video_max_u8(PyObject *self, PyObject *args)
{
    Py_buffer b[4]; /* codes, luts, offsets, out */
    int m, B, bits;
    long long lo, hi, V;
    if (!PyArg_ParseTuple(args, "y*iy*iy*LLw*Li", &b[0], &m, &b[1], &B, &b[2], &lo, &hi, &b[3], &V, &bits))
        return NULL;
    const int64_t *o = (const int64_t *)b[2].buf;
    if (m < 1 || m > 257 || B < 1 || B > MAX_BATCH || lo < 0 || hi < lo || hi > V || (bits != 7 && bits != 8)) {
        PyErr_SetString(PyExc_ValueError,
                        "video_max_u8: 1 <= m <= 257, 1 <= B <= 64, 0 <= lo <= hi <= V, bits 7 or 8");
    } else if (need(&b[2], (V + 1) * 8, "offsets") && need(&b[1], (Py_ssize_t)B * m * 256, "luts") &&
               need(&b[3], (Py_ssize_t)B * V * 2, "out")) {
        if (o[0] != 0 || o[lo] > o[hi] || o[hi] > o[V])
            PyErr_SetString(PyExc_ValueError, "video_max_u8: offsets must start at 0 and never decrease");
        else if (need(&b[0], (o[V] + BLOCK - 1) / BLOCK * m * BLOCK, "codes")) {
            Py_BEGIN_ALLOW_THREADS
            scan_range((const uint8_t *)b[0].buf, m, (const uint8_t *)b[1].buf, B, o, lo, hi, (uint16_t *)b[3].buf, V, bits);
            Py_END_ALLOW_THREADS
            release(b, 4);
            Py_RETURN_NONE;
        }
    }
    release(b, 4);
    return NULL;
}

static PyObject *py_video_max_u8_list(PyObject *self, PyObject *args)
{
    Py_buffer b[5]; /* codes, luts, offsets, videos, out */
    int m, bits;
    long long V;
    if (!PyArg_ParseTuple(args, "y*iy*y*y*w*Li", &b[0], &m, &b[1], &b[2], &b[3], &b[4], &V, &bits))
        return NULL;
    const int64_t *o = (const int64_t *)b[2].buf, *vid = (const int64_t *)b[3].buf;
    Py_ssize_t U = b[3].len / 8;
    if (m < 1 || m > 257 || (bits != 7 && bits != 8)) {
        PyErr_SetString(PyExc_ValueError, "video_max_u8_list: 1 <= m <= 257, bits 7 or 8");
    } else if (need(&b[2], (V + 1) * 8, "offsets") && need(&b[1], (Py_ssize_t)m * 256, "luts") &&
               need(&b[4], V * 2, "out") && need(&b[0], (o[V] + BLOCK - 1) / BLOCK * m * BLOCK, "codes") &&
               check_videos(o, vid, U, V, o[V], "video_max_u8_list")) {
        Py_BEGIN_ALLOW_THREADS
        video_list((const uint8_t *)b[0].buf, m, (const uint8_t *)b[1].buf, o, vid, U, (uint16_t *)b[4].buf, bits);
        Py_END_ALLOW_THREADS
        release(b, 5);
        Py_RETURN_NONE;
    }
    release(b, 5);
    return NULL;
}

static PyObject *py_rescore_f16(PyObject *self, PyObject *args)
{
    Py_buffer b[5]; /* rows, q, offsets, videos, out */
    int S, d, cosine;
    long long n_rows, V;
    if (!PyArg_ParseTuple(args, "y*LiiLy*y*y*pw*", &b[0], &n_rows, &S, &d, &V, &b[1], &b[2], &b[3], &cosine, &b[4]))
        return NULL;
    const int64_t *o = (const int64_t *)b[2].buf, *vid = (const int64_t *)b[3].buf;
    Py_ssize_t U = b[3].len / 8;
    if (S < 1 || S > 64 || d < 1) {
        PyErr_SetString(PyExc_ValueError, "rescore_f16: 1 <= S <= 64 streams and d >= 1");
    } else if (need(&b[0], (Py_ssize_t)n_rows * S * d * 2, "rows") && need(&b[1], (Py_ssize_t)S * d * 4, "q") &&
               need(&b[2], (V + 1) * 8, "offsets") && need(&b[4], U * 4, "out") &&
               check_videos(o, vid, U, V, n_rows, "rescore_f16")) {
        Py_BEGIN_ALLOW_THREADS
        ms_rescore((const uint16_t *)b[0].buf, S, d, (const float *)b[1].buf, o, vid, U, cosine, (float *)b[4].buf);
        Py_END_ALLOW_THREADS
        release(b, 5);
        Py_RETURN_NONE;
    }
    release(b, 5);
    return NULL;
}

static PyObject *py_rescore_i8(PyObject *self, PyObject *args)
{
    Py_buffer b[6]; /* rows, mult, q, offsets, videos, out */
    int S, d;
    long long n_rows, V;
    if (!PyArg_ParseTuple(args, "y*y*LiiLy*y*y*w*", &b[0], &b[1], &n_rows, &S, &d, &V, &b[2], &b[3], &b[4], &b[5]))
        return NULL;
    const int64_t *o = (const int64_t *)b[3].buf, *vid = (const int64_t *)b[4].buf;
    Py_ssize_t U = b[4].len / 8;
    if (S < 1 || S > 64 || d < 1) {
        PyErr_SetString(PyExc_ValueError, "rescore_i8: 1 <= S <= 64 streams and d >= 1");
    } else if (need(&b[0], (Py_ssize_t)n_rows * S * d, "rows") && need(&b[1], (Py_ssize_t)n_rows * S * 4, "mult") &&
               need(&b[2], (Py_ssize_t)S * d * 4, "q") && need(&b[3], (V + 1) * 8, "offsets") &&
               need(&b[5], U * 4, "out") && check_videos(o, vid, U, V, n_rows, "rescore_i8")) {
        Py_BEGIN_ALLOW_THREADS
        ms_rescore_i8((const int8_t *)b[0].buf, (const float *)b[1].buf, S, d, (const float *)b[2].buf, o, vid, U,
                      (float *)b[5].buf);
        Py_END_ALLOW_THREADS
        release(b, 6);
        Py_RETURN_NONE;
    }
    release(b, 6);
    return NULL;
}

static PyObject *py_scan_i8(PyObject *self, PyObject *args)
{
    Py_buffer b[7]; /* rows, mult, rowsum, qpack, qscale, offsets, out */
    int S, d, nq;
    long long n_rows, lo, hi, V;
    if (!PyArg_ParseTuple(args, "y*y*y*Liiy*y*iy*LLLw*", &b[0], &b[1], &b[2], &n_rows, &S, &d, &b[3], &b[4], &nq,
                          &b[5], &lo, &hi, &V, &b[6]))
        return NULL;
    const int64_t *o = (const int64_t *)b[5].buf;
    if (S < 1 || S > 64 || d < 4 || d % 4 || nq < 1 || nq > 16 || lo < 0 || hi < lo || hi > V) {
        PyErr_SetString(PyExc_ValueError, "scan_i8: 1 <= S <= 64, d a multiple of 4, 1 <= nq <= 16, 0 <= lo <= hi <= V");
    } else if (need(&b[0], (Py_ssize_t)n_rows * S * d, "rows") && need(&b[1], (Py_ssize_t)n_rows * S * 4, "mult") &&
               need(&b[2], (Py_ssize_t)n_rows * S * 4, "rowsum") && need(&b[3], (Py_ssize_t)S * d * 16, "qpack") &&
               need(&b[4], (Py_ssize_t)S * 16 * 4, "qscale") && need(&b[5], (V + 1) * 8, "offsets") &&
               need(&b[6], (Py_ssize_t)nq * V * 4, "out")) {
        if (o[0] != 0 || o[lo] > o[hi] || o[hi] > n_rows)
            PyErr_SetString(PyExc_ValueError, "scan_i8: offsets must start at 0, never decrease and stay in the rows");
        else {
            Py_BEGIN_ALLOW_THREADS
            ms_scan_i8((const int8_t *)b[0].buf, (const float *)b[1].buf, (const int32_t *)b[2].buf, S, d,
                       (const uint8_t *)b[3].buf, (const float *)b[4].buf, nq, o, lo, hi, V, (float *)b[6].buf);
            Py_END_ALLOW_THREADS
            release(b, 7);
            Py_RETURN_NONE;
        }
    }
    release(b, 7);
    return NULL;
}

static PyObject *paths(void)
{
    return Py_BuildValue("{s:O,s:O,s:O,s:O}", "vbmi", have_vbmi ? Py_True : Py_False, "avx512",
                         ms_have_avx512 ? Py_True : Py_False, "vnni", ms_have_vnni ? Py_True : Py_False, "amx",
                         ms_have_amx ? Py_True : Py_False);
}

static PyObject *py_simd_paths(PyObject *self, PyObject *args) { return paths(); }

static PyObject *py_set_simd(PyObject *self, PyObject *args)
{
    int on, amx = 1;
    if (!PyArg_ParseTuple(args, "p|p", &on, &amx))
        return NULL;
#if MS_X86
    __builtin_cpu_init();
    have_vbmi = on && __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
    ms_have_avx512 = on && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c") &&
                  __builtin_cpu_supports("fma");
    ms_have_vnni = on && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
    static int amx_permitted = -1; /* asked once a process */
    if (on && amx_permitted < 0 && __builtin_cpu_supports("avx512f"))
        amx_permitted = ms_amx_permit();
    ms_have_amx = on && amx_permitted > 0 && amx;
#endif
    return paths();
}

static PyMethodDef methods[] = {
    {"video_max_u8", py_video_max_u8, METH_VARARGS, "codes, m, luts, B, offsets, lo, hi, out, V, bits"},
    {"video_max_u8_list", py_video_max_u8_list, METH_VARARGS, "codes, m, luts, offsets, videos, out, V, bits"},
    {"rescore_f16", py_rescore_f16, METH_VARARGS, "rows, n_rows, S, d, V, q, offsets, videos, cosine, out"},
    {"rescore_i8", py_rescore_i8, METH_VARARGS, "rows, mult, n_rows, S, d, V, q, offsets, videos, out"},
    {"scan_i8", py_scan_i8, METH_VARARGS, "rows, mult, rowsum, n_rows, S, d, qpack, qscale, nq, offsets, lo, hi, V, out"},
    {"simd_paths", py_simd_paths, METH_NOARGS, "which SIMD paths are on"},
    {"set_simd", py_set_simd, METH_VARARGS, "use the SIMD paths where the CPU has them (True) or the scalar ones; amx=False keeps AMX off"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastscan(void)
{
    PyObject *mod = PyModule_Create(&module);
    if (mod) {
        PyObject *on = Py_BuildValue("(i)", 1);
        PyObject *r = on ? py_set_simd(NULL, on) : NULL;
        Py_XDECREF(on);
        Py_XDECREF(r);
        if (!r) {
            Py_DECREF(mod);
            return NULL;
        }
    }
    return mod;
}
