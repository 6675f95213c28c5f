/* A float32 linear layer for a few rows: out = x W^T + b with x (M, K), M small (a query's tokens), compiled by
 * `pip install .`; momentsearch.text.small_linear is the Python side, with the NumPy twin the tests compare it with.
 *
 * A BERT encoder at batch 1 multiplies about 10 token rows by each weight matrix. A general GEMM (MKL through
 * torch) packs the weight for every call and splits poorly at that size: 55 GFLOP/s on one core here, 67 on two.
 * This reads a weight packed once (pack(): W^T in panels of 32 columns, each panel K x 32 floats, contiguous)
 * and keeps a tile of up to 12 rows x 32 columns in 24 AVX-512 registers: per step of k, two panel loads, one
 * broadcast per row and two FMAs per row, the classic register-blocked micro-kernel, so the panels stream from
 * memory once per call and the rows stay in L1. Each output is the float32 sum over k in order k = 0..K-1 (one
 * FMA chain per output, starting from the bias), so it equals NumPy's float64 product up to float32 rounding.
 * At about 11 rows the weights' bytes bound it (MiniLM's 42.5 MB in 2.7 ms, 15.5 GB/s on one core here; a
 * software prefetch made no difference).
 * linear() releases the GIL and takes a range of panels: callers may split the columns over their own threads. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define LIN_X86 1
#else
#define LIN_X86 0
#endif

#define NR 32 /* columns a panel holds: two registers of 16 floats */
#define MR 12 /* rows a tile holds: 24 accumulators, 2 panel registers, 1 broadcast */

static int have_avx512 = 0;

#if LIN_X86
#define TARGET __attribute__((target("avx512f,fma")))

/* rows x[0..mr) (stride K) times one panel (K x 32), plus bias[0..32), into out[0..mr) columns [0, ncols) */
static inline __attribute__((always_inline)) TARGET void tile(int mr, const float *x, int K, const float *panel,
                                                              const float *bias, float *out, int ldo, int ncols)
{
    __m512 a0[MR], a1[MR];
    __m512 b0 = _mm512_loadu_ps(bias), b1 = _mm512_loadu_ps(bias + 16);
    for (int m = 0; m < mr; m++) {
        a0[m] = b0;
        a1[m] = b1;
    }
    for (int k = 0; k < K; k++) {
        const float *p = panel + (size_t)k * NR;
        __m512 w0 = _mm512_loadu_ps(p), w1 = _mm512_loadu_ps(p + 16);
        for (int m = 0; m < mr; m++) {
            __m512 v = _mm512_set1_ps(x[(size_t)m * K + k]);
            a0[m] = _mm512_fmadd_ps(v, w0, a0[m]);
            a1[m] = _mm512_fmadd_ps(v, w1, a1[m]);
        }
    }
    __mmask16 k0 = ncols >= 16 ? 0xFFFF : (__mmask16)((1u << ncols) - 1);
    __mmask16 k1 = ncols >= 32 ? 0xFFFF : ncols <= 16 ? 0 : (__mmask16)((1u << (ncols - 16)) - 1);
    for (int m = 0; m < mr; m++) {
        _mm512_mask_storeu_ps(out + (size_t)m * ldo, k0, a0[m]);
        _mm512_mask_storeu_ps(out + (size_t)m * ldo + 16, k1, a1[m]);
    }
}

#define TILE_CASE(R) case R: tile(R, x, K, panel, bias, out, ldo, ncols); break;

static TARGET void tile_any(int mr, const float *x, int K, const float *panel, const float *bias, float *out,
                            int ldo, int ncols)
{
    switch (mr) {
        TILE_CASE(1) TILE_CASE(2) TILE_CASE(3) TILE_CASE(4) TILE_CASE(5) TILE_CASE(6)
        TILE_CASE(7) TILE_CASE(8) TILE_CASE(9) TILE_CASE(10) TILE_CASE(11) TILE_CASE(12)
    }
}

/* panels [p0, p1) of out (M, N) = x (M, K) W^T + bias; the rows in tiles of at most 12, sized evenly */
static TARGET void linear_avx512(const float *x, int M, int K, const float *packed, const float *bias, int N,
                                 float *out, int p0, int p1)
{
    int tiles = (M + MR - 1) / MR;
    for (int p = p0; p < p1; p++) {
        const float *panel = packed + (size_t)p * K * NR;
        int ncols = N - p * NR < NR ? N - p * NR : NR;
        for (int t = 0, m0 = 0; t < tiles; t++) {
            int mr = (M - m0) / (tiles - t); /* the rows left, shared evenly by the tiles left */
            tile_any(mr, x + (size_t)m0 * K, K, panel, bias + (size_t)p * NR, out + (size_t)m0 * N + p * NR, N, ncols);
            m0 += mr;
        }
    }
}
#endif

static int need(Py_buffer *b, Py_ssize_t bytes, const char *what)
{
    if (b->len < bytes) {
        PyErr_Format(PyExc_ValueError, "linear: %s holds %zd bytes, needs %zd", what, b->len, bytes);
        return 0;
    }
    return 1;
}

static PyObject *py_linear(PyObject *self, PyObject *args)
{
    Py_buffer b[4]; /* x (M, K), packed (P, K, 32), bias (P * 32), out (M, N) */
    int M, K, N, p0, p1;
    if (!PyArg_ParseTuple(args, "y*iiy*y*iw*ii", &b[0], &M, &K, &b[1], &b[2], &N, &b[3], &p0, &p1))
        return NULL;
    int P = (N + NR - 1) / NR;
    PyObject *ret = NULL;
    if (!have_avx512)
        PyErr_SetString(PyExc_RuntimeError, "linear: this CPU has no AVX-512 (small_linear.available() is False)");
    else if (M < 1 || K < 1 || N < 1 || p0 < 0 || p1 < p0 || p1 > P)
        PyErr_SetString(PyExc_ValueError, "linear: M, K, N >= 1 and 0 <= p0 <= p1 <= ceil(N / 32)");
    else if (need(&b[0], (Py_ssize_t)M * K * 4, "x") && need(&b[1], (Py_ssize_t)P * K * NR * 4, "packed") &&
             need(&b[2], (Py_ssize_t)P * NR * 4, "bias") && need(&b[3], (Py_ssize_t)M * N * 4, "out")) {
#if LIN_X86
        Py_BEGIN_ALLOW_THREADS
        linear_avx512((const float *)b[0].buf, M, K, (const float *)b[1].buf, (const float *)b[2].buf, N,
                      (float *)b[3].buf, p0, p1);
        Py_END_ALLOW_THREADS
#endif
        ret = Py_None;
        Py_INCREF(ret);
    }
    for (int i = 0; i < 4; i++)
        PyBuffer_Release(&b[i]);
    return ret;
}

/* the AVX-512 path on where asked for and the CPU has it; returns whether it is on */
static int set_simd(int on)
{
#if LIN_X86
    __builtin_cpu_init();
    have_avx512 = on && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
#endif
    return have_avx512;
}

static PyObject *py_set_simd(PyObject *self, PyObject *args)
{
    int on;
    if (!PyArg_ParseTuple(args, "p", &on))
        return NULL;
    return PyBool_FromLong(set_simd(on));
}

static PyMethodDef methods[] = {
    {"linear", py_linear, METH_VARARGS, "x, M, K, packed, bias, N, out, p0, p1: panels [p0, p1) of out = x W^T + b"},
    {"set_simd", py_set_simd, METH_VARARGS, "use the AVX-512 path where the CPU has it (True), or none; returns it"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linear", NULL, -1, methods};

PyMODINIT_FUNC PyInit__linear(void)
{
    set_simd(1);
    return PyModule_Create(&module);
}
