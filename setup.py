"""The two compiled parts, plain C with SIMD paths chosen at run time: the scan first stage's loops
(src/momentsearch/search/_fastscan*.c) and the query encoder's linear layers for a few rows
(src/momentsearch/text/_linear.c). Optional: without a C compiler ``pip install .`` still works, the scan
stage uses its numba loops (``momentsearch.search.fastscan.available()`` says which) and the encoder torch's
``F.linear`` (``momentsearch.text.small_linear.available()``)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("momentsearch.search._fastscan",
                             ["src/momentsearch/search/_fastscan.c", "src/momentsearch/search/_fastscan_rescore.c",
                              "src/momentsearch/search/_fastscan_i8.c"],
                             depends=["src/momentsearch/search/_fastscan.h", "src/momentsearch/search/_fastscan_blocks.h"],
                             extra_compile_args=["-O3", "-std=c11"], optional=True),
                           Extension("momentsearch.text._linear", ["src/momentsearch/text/_linear.c"],
                                     extra_compile_args=["-O3", "-std=c11"], optional=True)])
