"""A cold start of a served index: a fresh process loads it (``momentsearch.load``) and answers 25 new queries, its
mapped rows advised ``MADV_RANDOM`` (``random``) or put back to the kernel's read-around (``normal``); prints one JSON
line with the p50, the mean, the first query and the major page faults a query. Drop the page cache before each run
(``sync; echo 3 > /proc/sys/vm/drop_caches``, as root) for a cold start.

    python benchmarks/madvise_cold.py /tmp/index100k random 100
    python benchmarks/madvise_cold.py /tmp/index100k normal 100
"""

import itertools
import json
import os
import sys
import time

import numpy as np

from momentsearch.api import load
from momentsearch.search.index import advise

index, mode, off = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode not in ("random", "normal"):
    sys.exit("usage: madvise_cold.py INDEX random|normal OFFSET")
s = load(index, device="cpu")
advise("MADV_RANDOM" if mode == "random" else "MADV_NORMAL", *s.index.arrays.values())
ADJ = ("red", "blue", "small", "old", "wooden", "white", "green", "large")
WHO = ("a man", "a woman", "a child", "a dog", "an old man")
DOES = ("opens", "carries", "throws", "picks up", "looks at")
WHAT = ("the door", "a box", "a cup", "the ball", "a book")
qs = [f"{w} {d} {a} {x.split()[-1]}" for w, d, a, x in itertools.product(WHO, DOES, ADJ, WHAT)]
pid = os.getpid()


def major_faults() -> int:
    return int(open(f"/proc/{pid}/stat").read().split()[11])


lat, f0 = [], major_faults()
for q in qs[off: off + 25]:
    t = time.perf_counter()
    s.search(q, k=10)
    lat.append(1000 * (time.perf_counter() - t))
print(json.dumps({"mode": mode, "p50_ms": round(float(np.median(lat)), 1), "mean_ms": round(float(np.mean(lat)), 1),
                  "first_ms": round(lat[0], 1), "major_faults_per_query": (major_faults() - f0) / 25}))
