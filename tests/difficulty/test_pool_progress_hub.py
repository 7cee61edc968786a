"""A pool from a Hugging Face dataset (``hf:NAME``) showed the elapsed seconds only while it was built; now a split that
knows its length (``len(ds)``, a ``datasets.Dataset``'s ``num_rows``) gives the bar a total, its rows counted as they
are parsed, and one that does not (a streamed split) keeps the elapsed seconds."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

datasets = pytest.importorskip("datasets")  # imported before tqdm.auto.tqdm is replaced (datasets subclasses it)

from gradprobe.difficulty.progress import pool_problems  # noqa: E402
from gradprobe.tasks import load_task  # noqa: E402
from pool_bars import captured  # noqa: F401,E402 (a fixture: tests/pool_bars.py)


def _rows(n: int) -> list[dict]:
    return [{"question": f"what is {i} + 1?", "answer": str(i + 1)} for i in range(n)]


def test_a_hub_dataset_that_knows_its_length_gives_the_bar_a_total(captured, tmp_path):
    """The real hub path: datasets.load_dataset reads a local folder (offline), a datasets.Dataset of 14 rows."""
    err, bars = captured
    folder = tmp_path / "hubcopy"
    folder.mkdir()
    for name, rows in (("train", _rows(14)), ("test", _rows(20)[14:])):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = load_task(f"hf:{folder}")
    got = pool_problems(task, 5, seed=0, desc="rank-prompts: building the pool of 5 prompts", progress=True)
    assert len(got) == 5 and {p.id for p in got} <= {f"hf/{folder.name}/train/{i}" for i in range(14)}
    assert [(b.n, b.total) for b in bars] == [(14, 14)]  # before: [(0, None)], the elapsed seconds only
    shown = err.getvalue()
    assert re.search(r"building the pool of 5 prompts: +100%\|[^|]*\| *14/14 \[[\d:]+<[\d:]+, [^\]]*row/s\]",
                     shown), shown
    assert "on_progress" not in vars(task)  # the hook is removed again


def test_a_hub_split_without_a_length_keeps_the_elapsed_seconds(captured, monkeypatch):
    """A split that cannot tell its length (an iterable, as a streamed datasets.IterableDataset) is counted as it is
    parsed, but the line keeps showing the elapsed seconds: no total is made up."""
    err, bars = captured

    class Streamed:
        column_names = ["question", "answer"]

        def __iter__(self):
            return iter(_rows(6))

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=lambda *a, **k: Streamed()))
    task = load_task("hf:org/streamed:heldout_split=none,heldout_fraction=0.5")
    assert len(pool_problems(task, 3, seed=0, desc="pool", progress=True)) == 3
    assert [(b.n, b.total) for b in bars] == [(6, None)]  # its 6 rows counted (before: 0), no total shown
    assert re.fullmatch(r"(\r?pool: [\d:]+\s*)+", err.getvalue().replace("\x1b[A", "")), repr(err.getvalue())


def test_known_length_reads_len_or_num_rows():
    from gradprobe.tasks.base import known_length

    ds = datasets.Dataset.from_list(_rows(9))  # an in-memory datasets.Dataset
    assert known_length(ds) == 9 and known_length([1, 2]) == 2
    assert known_length(types.SimpleNamespace(num_rows=4)) == 4 and known_length(iter([1])) is None
    assert known_length(datasets.IterableDataset.from_generator(lambda: iter(_rows(3)))) is None  # streamed
