"""The default metadata keys (num_terms, num_digits: chain_sum's, used when ``--metadata-keys`` is not given) absent
from a pool are no user's typo: ``rank-prompts --task jsonl:...`` warned "metadata_keys (--metadata-keys) num_terms,
num_digits: in no prompt of this pool" though the user never passed the flag. It now says once that the default keys
do not apply to this pool and names the pool's numeric keys to give instead; keys the user gave are warned as before."""

from __future__ import annotations

import json
import warnings

import pytest

from gradprobe.difficulty.features import DEFAULT_METADATA_KEYS, metadata_features
from gradprobe.difficulty.metadata import DEFAULT_KEYS, check_metadata_keys
from gradprobe.difficulty.rank import RankSettings
from gradprobe.tasks import load_task


def _pool(tmp_path, level=True):
    rows = [{"id": i, "question": f"{i} + 1", "answer": str(i + 1), **({"level": i % 3} if level else {})}
            for i in range(6)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_task(f"jsonl:{tmp_path}").problems("train", 6)


def test_the_defaults_are_one_constant():
    assert DEFAULT_KEYS == DEFAULT_METADATA_KEYS == ("num_terms", "num_digits")
    assert RankSettings().keys == DEFAULT_KEYS


def test_default_keys_absent_are_said_not_to_apply_once(tmp_path):
    problems = _pool(tmp_path)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")  # Python's default: a warning once per place (rank-prompts' one feature pass)
        check_metadata_keys(problems, DEFAULT_KEYS, warn_absent=False)  # rank-prompts' early check: silent
        for _ in range(2):  # a second pass (difficulty-eval, a selector's refit): not repeated
            metadata_features(problems, [[1, 2]] * len(problems), DEFAULT_KEYS)
    messages = [str(w.message) for w in record]
    assert messages == [
        "the default metadata keys (num_terms, num_digits: chain_sum's, used when --metadata-keys is not given) do "
        "not apply to this pool: num_terms, num_digits are in none of its prompts, so the features are the prompt's "
        "hidden state and length; to use this pool's numeric metadata as features, give --metadata-keys level"]
    assert "--metadata-keys) num_terms" not in messages[0]


def test_default_keys_on_a_pool_without_numeric_metadata(tmp_path):
    with pytest.warns(UserWarning) as record:
        check_metadata_keys(_pool(tmp_path, level=False), list(DEFAULT_KEYS))
    assert str(record[0].message).endswith("so the features are the prompt's hidden state and length; this pool has "
                                           "no numeric metadata to give as --metadata-keys instead")


def test_keys_the_user_gave_are_warned_as_before(tmp_path):
    with pytest.warns(UserWarning) as record:
        check_metadata_keys(_pool(tmp_path), ["num_terms"])
    assert str(record[0].message).startswith("metadata_keys (--metadata-keys) num_terms: in no prompt of this pool")


def test_default_keys_a_chain_sum_pool_holds_say_nothing():
    problems = load_task("chain_sum").problems("train", 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_metadata_keys(problems, list(DEFAULT_KEYS))
