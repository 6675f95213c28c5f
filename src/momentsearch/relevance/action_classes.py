"""Relevance truth for Charades-STA from Charades' own action annotations (issue 43).

Charades-STA's sentences were written for Charades action intervals. Each query gets the **class** of the
action interval of its video that best overlaps its span (the largest tIoU; ties: the earlier interval in
the file), provided that tIoU is at least ``min_tiou`` (0.5); otherwise the query has no class.

The **grade** of a moment (video v, span [s, e)) for a query of class c is the largest tIoU of [s, e) with
an interval of class c in video v, 0 when v has none. So the query's own annotated moment grades its
matching tIoU, an action interval of class c anywhere grades 1.0, and an unrelated moment 0.

:func:`action_relevance` writes the table the evaluation reads (:class:`MomentRelevance`): for each query
with a class, every interval of that class in every video of the corpus, at grade 1.0.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from momentsearch.data.corpus import Corpus
from momentsearch.data.loaders.charades_actions import ActionTable, grade, query_classes, tiou
from momentsearch.data.relevance import MomentRelevance


def action_relevance(corpus: Corpus, table: ActionTable, min_tiou: float = 0.5) -> MomentRelevance:
    """Each classed query -> every interval of its class in the corpus's videos, at grade 1.0 (rows of queries
    without a class are empty)."""
    vids = list(corpus.videos)
    vindex = {v: i for i, v in enumerate(vids)}
    by_class: dict[str, list[tuple[int, float, float, float]]] = defaultdict(list)
    for v in vids:
        dur = corpus.videos[v].duration
        for a in table.actions.get(v, []):
            st, ed = min(a.start, dur), min(a.end, dur)
            if ed > st:
                by_class[a.cls].append((vindex[v], st, ed, 1.0))
    classes = query_classes(corpus, table, min_tiou)
    rows = [by_class.get(classes[m.query_id] or "", []) for m in corpus.moments]
    return MomentRelevance.from_rows([m.query_id for m in corpus.moments], vids, rows)


def same_class_counts(corpus: Corpus, table: ActionTable, min_tiou: float = 0.5) -> np.ndarray:
    """Per query: how many other queries' moments, in other videos, share its class (its same-class negatives
    if every video were one query's negative)."""
    classes = query_classes(corpus, table, min_tiou)
    per_class: dict[str, int] = defaultdict(int)
    per_video_class: dict[tuple[str, str], int] = defaultdict(int)
    for m in corpus.moments:
        c = classes[m.query_id]
        if c is not None:
            per_class[c] += 1
            per_video_class[(m.video_id or "", c)] += 1
    return np.array([per_class[c] - per_video_class[(m.video_id or "", c)] if (c := classes[m.query_id]) else 0
                     for m in corpus.moments])


__all__ = ["action_relevance", "grade", "query_classes", "same_class_counts", "tiou"]
