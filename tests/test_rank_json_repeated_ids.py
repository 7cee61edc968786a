"""rank.json records the data ids several ranked prompts share (``repeated_data_ids``): the loader's warning went to
stderr only, so a user reading rank.json (or ranking.csv) later could not see that two rows share a ``data_id``.
The warning itself stays, once."""

from __future__ import annotations

import json
import warnings

import pytest

from gradprobe.cli import main
from gradprobe.tasks.base import Problem

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

_SMALL = ["--max-new-tokens", "2", "--no-progress", "--fit-prompts", "2", "--probe-samples", "1"]


def _data(folder, ids):
    """A JSONL folder whose train.jsonl rows carry ``ids`` (None: no id column in that row)."""
    folder.mkdir()
    rows = [{**({} if i is None else {"id": i}), "question": f"What is {n} + 1?", "answer": str(n + 1)}
            for n, i in enumerate(ids)]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"jsonl:{folder}"


def _rank(tmp_path, ids, name="rank"):
    """``rank-prompts`` over every row of a data set with ``ids``: (exit status, rank.json, repeated-id warnings)."""
    task = _data(tmp_path / f"data_{name}", ids)
    out = tmp_path / name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = main(["rank-prompts", "--model", "tiny-qwen2", "--task", task, "--pool", str(len(ids)), *_SMALL,
                   "--out", str(out)])
    said = [str(w.message) for w in caught if "occur on more than one line" in str(w.message)]
    return rc, json.loads((out / "rank.json").read_text()), said


def _pool_order(tmp_path, n: int, name="rank") -> list[str]:
    """The prompt ids of ``_rank``'s pool of ``n`` rows (every row of its data), in the seeded order rank-prompts
    draws them (``problems("train", n, seed=0)``: its default data seed)."""
    from gradprobe.tasks import load_task

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loader's repeated-id warning, counted by _rank
        return [p.id for p in load_task(f"jsonl:{tmp_path / f'data_{name}'}").problems("train", n, seed=0)]


def test_rank_json_lists_each_repeated_data_id_with_its_count_and_prompts(tmp_path):
    rc, doc, said = _rank(tmp_path, ["b", "a", "b", 17, "a", "b", None, "c"])
    assert rc == 0
    # the pool is all 8 rows in a seeded order; the list follows the pool's order, each id's prompts in pool order
    pool = _pool_order(tmp_path, 8)
    assert sorted(pool) == sorted(f"jsonl/train/{i}" for i in range(8))
    rows = {"b": {0, 2, 5}, "a": {1, 4}}
    held = {k: [p for p in pool if int(p.rsplit("/", 1)[1]) in r] for k, r in rows.items()}
    assert doc["repeated_data_ids"] == sorted(
        [{"data_id": k, "count": len(ps), "prompt_ids": ps} for k, ps in held.items()],
        key=lambda e: pool.index(e["prompt_ids"][0]))
    # the stderr warning is still given, once
    assert len(said) == 1 and "2 id value(s) occur on more than one line ('b' on lines 1, 3, 6; 'a' on lines 2, 5)" \
        in said[0]


def test_rank_json_holds_an_empty_list_when_no_data_id_repeats(tmp_path):
    rc, doc, said = _rank(tmp_path, ["x", 1, None, "y"])
    assert rc == 0 and doc["repeated_data_ids"] == [] and said == []


def test_the_public_api_gives_the_list_in_attrs_as_rank_json(tmp_path):
    import gradprobe

    task = _data(tmp_path / "data", ["q", "q", "r"])
    table = gradprobe.rank_prompts("tiny-qwen2", task, 3, out=tmp_path / "r", max_new_tokens=2, fit_prompts=2,
                                   probe_samples=1, progress=False)
    saved = json.loads((tmp_path / "r" / "rank.json").read_text())
    assert table.attrs["repeated_data_ids"] == saved["repeated_data_ids"]
    assert [(e["data_id"], e["count"]) for e in saved["repeated_data_ids"]] == [("q", 2)]
    assert sorted(table.loc[table.data_id == "q", "prompt_id"]) == saved["repeated_data_ids"][0]["prompt_ids"]


def test_only_repeats_within_the_ranked_pool_are_listed_in_pool_order():
    """A repeat whose other row is not in the pool cannot be confused in ranking.csv: it is not listed. Ids are
    compared as ranking.csv writes them: 17 and "17" are both ``17`` there, so they are one repeated id, listed as
    that text ("17"); an id all its prompts hold as one type is listed as it is (an integer stays an integer)."""
    from gradprobe.difficulty.rank import _repeated_data_ids
    from gradprobe.tasks.dataset import repeated_data_ids

    pool = [Problem(f"p{n}", f"q{n}", "1", metadata={"row": n, **({} if i is None else {"id": i})})
            for n, i in enumerate(["z", 17, "17", "a", 17, None, "z", "a", "z", 5, "017", 5])]
    assert _repeated_data_ids(pool) == [
        {"data_id": "z", "count": 3, "prompt_ids": ["p0", "p6", "p8"]},
        {"data_id": "17", "count": 3, "prompt_ids": ["p1", "p2", "p4"]},
        {"data_id": "a", "count": 2, "prompt_ids": ["p3", "p7"]},
        {"data_id": 5, "count": 2, "prompt_ids": ["p9", "p11"]}]  # "017" is written 017: no repeat of 17
    assert _repeated_data_ids(pool[:4] + pool[5:7]) == [{"data_id": "z", "count": 2, "prompt_ids": ["p0", "p6"]},
                                                        {"data_id": "17", "count": 2, "prompt_ids": ["p1", "p2"]}]
    assert _repeated_data_ids(pool[:2] + pool[3:7]) == [{"data_id": "z", "count": 2, "prompt_ids": ["p0", "p6"]},
                                                        {"data_id": 17, "count": 2, "prompt_ids": ["p1", "p4"]}]
    assert _repeated_data_ids(pool[:2] + pool[3:4]) == []
    assert _repeated_data_ids([Problem("p", "q", "1")]) == []
    assert [(i, [p.id for p in ps]) for i, ps in repeated_data_ids(pool)] == [
        ("z", ["p0", "p6", "p8"]), ("17", ["p1", "p2", "p4"]), ("a", ["p3", "p7"]), (5, ["p9", "p11"])]


def test_an_integer_and_a_text_id_written_alike_in_ranking_csv_are_one_repeated_id(tmp_path):
    """17 and "17" are both ``17`` in ranking.csv's data_id column, which cannot tell the two prompts apart: rank.json
    lists them (as the text "17") and the loader's warning names both forms (was: neither, counted as two ids)."""
    import csv

    rc, doc, said = _rank(tmp_path, [17, "17", "x"])
    pool = _pool_order(tmp_path, 3)
    assert rc == 0
    assert doc["repeated_data_ids"] == [{"data_id": "17", "count": 2,
                                         "prompt_ids": [p for p in pool if p != "jsonl/train/2"]}]
    with open(tmp_path / "rank" / "ranking.csv", newline="") as f:
        written = {r["prompt_id"]: r["data_id"] for r in csv.DictReader(f)}
    assert written == {"jsonl/train/0": "17", "jsonl/train/1": "17", "jsonl/train/2": "x"}
    assert len(said) == 1 and "1 id value(s) occur on more than one line (17 and '17' on lines 1, 2)" in said[0]
