"""The one compiled part: the scan first stage's loops (src/momentsearch/search/_fastscan*.c), plain C with
SIMD paths chosen at run time. Optional: without a C compiler ``pip install .`` still works, and the
scan stage uses its numba loops (``momentsearch.search.fastscan.available()`` says which)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("momentsearch.search._fastscan",
                             ["src/momentsearch/search/_fastscan.c", "src/momentsearch/search/_fastscan_rescore.c",
                              "src/momentsearch/search/_fastscan_i8.c"],
                             depends=["src/momentsearch/search/_fastscan.h", "src/momentsearch/search/_fastscan_blocks.h"],
                             extra_compile_args=["-O3", "-std=c11"], optional=True)])
