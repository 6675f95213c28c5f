"""The three compiled parts, plain C with SIMD paths chosen at run time: the scan first stage's loops
(src/momentsearch/search/_fastscan*.c), the query encoder's linear layers for a few rows
(src/momentsearch/text/_linear.c) and training's hashed dropout masks (src/momentsearch/models/_dropout.c).
Optional: without a C compiler ``pip install .`` still works, the scan stage uses its numba loops
(``momentsearch.search.fastscan.available()`` says which), the encoder torch's ``F.linear``
(``momentsearch.text.small_linear.available()``) and the hashed masks their torch twin
(``momentsearch.models.dropout.compiled()``)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("momentsearch.search._fastscan",
                             ["src/momentsearch/search/_fastscan.c", "src/momentsearch/search/_fastscan_rescore.c",
                              "src/momentsearch/search/_fastscan_i8.c"],
                             depends=["src/momentsearch/search/_fastscan.h", "src/momentsearch/search/_fastscan_blocks.h"],
                             extra_compile_args=["-O3", "-std=c11"], optional=True),
                           Extension("momentsearch.text._linear", ["src/momentsearch/text/_linear.c"],
                                     extra_compile_args=["-O3", "-std=c11"], optional=True),
                           Extension("momentsearch.models._dropout", ["src/momentsearch/models/_dropout.c"],
                                     extra_compile_args=["-O3", "-std=c11"], optional=True)])
