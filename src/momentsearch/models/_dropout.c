/* Dropout with hashed masks, compiled by `pip install .`; momentsearch.models.dropout is the Python side, with
 * the torch twin (the same integer hash in int64 tensor ops) that the tests compare it with bit for bit.
 *
 * torch's CPU dropout draws its mask with bernoulli_, which on a CPU that is not Intel runs serially through
 * mt19937: about 9 ns an element here, so a training epoch of MINUTE's localizer spent a third of its time drawing
 * attention-dropout masks. Here element i of a call with a 64-bit seed is kept when
 *     h = f(f(f(lo ^ k0) ^ k1) ^ hi) >= threshold,   lo, hi = the low and high 32 bits of i,
 *     k0, k1 = the low and high 32 bits of splitmix64(seed),  threshold = round(p 2^32)
 * with f Chris Wellons' lowbias32 integer hash (x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b;
 * x ^= x >> 16), splitmix64 Steele et al.'s 64-bit output function (z = seed + 0x9e3779b97f4a7c15;
 * z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9; z = (z ^ z >> 27) * 0x94d049bb133111eb; z ^ z >> 31), and out[i] = x[i] *
 * scale where kept, 0 where not. The keys go through splitmix64 so that seeds 1 and 2 share no key half: with
 * equal k1 two seeds' masks would be one another's with the index XOR-ed by k0 ^ k0'. A mask is a function of (seed, i) alone, so
 * the backward pass recomputes it instead of storing it, and every path (the plain, AVX2 and AVX-512 loops, the
 * torch twin on CPU or CUDA) draws the same mask. One pass over the input; the plain loop is bound by the hash,
 * the vector loops come near the pace of memory (benchmarks/training_speed.py).
 * apply() releases the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#define DROP_X86 1
#else
#define DROP_X86 0
#endif

static inline uint32_t lowbias32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* the loop, written once; each path below is this code compiled for its instruction set (integer hash and one
 * float32 product per element, so every path gives the same bits). The index is walked in runs of one high half
 * (hi constant, lo a 32-bit counter) and the mask is applied to the product's bits, with no branch: the compiler
 * vectorises the loop (8 lanes with AVX2, 16 with AVX-512): the product's bits where kept, +0.0f where dropped, as
 * `h >= threshold ? x * scale : 0.0f` gives. */
#define DROPOUT_LOOP                                                                                     \
    for (int64_t i = start; i < end;) {                                                                  \
        uint32_t hi = (uint32_t)((uint64_t)i >> 32), lo0 = (uint32_t)i;                                  \
        uint64_t room = (((uint64_t)hi + 1) << 32) - (uint64_t)i, left = (uint64_t)(end - i);            \
        uint64_t n = left < room ? left : room; /* up to 2^32: the rest of this high half */            \
        const float *xs = x + (i - start);                                                               \
        uint32_t *os = (uint32_t *)(out + (i - start));                                                  \
        for (uint64_t j = 0; j < n; j++) {                                                               \
            uint32_t h = lowbias32(lowbias32(lowbias32((lo0 + (uint32_t)j) ^ k0) ^ k1) ^ hi);            \
            float v = xs[j] * scale;                                                                     \
            uint32_t b;                                                                                  \
            memcpy(&b, &v, 4);                                                                           \
            os[j] = b & (0U - (uint32_t)(h >= threshold));                                               \
        }                                                                                                \
        i += (int64_t)n;                                                                                 \
    }

static void dropout_plain(const float *x, float *out, int64_t start, int64_t end, uint32_t k0, uint32_t k1,
                          uint32_t threshold, float scale)
{
    DROPOUT_LOOP
}

#if DROP_X86
__attribute__((target("avx2")))
static void dropout_avx2(const float *x, float *out, int64_t start, int64_t end, uint32_t k0, uint32_t k1,
                         uint32_t threshold, float scale)
{
    DROPOUT_LOOP
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
static void dropout_avx512(const float *x, float *out, int64_t start, int64_t end, uint32_t k0, uint32_t k1,
                           uint32_t threshold, float scale)
{
    DROPOUT_LOOP
}
#endif

/* the path in force: 0 plain, 1 AVX2, 2 AVX-512 */
static int simd_level = 0;
static const char *const LEVEL_NAMES[] = {"plain", "avx2", "avx512"};

/* the best path the CPU has, up to the one asked for ("none" 0, "avx2" 1, "all" 2) */
static int set_simd(int most)
{
    simd_level = 0;
#if DROP_X86
    __builtin_cpu_init();
    if (most >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        simd_level = 2;
    else if (most >= 1 && __builtin_cpu_supports("avx2"))
        simd_level = 1;
#endif
    return simd_level;
}

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static PyObject *py_apply(PyObject *self, PyObject *args)
{
    Py_buffer bx, bo; /* x (n,) float32, out (n,) float32 */
    long long start;
    unsigned long long seed;
    unsigned int threshold;
    float scale;
    if (!PyArg_ParseTuple(args, "y*w*LKIf", &bx, &bo, &start, &seed, &threshold, &scale))
        return NULL;
    PyObject *ret = NULL;
    Py_ssize_t n = bx.len / 4;
    if (bx.len % 4 != 0 || bo.len != bx.len)
        PyErr_SetString(PyExc_ValueError, "apply: x and out must be float32 buffers of one length");
    else if (start < 0 || start > INT64_MAX - (long long)n)
        PyErr_SetString(PyExc_ValueError, "apply: start must be >= 0, and start + len(x) below 2^63");
    else {
        uint64_t key = splitmix64((uint64_t)seed);
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        const float *x = (const float *)bx.buf;
        float *out = (float *)bo.buf;
        int64_t s = (int64_t)start, e = (int64_t)start + (int64_t)n;
        Py_BEGIN_ALLOW_THREADS
#if DROP_X86
        if (simd_level == 2)
            dropout_avx512(x, out, s, e, k0, k1, threshold, scale);
        else if (simd_level == 1)
            dropout_avx2(x, out, s, e, k0, k1, threshold, scale);
        else
#endif
            dropout_plain(x, out, s, e, k0, k1, threshold, scale);
        Py_END_ALLOW_THREADS
        ret = Py_None;
        Py_INCREF(ret);
    }
    PyBuffer_Release(&bx);
    PyBuffer_Release(&bo);
    return ret;
}

static PyObject *py_set_simd(PyObject *self, PyObject *args)
{
    const char *want;
    if (!PyArg_ParseTuple(args, "s", &want))
        return NULL;
    int most = !strcmp(want, "none") ? 0 : !strcmp(want, "avx2") ? 1 : !strcmp(want, "all") ? 2 : -1;
    if (most < 0) {
        PyErr_Format(PyExc_ValueError, "set_simd: %R is not one of 'none', 'avx2', 'all'", PyTuple_GET_ITEM(args, 0));
        return NULL;
    }
    return PyUnicode_FromString(LEVEL_NAMES[set_simd(most)]);
}

static PyMethodDef methods[] = {
    {"apply", py_apply, METH_VARARGS,
     "x, out, start, seed, threshold, scale: out[j] = x[j] * scale where element start + j is kept, else 0"},
    {"set_simd", py_set_simd, METH_VARARGS,
     "'none', 'avx2' or 'all': use the best loop the CPU has up to that one; returns its name"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dropout", NULL, -1, methods};

PyMODINIT_FUNC PyInit__dropout(void)
{
    set_simd(2);
    return PyModule_Create(&module);
}
