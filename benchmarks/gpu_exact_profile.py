"""Where a batch of the exact GPU stage goes at 1M videos (torch.profiler over ``score_videos``, which copies all of
(B, V) to the host), beside two other ways to take each video's max, checked equal to it:

    python benchmarks/gpu_exact_profile.py [VIDEOS] [DEVICE]      # 1000000 cuda; "2000 cpu" smoke-tests it

Its output at 3188adb, when ``score_videos`` made one (B, N, S) matrix (an einsum, then ``cat``) and the exact
stage took its top k on the host: ``benchmarks/results/gpu_exact_profile_h200_3188adb.txt`` (the copy of (B, V)
to pageable host memory took 186 of 238 ms at batch 64); since, the device path is the "per-stream" one below and
the stage's top k is taken on the device (``ExactFirstStage.retrieve``)."""
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_first_stage import STREAMS, D, corpus
from momentsearch.search.clipmax import ClipMaxRetriever, as_read, streamwise_video_max
from momentsearch.search.stages import Queries

dev = torch.device(sys.argv[2] if len(sys.argv) > 2 else "cuda")
sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
V = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
index = corpus(V, dev)
r = ClipMaxRetriever(as_read, index, "h1", cosine=True, device=dev, chunk_clips=1_000_000)
clips = r._prepared()
lengths = r._lengths(dev)
rng = np.random.default_rng(1)
Q = torch.from_numpy(rng.normal(size=(64, STREAMS, D)).astype(np.float32))
M = torch.ones(64, STREAMS, dtype=torch.bool)

def alt(q):  # q: (B, S, d) on device, unit: the device path in one piece (score_videos scans in pieces)
    return streamwise_video_max(q, clips, lengths).cpu()

def alt2(q):  # max via a padded (V, Lmax) index into a row with -inf appended
    Lmax = int(lengths.max())
    off = torch.cumsum(lengths, 0) - lengths
    ar = torch.arange(Lmax, device=dev)
    idx = off[:, None] + ar[None]
    N = int(lengths.sum())
    idx = torch.where(ar[None] < lengths[:, None], idx, torch.full_like(idx, N))
    out = None
    for s in range(STREAMS):
        sim = torch.cat([q[:, s] @ h[:, s].T for h in clips] + [torch.full((q.shape[0], 1), -torch.inf, device=dev)], 1)
        m = torch.empty(q.shape[0], len(lengths), device=dev)
        for v0 in range(0, len(lengths), 100_000):
            m[:, v0:v0 + 100_000] = sim[:, idx[v0:v0 + 100_000]].amax(-1)
        out = m if out is None else out + m
    return (out / STREAMS).cpu()

def timed(f, *a, n=3):
    ts = []
    for _ in range(n):
        sync(); t = time.perf_counter(); out = f(*a); sync()
        ts.append((time.perf_counter() - t) * 1000)
    return out, ts

for b in (1, 16, 64):
    qs = Queries(Q[:b], M[:b])
    ref, ta = timed(r.score_videos, qs)
    qd = F.normalize(as_read(qs.to(dev)), dim=-1).float()
    a1, tb = timed(alt, qd)
    a2, tc = timed(alt2, qd)
    same = [torch.allclose(ref, x, atol=1e-5) and bool((ref.topk(100).indices == x.topk(100).indices).all())
            for x in (a1, a2)]
    print(f"batch {b}: score_videos {[round(x, 1) for x in ta]} ms; per-stream (B,N) {[round(x, 1) for x in tb]}; "
          f"padded gather {[round(x, 1) for x in tc]}; equal {same}", flush=True)

if dev.type == 'cpu':
    sys.exit(0)
from torch.profiler import ProfilerActivity, profile

qs = Queries(Q, M)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    r.score_videos(qs); torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12), flush=True)
