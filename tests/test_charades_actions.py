"""Charades' action annotations as Charades-STA's relevance truth (issue 43): the CSV's ``actions`` field read
with the project's error on malformed rows, each query's class and a moment's grade, by hand on real lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import shared

from momentsearch.data.loaders.charades_actions import Action, load_charades_actions
from momentsearch.data.loaders.charades_sta import load_charades_sta
from momentsearch.errors import AnnotationError
from momentsearch.relevance.action_classes import action_relevance, grade, query_classes, same_class_counts

HEADER = "id,subject,scene,quality,relevance,verified,script,objects,descriptions,actions,length\n"


def test_the_real_files_by_hand() -> None:
    """46GP8 (train): c092 11.90-21.20 and c147 0.00-12.60; its Charades-STA lines 'person looking out of a
    window.' and 'person watching something out a window.' span 11.9-21.2: tIoU 1.0 with c092 and
    0.7 / 21.2 = 0.033 with c147, so their class is c092."""
    table = load_charades_actions(shared("charades_sta/Charades_v1_train.csv"),
                                  shared("charades_sta/Charades_v1_test.csv"))
    assert table.actions["46GP8"] == [Action("c092", 11.9, 21.2), Action("c147", 0.0, 12.6)]
    assert table.actions["N11GT"][0] == Action("c098", 8.6, 14.2) and len(table.actions["N11GT"]) == 4
    assert len(table.actions) == 9848 and len(table.classes()) == 157 and table.reversed == 7
    train = load_charades_sta(shared("charades_sta/charades_sta_train.txt"))
    classes = query_classes(train, table)
    mine = [m for m in train.moments if m.video_id == "46GP8"]
    assert [m.text for m in mine] == ["person looking out of a window.", "person watching something out a window."]
    assert {classes[m.query_id] for m in mine} == {"c092"}
    assert grade(table, "c092", "46GP8", 11.9, 21.2) == 1.0
    assert grade(table, "c092", "46GP8", 0.0, 12.6) == pytest.approx(0.7 / 21.2)
    assert grade(table, "c092", "N11GT", 0.0, 18.0) == 0.0 and grade(table, None, "46GP8", 11.9, 21.2) == 0.0
    # the whole train split: all but 3 of the 12,408 queries overlap an interval at tIoU >= 0.5, 156 classes
    assert len(classes) == 12408 and sum(c is None for c in classes.values()) == 3
    assert len({c for c in classes.values() if c}) == 156
    # about 234 same-class moments in other videos per query (1.9 % of the split)
    assert 230 < same_class_counts(train, table).mean() < 240


def test_the_table_holds_every_interval_of_the_querys_class(tmp_path: Path) -> None:
    (tmp_path / "Charades_v1_test.csv").write_text(
        HEADER + 'AAA,s,Kitchen,6,7,Yes,x,y,z,"c001 1.0 5.0;c002 4.0 9.0",10.0\n'
                 'BBB,s,Kitchen,6,7,Yes,x,y,z,"c001 2.0 6.0",8.0\nCCC,s,Kitchen,6,7,Yes,x,y,z,,5.0\n')
    (tmp_path / "charades_sta_test.txt").write_text("AAA 1.0 5.5##a person opens a door.\n"
                                                    "AAA 4.0 9.0##a person sits down.\n"
                                                    "CCC 0.0 2.0##someone waits.\n"
                                                    "BBB 2.0 6.0##a person opens a box.\n")
    corpus = load_charades_sta(tmp_path / "charades_sta_test.txt")
    table = load_charades_actions(tmp_path / "Charades_v1_test.csv")
    classes = query_classes(corpus, table)
    assert list(classes.values()) == ["c001", "c002", None, "c001"]  # 1-5.5 vs 1-5: tIoU 4/4.5; CCC: no action
    rel = action_relevance(corpus, table)
    row = slice(int(rel.indptr[0]), int(rel.indptr[1]))
    got = [(rel.video_ids[v], s, e, float(g)) for v, s, e, g in
           zip(rel.video_idx[row], rel.start[row], rel.end[row], rel.value[row], strict=True)]
    assert got == [("AAA", 1.0, 5.0, 1.0), ("BBB", 2.0, 6.0, 1.0)]  # every c001 interval in the corpus
    assert np.diff(rel.indptr).tolist() == [2, 1, 0, 2]


@pytest.mark.parametrize("field,message", [
    ("c01 1.0 2.0", "an action must be 'cNNN START END'"), ("c001 1.0", "an action must be 'cNNN START END'"),
    ("c001 a 2.0", "action times must be numbers"), ("c001 1.0 inf", "must be finite seconds >= 0"),
    ("c001 -1.0 2.0", "must be finite seconds >= 0")])
def test_a_malformed_action_names_file_and_line(tmp_path: Path, field: str, message: str) -> None:
    f = tmp_path / "Charades_v1_train.csv"
    f.write_text(HEADER + "OK1,s,x,1,1,Yes,x,y,z,c001 0.0 1.0,3.0\n" + f'BAD,s,x,1,1,Yes,x,y,z,"{field}",3.0\n')
    with pytest.raises(AnnotationError, match=message) as e:
        load_charades_actions(f)
    assert "Charades_v1_train.csv:3" in str(e.value)


def test_a_reversed_interval_is_read_and_counted(tmp_path: Path) -> None:
    f = tmp_path / "Charades_v1_train.csv"
    f.write_text(HEADER + 'A,s,x,1,1,Yes,x,y,z,"c001 5.0 2.0;c002 1.0 1.5",9.0\n')
    table = load_charades_actions(f)
    assert table.actions["A"] == [Action("c001", 2.0, 5.0), Action("c002", 1.0, 1.5)] and table.reversed == 1
    with pytest.raises(AnnotationError, match="appears twice"):
        load_charades_actions(f, f)
