"""Building the ``scan`` first stage (:mod:`momentsearch.search.first_stage.scan`) over an index, or carrying it
over to a grown index: the codebooks stay, the kept videos keep their codes, the new ones are coded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.console import say
from momentsearch.errors import FirstStageError
from momentsearch.search.first_stage.scan import (
    ScanFirstStage,
    default_coarse,
    default_m,
    layout_key,
    stage_key,
)
from momentsearch.search.first_stage.scan_rows8 import default_rows, grow_rows8, load_or_build
from momentsearch.search.index import VideoIndex, clip_rows
from momentsearch.search.stages import VectorSource


def build_scan(source: VectorSource, folder: Path, params: dict[str, str], progress: bool = False) -> ScanFirstStage:
    """The scan stage over ``source``'s index, loaded from ``folder`` when built there for these videos,
    else built (and kept there)."""
    dim = int(source.index.array(source.array).shape[-1])
    try:
        m = int(params.pop("m", 0)) or default_m(dim)
        rescore = int(params.pop("rescore", 0)) or None
        threads = int(params.pop("threads", 0)) or None
        coarse_m = int(params.pop("coarse", -1))
        refine = int(params.pop("refine", 0)) or None
        bits = int(params.pop("bits", 8))
        exact = int(params.pop("exact", 0)) or None
        int8_batch = int(params.pop("int8_batch", 0)) or None
    except ValueError:
        raise FirstStageError("scan: m, rescore, threads, coarse, refine, bits, exact and int8_batch must be whole "
                              "numbers") from None
    rows = params.pop("rows", "") or default_rows(source.index)
    if rows not in ("fp16", "int8"):
        raise FirstStageError(f"scan: rows={rows!r}; known: fp16 (the index's rows re-scored), int8 (a tier of int8 "
                              "rows first, the fp16 rows of the best `exact` videos last)")
    if (exact is not None and exact < 1) or (int8_batch is not None and int8_batch < 1):
        raise FirstStageError(f"scan: exact={exact} and int8_batch={int8_batch} must be at least 1 (0: the default)")
    if (exact is not None or int8_batch is not None) and rows != "int8":
        raise FirstStageError("scan: exact= (the videos read in fp16 after the int8 rows) and int8_batch= (the smallest "
                              "batch scored from the int8 rows instead of the codes) need rows=int8")
    if bits not in (7, 8):
        raise FirstStageError(f"scan: bits={bits}; known: 8 (256 centroids a sub-quantizer), 7 (128)")
    loops = params.pop("loops", "auto")
    if loops not in ("auto", "compiled", "numba"):
        raise FirstStageError(f"scan: loops={loops!r}; known: auto, compiled, numba")
    if params:
        raise FirstStageError(f"scan: unknown parameter(s) {sorted(params)}; known: m, rescore, threads, loops, coarse, refine, bits, rows, exact, "
                              "int8_batch")
    if m < 1 or dim % m:
        raise FirstStageError(f"scan: m={m} must divide the vectors' dimension {dim} (e.g. m={default_m(dim)})")
    index = source.index
    if coarse_m < 0:
        coarse_m = default_coarse(m, int(index.offsets[-1])) if loops != "numba" else 0
    if coarse_m and (coarse_m >= m or dim % coarse_m):
        raise FirstStageError(f"scan: coarse={coarse_m} must be below m={m} and divide the dimension {dim} (0: none)")
    where = folder / stage_key(source, m, coarse_m, bits)
    layout = layout_key(index)
    kw: dict[str, Any] = {"rescore": rescore, "threads": threads, "loops": loops, "refine": refine, "exact": exact,
                          "int8_batch": int8_batch}
    if rows == "int8":
        kw["rows8"] = load_or_build(source, folder, layout, progress)
    stage = ScanFirstStage.load(where, source, layout, **kw)
    if stage is not None:
        return stage
    if progress:
        say(f"building the first stage scan ({m} {bits}-bit codes a clip and stream"
            + (f", and {coarse_m} for the coarse pass" if coarse_m else "") + f") in {where}")
    tiers = []
    for mm in (m, coarse_m) if coarse_m else (m,):
        books = ScanFirstStage.train(source, mm, progress, bits)
        tiers.append((books, ScanFirstStage.encode(source, books, progress=progress)))
    stage = ScanFirstStage(source, *tiers[0], coarse=tiers[1] if coarse_m else None, **kw)
    stage.save(where, layout)
    return stage


def grow_scan(old_folder: Path, new_folder: Path, source: VectorSource, old_index: VideoIndex, old_rows: np.ndarray,
              progress: bool = False) -> int:
    """Carry every scan stage in ``old_folder`` built over ``old_index`` over to ``source``'s (the new)
    index, into ``new_folder``: ``old_rows[v]`` is new video v's row in the old index, or -1 when it is
    new or was re-encoded. The codebooks stay; kept videos keep their codes, the others are coded; the int8
    tier (``rows=int8``) keeps the kept videos' rows. Returns the number of stages and tiers carried over."""
    offsets = np.asarray(source.index.offsets, np.int64)
    # each new clip row's source: a row of the old codes (a kept video has as many clips), or -1 (coded now)
    src = np.full(int(offsets[-1]), -1, np.int64)
    kept = np.flatnonzero(old_rows >= 0)
    src[clip_rows(offsets, kept)] = clip_rows(np.asarray(old_index.offsets, np.int64), old_rows[kept])
    fresh = np.flatnonzero(src < 0)
    done = 0

    class OldSource:  # the old stage's and tier's files are checked against the old index's layout
        index, array, n_streams, cosine = old_index, source.array, source.n_streams, source.cosine

    for old in sorted(old_folder.glob("scan_*")) if old_folder.is_dir() else []:
        try:
            stage = ScanFirstStage.load(old, OldSource, layout_key(old_index), threads=1, loops="numba")
        except FirstStageError:
            continue  # damaged: the next search builds it anew
        if stage is None:
            continue  # built over other videos than the old index's: nothing to carry
        codes = _grown_codes(source, stage.codebooks, stage.codes, src, fresh, progress)
        coarse = None if stage.coarse is None else (
            stage.coarse[0], _grown_codes(source, stage.coarse[0], stage.coarse[1], src, fresh, progress))
        grown = ScanFirstStage(source, stage.codebooks, codes, threads=1, loops="numba", coarse=coarse)
        grown.save(new_folder / old.name, layout_key(source.index))
        grown.close()
        stage.close()
        done += 1
    return done + grow_rows8(old_folder, new_folder, source, OldSource, src)  # type: ignore[arg-type]


def _grown_codes(source: VectorSource, books: np.ndarray, codes: list[np.ndarray], src: np.ndarray, fresh: np.ndarray,
                 progress: bool) -> list[np.ndarray]:
    """Per stream: the kept clips' codes from their old rows (``src``), the ``fresh`` clips coded now."""
    new_codes = ScanFirstStage.encode(source, books, fresh, progress) if len(fresh) else None
    out = []
    for s, c in enumerate(codes):
        grown = np.empty((len(src), c.shape[1]), np.uint8)
        grown[src >= 0] = c[src[src >= 0]]
        if new_codes is not None:
            grown[fresh] = new_codes[s]
        out.append(grown)
    return out
