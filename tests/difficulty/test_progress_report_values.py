"""Task.report_progress checks its arguments itself, before looking at the hook, so a plug-in task's bad report fails
the same way with the pool's bar on or off (before, ``report_progress(None)`` failed inside gradprobe's hook with
``'>' not supported between 'NoneType' and 'int'`` only when the bar was on, and a negative done or total was taken
silently); and a ``line`` or ``row`` bar stops at its known total (before, done past it showed past 100%)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gradprobe.difficulty.progress import pool_problems
from gradprobe.tasks import Problem, Task
from pool_bars import captured  # noqa: F401,E402 (a fixture: tests/pool_bars.py)

DONE = "report_progress: done must be a whole number >= 0 (items made or rows read since the last report), got "
TOTAL = "report_progress: total must be a whole number >= 0 (rows or lines newly known to come, or None), got "
SPLIT = ("report_progress: split must be None or one of ('train', 'heldout') (the request the items are made for), "
         "got ")
SEED = "report_progress: seed must be None or an int (the data seed of the request the items are made for), got "
FIX = "; fix the task's call (Reporting.problems)"


class Reporting(Task):
    """A plug-in task whose ``problems`` makes the reports it is given (``report_progress(*args, **kwargs)`` each)."""

    name = "reporting"

    def __init__(self, unit, reports):
        self.progress_unit, self.reports = unit, reports

    def problems(self, split, n, *, seed=0):
        for args, kwargs in self.reports:
            self.report_progress(*args, **kwargs)
        return [Problem(id=f"reporting/{split}/{i}", question=f"{i} + 0?", answer=str(i)) for i in range(n)]


BAD = [
    ((None,), {}, TypeError, DONE + "None (NoneType)"),
    ((-3,), {}, ValueError, DONE + "-3"),
    ((0.5,), {}, TypeError, DONE + "0.5 (float)"),
    ((True,), {}, TypeError, DONE + "True (bool)"),
    ((np.float64(2.0),), {}, TypeError, DONE + "np.float64(2.0) (float64)"),
    ((), {"total": "10"}, TypeError, TOTAL + "'10' (str)"),
    ((), {"total": -5}, ValueError, TOTAL + "-5"),
    ((), {"total": 2.5}, TypeError, TOTAL + "2.5 (float)"),
    ((1,), {"split": "test"}, ValueError, SPLIT + "'test'"),
    ((1,), {"split": 0}, TypeError, SPLIT + "0"),
    ((1,), {"seed": "0"}, TypeError, SEED + "'0' (str)"),
    ((1,), {"seed": 1.0}, TypeError, SEED + "1.0 (float)"),
    ((1,), {"seed": False}, TypeError, SEED + "False (bool)"),
]


@pytest.mark.parametrize("progress", [True, False], ids=["bar_on", "bar_off"])
@pytest.mark.parametrize("unit", ["prompt", "line", "row", None])
@pytest.mark.parametrize("args, kwargs, error, message", BAD, ids=[m.split(" must")[0][17:] + "=" + m.split("got ")[1]
                                                                   for *_, m in BAD])
def test_a_bad_report_is_refused_with_its_argument_named_bar_on_or_off(captured, progress, unit, args, kwargs, error,
                                                                       message):
    err, bars = captured
    task = Reporting(unit, [(args, kwargs)])
    with pytest.raises(error) as caught:
        pool_problems(task, 4, seed=0, desc="pool", progress=progress)
    assert str(caught.value) == message + FIX
    assert "on_progress" not in vars(task) and task.on_progress is None
    assert all(b.n == 0 for b in bars)


def test_a_bad_report_is_refused_with_no_builder_listening():
    task = Reporting("row", [((None,), {})])
    with pytest.raises(TypeError, match=re.escape(DONE + "None (NoneType)" + FIX)):
        task.problems("train", 2, seed=0)
    assert Reporting("row", [((-1,), {"split": "heldout"})]).on_progress is None
    with pytest.raises(ValueError, match=re.escape(DONE + "-1" + FIX)):
        Reporting("row", [((-1,), {"split": "heldout"})]).problems("heldout", 2, seed=0)


def test_good_reports_reach_the_hook_as_plain_ints():
    """numpy integers are whole numbers too; the hook gets them as ints (tqdm's count stays an int)."""
    task = Reporting("line", [])
    got = []
    task.on_progress = lambda **kw: got.append(kw)
    task.report_progress(np.int64(3), total=np.int32(5), split="train", seed=np.int64(2))
    task.report_progress(0, total=0, split="heldout", seed=7)
    task.report_progress(2)
    task.report_progress()
    assert got == [{"done": 3, "total": 5, "split": "train", "seed": 2},
                   {"done": 0, "total": 0, "split": "heldout", "seed": 7},
                   {"done": 2, "total": None, "split": None, "seed": None},
                   {"done": 0, "total": None, "split": None, "seed": None}]
    assert [type(v) for v in got[0].values()] == [int, int, str, int]


@pytest.mark.parametrize("unit", ["line", "row"])
def test_a_line_or_row_bar_stops_at_its_known_total(captured, unit):
    """Done past the total announced so far is capped there: 5 rows of 2 announced end at 2/2, not 5/2 (250%); a
    second file's total lets the bar go on, to 5/5 after 1 + 10 more reported. With no total announced (a streamed
    split that never tells its length) there is nothing to cap at: every row reported is counted."""
    err, bars = captured
    for reports in ([((), {"total": 2}), ((5,), {})], [((), {"total": 2}), ((1,), {}), ((), {"total": 3}), ((10,), {})],
                    [((4,), {}), ((3,), {})]):
        assert len(pool_problems(Reporting(unit, reports), 3, seed=0, desc="pool", progress=True)) == 3
    assert [(b.n, b.total) for b in bars] == [(2, 2), (5, 5), (7, None)]
    shown = [int(p) for p in re.findall(r"(\d+)%\|", err.getvalue())]
    assert shown and max(shown) == 100, err.getvalue()
