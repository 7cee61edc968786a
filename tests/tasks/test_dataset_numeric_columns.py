"""A JSONL task keeps its rows' other numeric columns in Problem.metadata (so ``rank-prompts --metadata-keys`` can use
them as features: a trial user's ``--metadata-keys level`` was "in no prompt of this pool" and imputed as a constant),
and warns when the data's own id repeats (ranking.csv's data_id could not tell the rows apart)."""

import json
import warnings

import numpy as np

from gradprobe.difficulty.features import metadata_features
from gradprobe.difficulty.metadata import check_metadata_keys
from gradprobe.tasks import load_task


def _task(tmp_path, rows, name="data"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_task(f"jsonl:{folder}")


def test_numeric_columns_are_kept_as_metadata_and_usable_as_features(tmp_path):
    rows = [{"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1), "level": i % 3, "weight": 0.5 * i,
             "flag": True, "note": "text", "row": 99, "source": 7} for i in range(5)]
    problems = _task(tmp_path, rows).problems("train", 5)
    for p in problems:
        i = int(p.metadata["id"][1:])
        assert p.metadata["level"] == i % 3 and p.metadata["weight"] == 0.5 * i
        assert p.metadata["flag"] is True and p.metadata["note"] == "text"  # kept, refused as features by name
        assert p.metadata["row"] == i and str(p.metadata["source"]).endswith("train.jsonl")  # gradprobe's keys kept
        assert "answer" not in p.metadata and "question" not in p.metadata  # mapped columns are not repeated
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was: "level: in no prompt of this pool, so imputed as a constant"
        check_metadata_keys(problems, ["level", "weight"])
    feats = metadata_features(problems, [[1, 2, 3]] * 5, ["level", "weight"])  # (M, 1 + keys): length first
    want = np.array([[p.metadata["level"], p.metadata["weight"]] for p in problems], float)
    assert feats.shape == (5, 3) and np.allclose(feats[:, 1:], want)


def test_a_repeated_data_id_is_warned_once_naming_its_lines_and_every_row_is_kept(tmp_path):
    rows = [{"id": i % 2 and "a" or "b", "question": f"What is {i} + 2?", "answer": str(i + 2)} for i in range(4)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problems = _task(tmp_path, rows).problems("train", 4)
    msgs = [str(w.message) for w in caught if "occur on more than one line" in str(w.message)]
    assert len(msgs) == 1 and len(problems) == 4
    assert "2 id value(s) occur on more than one line ('b' on lines 1, 3; 'a' on lines 2, 4)" in msgs[0]
    assert "give each row its own id" in msgs[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = [{"id": i, "question": f"What is {i}?", "answer": str(i)} for i in range(3)]
        _task(tmp_path, rows, "other").problems("train", 3)
    assert not [w for w in caught if "occur on more than one" in str(w.message)]


def test_reserved_names_and_a_float_id_stay_out_of_the_metadata(tmp_path):
    """A numeric column named like a key gradprobe reads (``expression`` is chain_sum's, ``guidance`` a guided
    probe's) would change what it means; a float ``id`` is no id (text or an integer): none of them is taken."""
    rows = [{"id": 1.0, "question": "What is 1 + 1?", "answer": "2", "expression": 5, "guidance": 0.5, "level": 1}]
    (p,) = _task(tmp_path, rows).problems("train", 1)
    assert "id" not in p.metadata and "expression" not in p.metadata and "guidance" not in p.metadata
    assert p.metadata["level"] == 1


def test_a_level_written_as_text_in_one_row_is_refused_as_a_feature_not_imputed(tmp_path):
    """One row's "level": "2" was dropped by the loader, so --metadata-keys level imputed it without a word."""
    import pytest

    rows = [{"question": f"What is {i} + 1?", "answer": str(i + 1), "level": i} for i in range(4)]
    rows[2]["level"] = "2"
    problems = _task(tmp_path, rows).problems("train", 4)
    with pytest.raises(ValueError, match=r"metadata key 'level' \(--metadata-keys\) is not a number: '2' in prompt"):
        check_metadata_keys(problems, ["level"])


def test_an_absent_key_is_warned_once_by_rank_prompts_early_check_left_silent(tmp_path):
    """rank-prompts checks the keys before loading the model and again in its feature pass: the absent-key warning
    came twice (a trial user's finding); the early check no longer warns."""
    import pytest

    problems = _task(tmp_path, [{"question": "What is 1 + 1?", "answer": "2", "level": 1}]).problems("train", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_metadata_keys(problems, ["typo"], warn_absent=False)
    with pytest.warns(UserWarning, match="typo: in no prompt of this pool"):
        check_metadata_keys(problems, ["typo"])
