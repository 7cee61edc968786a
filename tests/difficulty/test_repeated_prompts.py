"""A prompt pool that holds one prompt text twice: rank-prompts and difficulty-eval say so, and
difficulty-eval keeps the copies in one half, so the estimator is never scored on a text it was fitted on.
A pool of your own data with an ``id`` column: ranking.csv gives each prompt's id as ``data_id``."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from gradprobe.cli import main
from gradprobe.difficulty.evaluate import evaluate_estimator, prompt_groups, split_halves
from gradprobe.tasks.base import Problem, prompt_key, repeated_prompts

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def test_prompt_key_collapses_whitespace_only():
    assert prompt_key("What is\n 2 +  3?") == prompt_key(" What is 2 + 3? ") == "What is 2 + 3?"
    assert prompt_key("What is 2+3?") != prompt_key("What is 2 + 3?")
    assert prompt_key("A") != prompt_key("a")


def test_repeated_prompts_lists_each_set_of_copies_in_order():
    probs = [Problem(f"p{i}", q, "1") for i, q in enumerate(["a", "b", "a ", "c", "b", "\na"])]
    assert repeated_prompts(probs) == [["p0", "p2", "p5"], ["p1", "p4"]]
    assert repeated_prompts(probs[:2] + probs[3:4]) == []


@pytest.mark.parametrize("m, seed", [(2, 0), (11, 3), (40, 7), (301, 1)])
def test_distinct_keys_split_as_the_plain_cut(m, seed):
    plain = split_halves(m, seed)
    grouped = split_halves(m, seed, [f"k{i}" for i in range(m)])
    for a, b in zip(plain, grouped):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(6))
def test_copies_of_a_prompt_fall_in_one_half(seed):
    rng = np.random.default_rng(seed)
    keys = [f"k{k}" for k in rng.integers(0, 25, size=60)]  # about 25 texts, many repeated
    fit, ev = split_halves(len(keys), seed, keys)
    assert sorted(np.concatenate([fit, ev]).tolist()) == list(range(60))
    assert not {keys[i] for i in fit} & {keys[i] for i in ev}
    biggest = max(keys.count(k) for k in set(keys))
    assert 30 <= len(fit) <= 30 + biggest - 1 and len(ev) >= 1


def test_split_halves_refuses_a_wrong_number_of_keys():
    with pytest.raises(ValueError, match="groups has 3 keys for 4 prompts"):
        split_halves(4, 0, ["a", "b", "c"])


def _pool(m=40, copies=10):
    """m prompts, the first ``copies`` repeated once more at the end (whitespace changed)."""
    texts = [f"question {i}" for i in range(m)] + [f"question  {i}\n" for i in range(copies)]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(len(texts), 3))
    x[m:] = x[:copies]  # a copy has the same features, as the policy's hidden states would give it
    y = (rng.random((len(texts), 8)) < 0.5).astype(float)
    return [f"id{i}" for i in range(len(texts))], texts, x, y


def test_evaluate_estimator_keeps_copies_in_one_half_and_says_so():
    ids, texts, x, y = _pool()
    res = evaluate_estimator(ids, x, y, observed=2, seed=0, prompts=texts)
    split = res["split"]
    assert split["fit_prompts"] + split["eval_prompts"] == 50
    assert split["fit_prompts"] >= 25
    note = [n for n in res["notes"] if "repeat" in n]
    assert note == [f"10 prompt(s) repeat another prompt's text: each set of copies was kept in one half, so no eval "
                    f"prompt's text was fitted on (fit half {split['fit_prompts']}, eval half "
                    f"{split['eval_prompts']} prompts)"]
    fit, ev = split_halves(50, 0, prompt_groups(texts, 50))
    assert not {prompt_key(texts[i]) for i in fit} & {prompt_key(texts[i]) for i in ev}
    # without the texts the plain cut puts copies on both sides (what the grouped split prevents)
    fit, ev = split_halves(50, 0)
    assert {prompt_key(texts[i]) for i in fit} & {prompt_key(texts[i]) for i in ev}
    plain = evaluate_estimator(ids, x, y, observed=2, seed=0)
    assert not [n for n in plain["notes"] if "repeat" in n]


def test_distinct_prompts_give_the_same_result_with_or_without_texts():
    ids, texts, x, y = _pool(copies=0)
    a = evaluate_estimator(ids, x, y, observed=2, seed=3, prompts=texts)
    b = evaluate_estimator(ids, x, y, observed=2, seed=3)
    assert a == b


def test_a_pool_of_one_text_or_the_wrong_number_of_texts_is_refused():
    ids, _, x, y = _pool(m=4, copies=0)
    with pytest.raises(ValueError, match="the pool's 4 prompts are all one text: copies stay in one half, so no "
                                         "eval half remains; give a pool with at least two distinct prompts"):
        evaluate_estimator(ids, x, y, observed=2, prompts=["same"] * 2 + [" same", "same\n"])
    with pytest.raises(ValueError, match="3 prompts for 4 ids"):
        evaluate_estimator(ids, x, y, observed=2, prompts=["a", "b", "c"])


# ------------------------------------------------------------------------------------------- CLI
_SMALL = ["--max-new-tokens", "2", "--no-progress"]


def _jsonl_pool(folder, questions):
    folder.mkdir()
    rows = [json.dumps({"question": q, "answer": str(i)}) for i, q in enumerate(questions)]
    (folder / "train.jsonl").write_text("\n".join(rows) + "\n")
    return f"jsonl:{folder}"


def _run(argv, capsys):
    """main(argv)'s exit status, output and the messages of the warnings about repeated prompts."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = main(argv)
    return rc, capsys.readouterr(), [str(w.message) for w in caught if "repeat another's text" in str(w.message)]


def test_difficulty_eval_warns_and_keeps_copies_together(tmp_path, capsys):
    task = _jsonl_pool(tmp_path / "data", [f"What is {i} + 1?" for i in range(6)] + ["What is 0 + 1?",
                                                                                    "What is  1 + 1?"])
    out = tmp_path / "eval"
    rc, cap, warning = _run(["difficulty-eval", "--model", "tiny-qwen2", "--task", task, "--pool", "8", *_SMALL,
                             "--samples", "2", "--out", str(out)], capsys)
    assert rc == 0, cap.err
    assert len(warning) == 1 and "the pool holds 2 prompt(s) that repeat another's text (" in warning[0]
    assert "difficulty-eval keeps the copies of a prompt in one half" in warning[0]
    metrics = json.loads((out / "metrics.json").read_text())
    assert any(n.startswith("2 prompt(s) repeat another prompt's text") for n in metrics["notes"])
    assert metrics["split"]["fit_prompts"] + metrics["split"]["eval_prompts"] == 8


def test_difficulty_eval_refuses_a_pool_of_one_text_before_sampling(tmp_path, capsys):
    task = _jsonl_pool(tmp_path / "data", ["What is 1 + 1?", "What is 1 +  1?", "What is 1 + 1?\n"])
    out = tmp_path / "eval"
    rc, cap, warning = _run(["difficulty-eval", "--model", "tiny-qwen2", "--task", task, "--pool", "3", *_SMALL,
                             "--samples", "2", "--out", str(out)], capsys)
    assert rc == 2
    assert "error: the pool's 3 prompts are all one text" in cap.err
    assert not (out / "metrics.json").exists()


def test_rank_prompts_names_the_copies(tmp_path, capsys):
    task = _jsonl_pool(tmp_path / "data", ["What is 2 + 2?", "What is 3 + 3?", "What is 2 + 2?"])
    rc, cap, warning = _run(["rank-prompts", "--model", "tiny-qwen2", "--task", task, "--pool", "3", *_SMALL,
                             "--fit-prompts", "2", "--probe-samples", "1", "--out", str(tmp_path / "rank")], capsys)
    assert rc == 0, cap.err
    assert len(warning) == 1
    # the pool is the seeded permutation of the three rows: the two copies are named, in pool order
    assert "jsonl/train/0" in warning[0] and "jsonl/train/2" in warning[0] and "jsonl/train/1" not in warning[0]
    assert "rank-prompts ranks each copy on its own" in warning[0]


# ------------------------------------------------------------------------------- the data's own id
def test_a_data_id_column_is_kept_and_written_beside_each_ranked_prompt(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    rows = [{"id": "q-alpha", "question": "What is 2 + 2?", "answer": "4"},
            {"id": 17, "question": "What is 3 + 3?", "answer": "6"},
            {"question": "What is 4 + 4?", "answer": "8"},  # no id: empty in the table
            {"id": True, "question": "What is 5 + 5?", "answer": "10"}]  # not an id: a flag
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rank"
    assert main(["rank-prompts", "--model", "tiny-qwen2", "--task", f"jsonl:{folder}", "--pool", "4", *_SMALL,
                 "--fit-prompts", "2", "--probe-samples", "1", "--out", str(out)]) == 0
    import pandas as pd

    table = pd.read_csv(out / "ranking.csv", dtype={"data_id": str}, keep_default_na=False)
    assert list(table.columns[:3]) == ["rank", "prompt_id", "data_id"]
    assert dict(zip(table.prompt_id, table.data_id)) == {"jsonl/train/0": "q-alpha", "jsonl/train/1": "17",
                                                         "jsonl/train/2": "", "jsonl/train/3": ""}
