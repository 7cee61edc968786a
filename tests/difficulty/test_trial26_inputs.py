"""Trial 26's inputs to rank-prompts / difficulty-eval / evaluate_difficulty:

B1  a pool prompt longer than the model's context reached the feature forward, which asked for 640 GB for an
    800k-character question; it is now refused before any forward, naming the prompt, its line, its length, the limit
    and the fix;
B2  a metadata value read as inf (``1e309`` or ``Infinity`` in the JSONL) reached scikit-learn ("Input X contains
    infinity"), naming no key, prompt or line;
B3  ``evaluate_difficulty(..., observed="1")`` raised "'<=' not supported between instances of 'int' and 'str'";
C7  a key that is NaN or null in every prompt holding it went through silently (a key missing from every prompt is
    warned about): the same constant, imputed feature.
"""

from __future__ import annotations

import json
import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from gradprobe.cli import main
from gradprobe.difficulty.features import check_prompt_lengths, hidden_features, metadata_features
from gradprobe.difficulty.metadata import check_metadata_keys
from gradprobe.difficulty.rank import RankSettings, rank_prompts
from gradprobe.rollout import PromptTooLongError
from gradprobe.tasks import load_task
from gradprobe.tasks.base import Problem

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

#: a model that does not exist: input refused before the model is loaded never gets to say so
NO_MODEL = "no-such-model"
_SMALL = RankSettings(fit_prompts=2, probe_samples=1, max_new_tokens=4, metadata_keys="level", no_progress=True)


def _jsonl(tmp_path, lines, name="pool.jsonl"):
    """A JSONL file of ``lines`` (each a JSON text, so NaN / 1e309 / Infinity can be written as such)."""
    file = tmp_path / name
    file.write_text("".join(line + "\n" for line in lines))
    return file


def _row(i, level="%d", question=None):
    q = question or f"What is {i} + 1?"
    return '{"question": %s, "answer": "%d", "level": %s}' % (json.dumps(q), i + 1, level.replace("%d", str(i % 3)))


def _train(file):
    task = load_task(f"jsonl:{file}:heldout_fraction=0.01")
    return task, sorted(task.split_rows("train"), key=lambda p: p.metadata["row"])


# ---------------------------------------------------------------------------- B1: a prompt past the context
def _model(limit):
    return SimpleNamespace(config=SimpleNamespace(max_position_embeddings=limit))


def test_a_prompt_past_the_context_is_named_by_id_and_line_with_its_length_and_the_limit():
    problems = [Problem(id=f"jsonl/pool/{i}", question="q", answer="1", metadata={"row": i, "source": "pool.jsonl"})
                for i in range(6)]
    ids = [[1] * n for n in (3, 8, 9, 2, 12, 5)]  # rows 2 and 4 are longer than 8
    check_prompt_lengths(_model(8), ids[:2], problems[:2])  # 8 tokens in a context of 8: read
    check_prompt_lengths(SimpleNamespace(config=SimpleNamespace()), ids, problems)  # no known limit: no check
    with pytest.raises(PromptTooLongError) as info:
        check_prompt_lengths(_model(8), ids[::-1], problems[::-1])  # named in data order, whatever the pool order
    assert str(info.value) == (
        "prompt jsonl/pool/2 (line 3) of pool.jsonl has 9 tokens > the model's max_position_embeddings=8, the most the "
        "forward of the difficulty features reads (2 of the 6 prompts are longer): shorten the prompt or leave it out "
        "of the prompt pool")
    with pytest.raises(ValueError, match=r"^prompt 1 \(of 2\) has 9 tokens > the model's max_position_embeddings=8, "
                                         r"the most .* \(1 of the 2 prompts is longer\)"):
        check_prompt_lengths(_model(8), ids[1:3])  # no problems: named by index
    with pytest.raises(ValueError, match=r"^prompt p4 has 12 tokens"):  # no data row: named by id
        check_prompt_lengths(_model(8), ids[4:], [Problem(id=f"p{i}", question="q", answer="1") for i in (4, 5)])


def test_hidden_features_refuses_a_long_prompt_before_any_forward():
    """The fake policy has no weights, no hidden size and no forward: the check comes first (old code: the forward
    ran, or here an AttributeError on the config)."""
    policy = SimpleNamespace(model=_model(4), tokenizer=SimpleNamespace(pad_token_id=0))
    with pytest.raises(PromptTooLongError, match=r"^prompt 0 \(of 2\) has 5 tokens > the model's "
                                                 r"max_position_embeddings=4"):
        hidden_features(policy, [[1, 2, 3, 4, 5], [1]])


def test_rank_prompts_refuses_a_pool_prompt_longer_than_the_tiny_model_context(tmp_path, capsys):
    """Trial 26: an 800k-character question asked for 640 GB in the feature forward; a 2,153-token one was refused
    only when sampled, as "prompt 1 (of this call's 3)". 1,500 characters (more than 1,024 tokens) suffice here."""
    file = _jsonl(tmp_path, [_row(i, question="What is " + "1 + " * 375 + f"{i}?" if i in (1, 3) else None)
                             for i in range(6)], "long.jsonl")
    _, train = _train(file)  # one row is held out
    first = min(p.metadata["row"] for p in train if len(p.question) > 1500)
    n_long = sum(len(p.question) > 1500 for p in train)
    out = tmp_path / "rk"
    with pytest.raises(PromptTooLongError) as info:
        rank_prompts("tiny", f"jsonl:{file}:heldout_fraction=0.01", 5, out=out, settings=_SMALL)
    msg = str(info.value)
    assert msg.startswith(f"prompt jsonl/long/{first} (line {first + 1}) of {file} has ")
    n = int(msg.split(" has ")[1].split(" tokens")[0])
    assert n > 1024 and msg.endswith(
        f"tokens > the model's max_position_embeddings=1024, the most the forward of the difficulty features reads "
        f"({n_long} of the 5 prompts {'is' if n_long == 1 else 'are'} longer): shorten the prompt or leave it out of "
        "the prompt pool")
    assert not out.exists()  # the folder this call created is removed again
    assert main(["rank-prompts", "--model", "tiny", "--task", f"jsonl:{file}:heldout_fraction=0.01", "--pool", "5",
                 "--fit-prompts", "2", "--probe-samples", "1", "--max-new-tokens", "4", "--metadata-keys", "level",
                 "--no-progress", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"gradprobe rank-prompts: error: {msg}")


# ---------------------------------------------------------------------------- B2: an infinite metadata value
def _first_inf(problems):
    inf = [p.metadata["row"] for p in problems if math.isinf(p.metadata.get("level", 0))]
    return min(inf), len(inf)


@pytest.mark.parametrize("written, shown", [("1e309", "inf"), ("Infinity", "inf"), ("-Infinity", "-inf")])
def test_an_infinite_metadata_value_is_named_by_key_prompt_and_line(tmp_path, written, shown):
    file = _jsonl(tmp_path, [_row(i, written if i in (2, 5, 6) else "%d") for i in range(8)])
    _, problems = _train(file)  # one row is held out
    row, n = _first_inf(problems)
    message = (f"metadata key 'level' (--metadata-keys) is {shown} in prompt jsonl/pool/{row} (line {row + 1}) of "
               f"{file} ({n} infinite value(s)): a feature must be finite (JSON's Infinity, or a number beyond 1.8e308 "
               "such as 1e309, is read as inf); write a finite number, or null (missing: imputed), or leave the key "
               "out of --metadata-keys")
    with pytest.raises(ValueError) as info:
        check_metadata_keys(problems[::-1], ["level"])
    assert str(info.value) == message
    with pytest.raises(ValueError) as info:
        metadata_features(problems, [[1]] * len(problems), ["level"])
    assert str(info.value) == message


def test_rank_prompts_refuses_an_infinite_level_before_the_model_is_loaded(tmp_path, capsys):
    """Old code: the model's name was the first error (here: an unknown model), the tiny model's run reached
    scikit-learn's "Input X contains infinity or a value too large for dtype('float64')"."""
    file = _jsonl(tmp_path, [_row(i, "1e309" if i in (1, 2) else "%d") for i in range(5)])
    row, n = _first_inf(_train(file)[1])
    out = tmp_path / "rk"
    assert main(["rank-prompts", "--model", NO_MODEL, "--task", f"jsonl:{file}:heldout_fraction=0.01", "--pool", "4",
                 "--fit-prompts", "2", "--probe-samples", "1", "--metadata-keys", "level", "--no-progress",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"gradprobe rank-prompts: error: metadata key 'level' (--metadata-keys) is inf in prompt "
                   f"jsonl/pool/{row} (line {row + 1}) of {file} ({n} infinite value(s)): a feature must be finite "
                   "(JSON's Infinity, or a number beyond 1.8e308 such as 1e309, is read as inf); write a finite "
                   "number, or null (missing: imputed), or leave the key out of --metadata-keys")
    assert not out.exists()


def test_finite_values_nan_and_huge_integers_keep_their_own_handling():
    problems = [Problem(id=f"p{i}", question="q", answer="1", metadata={"level": v})
                for i, v in enumerate([1, 1e150, math.nan, None])]
    check_metadata_keys(problems, ["level"])  # NaN and None are missing (imputed), 1e150 is in range
    big = problems[:1] + [Problem(id="p9", question="q", answer="1", metadata={"level": 10 ** 400})]
    with pytest.raises(ValueError, match=r"is an integer of 401 digits in prompt p9 \(1 value\(s\) beyond"):
        check_metadata_keys(big, ["level"])


# ---------------------------------------------------------------------------- B3: observed not an integer
def _outcomes():
    rng = np.random.default_rng(0)
    return [f"p{i}" for i in range(6)], rng.normal(size=(6, 2)), rng.integers(0, 2, (6, 4)).astype(float)


@pytest.mark.parametrize("value, shown", [("1", "'1' (str)"), (1.0, "1.0 (float)"), (True, "True (bool)"),
                                          (None, "None (NoneType)")])
def test_observed_that_is_not_an_integer_is_named(value, shown):
    import gradprobe

    ids, x, y = _outcomes()
    with pytest.raises(ValueError) as info:
        gradprobe.evaluate_difficulty(ids, x, y, observed=value)
    assert str(info.value) == ("observed must be an integer in [0, S - 1] = [0, 3] (outcomes per eval prompt given to "
                               f"the posteriors), got {shown}")


def test_group_size_that_is_not_an_integer_is_named_and_numpy_integers_are_read():
    import gradprobe

    ids, x, y = _outcomes()
    with pytest.raises(ValueError) as info:
        gradprobe.evaluate_difficulty(ids, x, y, observed=1, group_size="2")
    assert str(info.value) == "group_size must be an integer in [1, S - observed] or None (the default), got '2' (str)"
    result = gradprobe.evaluate_difficulty(ids, x, y, observed=np.int64(1), group_size=np.int32(3))
    assert result["split"]["observed_per_eval_prompt"] == 1 and type(result["split"]["observed_per_eval_prompt"]) is int
    assert result["flat_group_size"] == 3
    json.dumps(result["split"])  # a numpy integer would not serialise


# ---------------------------------------------------------------------------- C7: NaN / null in every prompt
def _warnings_of(problems, keys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_metadata_keys(problems, keys)
    return [str(w.message) for w in caught]


def test_a_key_nan_in_every_prompt_of_a_jsonl_pool_is_warned_about(tmp_path):
    file = _jsonl(tmp_path, [_row(i, "NaN") for i in range(6)])
    _, problems = _train(file)
    assert all(math.isnan(p.metadata["level"]) for p in problems)
    assert _warnings_of(problems, ["level"]) == [
        "metadata_keys (--metadata-keys) level: null or NaN in every prompt of this pool holding it, so imputed as a "
        "constant that carries no information; give it numbers in the data or leave it out of --metadata-keys (keys "
        "numeric in every prompt holding them: none)"]
    with pytest.warns(UserWarning, match=r"level: null or NaN in every prompt of this pool"):
        x = metadata_features(problems, [[1, 2]] * len(problems), ["level"])
    assert np.isnan(x[:, 1]).all() and (x[:, 0] == 2).all()


def test_null_or_nan_everywhere_is_warned_naming_the_keys_with_values():
    problems = [Problem(id=f"p{i}", question="q", answer="1",
                        metadata={"level": [None, math.nan][i % 2], "tier": None, "steps": i, "row": i})
                for i in range(4)]
    assert _warnings_of(problems, ["steps", "level", "tier"]) == [
        "metadata_keys (--metadata-keys) level, tier: null or NaN in every prompt of this pool holding them, so "
        "imputed as a constant that carries no information; give them numbers in the data or leave them out of "
        "--metadata-keys (keys numeric in every prompt holding them: steps)"]


def test_a_key_with_one_number_among_nans_is_not_warned_about():
    problems = [Problem(id=f"p{i}", question="q", answer="1", metadata={"level": 2 if i == 3 else math.nan})
                for i in range(4)]
    assert _warnings_of(problems, ["level"]) == []
