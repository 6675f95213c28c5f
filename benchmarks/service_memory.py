"""Does the served search leak? The service in process (FastAPI's TestClient), the soak's request mix, and
``tracemalloc``: after a warm-up, ``--requests`` more, then the growth of every Python allocation site and of
the process's own memory (RssAnon).

    python benchmarks/service_memory.py --index runs/demo/index [--requests 2000]

Exit status 1 when a site grew by more than 1 MB.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_soak import request  # noqa: E402


def rss_anon_mib() -> float:
    return next(int(x.split()[1]) for x in Path("/proc/self/status").read_text().splitlines()
                if x.startswith("RssAnon")) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    from fastapi.testclient import TestClient

    import momentsearch
    from momentsearch.service.app import create_app

    with TestClient(create_app(momentsearch.load(args.index, device="cpu"), access_log=False)) as c:
        for i in range(300):
            path, kw = _req(i)
            c.post(path, **kw)
        gc.collect()
        tracemalloc.start(25)
        before, r0 = tracemalloc.take_snapshot(), rss_anon_mib()
        for i in range(300, 300 + args.requests):
            path, kw = _req(i)
            r = c.post(path, **kw)
            if r.status_code != 200:
                raise SystemExit(f"request {i}: {r.status_code} {r.text[:200]}")
        gc.collect()
        after, r1 = tracemalloc.take_snapshot(), rss_anon_mib()
    growth = after.compare_to(before, "traceback")[:5]
    print(f"{args.requests} requests: RssAnon {r0:.1f} -> {r1:.1f} MiB")
    for st in growth:
        print(f"  {st.size_diff / 1e6:+.4f} MB in {st.count_diff:+d} blocks at {st.traceback.format()[-1].strip()}")
    return 1 if growth and growth[0].size_diff > 1e6 else 0


def _req(i: int) -> tuple[str, dict]:
    path, body = request(i)
    return path, {"json": body}


if __name__ == "__main__":
    sys.exit(main())
