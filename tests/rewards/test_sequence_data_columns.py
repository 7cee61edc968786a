"""A TRL-style reward gets the data's own columns under their names, one value per completion, as TRL's
GRPOTrainer passes every dataset column: ``jsonl:``/``hf:`` rows keep their other columns (lists too) in
``Problem.metadata["data_columns"]`` and ``trl_columns`` expands them (a data column ``source`` was shadowed by the
file path, a list column never arrived)."""

import json
import sys
import types
import warnings

import pytest

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.rewards import sequence_reward
from gradprobe.rewards.sequence import trl_columns
from gradprobe.rollout.base import Sample
from gradprobe.rollout.collect import build_batch
from gradprobe.tasks import load_task

ROWS = [{"question": f"What is {i} + 1?", "answer": f"#### {i + 1}", "solution": f"{i} + 1 = {i + 1}",
         "difficulty": i % 3, "source": f"book-{i}", "solution_steps": [f"add 1 to {i}", f"get {i + 1}"],
         "extra": {"tags": ["add"], "note": None}} for i in range(10)]


def _file(tmp_path, rows, name="data.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _batch(problems, group_size=2):
    tok = char_tokenizer()
    prompt_ids = [[1] + tok.encode(f"P{i}:", add_special_tokens=False) for i in range(len(problems))]
    samples = [Sample(tok.encode(f"#### {n}", add_special_tokens=False), truncated=False)
               for n in range(len(problems) * group_size)]
    return build_batch(tok, problems, prompt_ids, samples, group_size=group_size, temperature=1.0)


def _recorder():
    seen = {}

    def spy(prompts, completions, **kwargs):
        seen.update(kwargs)
        return [float(d) for d in kwargs["difficulty"]]

    return spy, seen


def test_jsonl_columns_reach_a_trl_reward_under_their_names(tmp_path):
    problems = load_task(f"jsonl:{_file(tmp_path, ROWS)}").problems("train", 3, seed=1)
    rows = [int(p.id.rsplit("/", 1)[1]) for p in problems for _ in range(2)]  # G = 2: completion n is row n // 2
    spy, seen = _recorder()
    out = sequence_reward(spy)(_batch(problems), None)
    assert seen["difficulty"] == [i % 3 for i in rows]
    assert seen["source"] == [f"book-{i}" for i in rows]  # the data's, not the file path
    assert seen["solution_steps"] == [[f"add 1 to {i}", f"get {i + 1}"] for i in rows]
    assert seen["extra"] == [{"tags": ["add"], "note": None}] * 6
    assert seen["answer"] == [str(i + 1) for i in rows]  # the gold as the verifier reads it
    assert seen["solution"] == [f"{i} + 1 = {i + 1}" for i in rows] and seen["row"] == rows
    assert "question" not in seen and "data_columns" not in seen  # mapped columns are not repeated
    assert out.stats["mean_reward"] == pytest.approx(sum(i % 3 for i in rows) / 6)
    for p in problems:  # JSON-serialisable, and the mapped columns are not stored twice
        assert json.loads(json.dumps(p.metadata)) == p.metadata
        assert sorted(p.metadata["data_columns"]) == ["extra", "solution_steps", "source"]  # each column held once
        assert p.metadata["difficulty"] in (0, 1, 2) and "difficulty" not in p.metadata["data_columns"]
        assert str(p.metadata["source"]).endswith("data.jsonl")  # the loader's key is kept beside it


def test_a_reward_that_changes_a_list_column_changes_neither_the_problem_nor_the_next_call(tmp_path):
    problems = load_task(f"jsonl:{_file(tmp_path, ROWS)}").problems("train", 2, seed=0)
    batch = _batch(problems)
    first = trl_columns(batch)
    first["solution_steps"][0].append("junk")
    first["extra"][1]["tags"].append("junk")
    again = trl_columns(batch)
    i = int(problems[0].id.rsplit("/", 1)[1])
    assert again["solution_steps"][0] == [f"add 1 to {i}", f"get {i + 1}"] and again["extra"][1]["tags"] == ["add"]
    assert problems[0].metadata["data_columns"]["solution_steps"] == [f"add 1 to {i}", f"get {i + 1}"]


def test_a_column_named_as_a_keyword_gradprobe_passes_is_warned_once_and_gradprobe_value_wins(tmp_path):
    rows = [{"question": f"q{i}?", "final": str(i), "answer": f"raw {i}", "completions": "x",
             "problem_id": 7, "level": i} for i in range(6)]
    _file(tmp_path, rows[:4], "train.jsonl")
    _file(tmp_path, rows[4:], "test.jsonl")
    task = load_task(f"jsonl:{tmp_path}:answer=final")
    with pytest.warns(UserWarning, match=r"'answer', 'completions', 'problem_id' are named as keyword") as told:
        problems = task.problems("train", 2, seed=0)
    assert len([w for w in told if "named as keyword" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # told once per task
        task.problems("heldout", 1)
    assert problems[0].metadata["data_columns"]["answer"].startswith("raw ")  # kept for Python readers
    batch = _batch(problems)
    seen = {}

    def spy(prompts, completions, answer, problem_id, **kw):
        seen.update(completions=completions, answer=answer, problem_id=problem_id, **kw)
        return [0.0] * len(completions)

    sequence_reward(spy)(batch, None)
    ids = [p.id for p in problems for _ in range(2)]
    assert seen["completions"] == batch.completions and seen["problem_id"] == ids
    assert seen["answer"] == [i.rsplit("/", 1)[1] for i in ids]  # the gold of answer=final
    assert seen["level"] == [int(i.rsplit("/", 1)[1]) for i in ids] and "final" not in seen


def test_a_hub_value_that_is_no_json_is_left_out_and_warned(monkeypatch):
    class Split(list):
        column_names = ["question", "answer", "image", "steps"]

    def load_dataset(name, config, split):
        return Split({"question": f"q{i}{split}", "answer": str(i), "image": b"\x89PNG", "steps": [i, i + 1]}
                     for i in range(4))

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    task = load_task("hf:org/name")
    with pytest.warns(UserWarning, match=r"'image' \(bytes\) hold values that are no JSON value"):
        problems = task.problems("train", 2, seed=0)
    cols = trl_columns(_batch(problems, group_size=1))
    assert "image" not in cols and cols["steps"] == [p.metadata["data_columns"]["steps"] for p in problems]
    assert [s[1] - s[0] for s in cols["steps"]] == [1, 1] and json.dumps([p.metadata for p in problems])
