"""Refusals of the difficulty estimator and of ``--metadata-keys`` that name what to fix.

``DifficultyEstimator.observe`` refused successes out of [0, attempts] without naming the prompt, though its Raises
says the first such prompt is named (as it is for a NaN or infinite count). A data column literally named
``data_columns`` (a numeric column the loader keeps apart, as it is named as the loader's own key) given as
``--metadata-keys data_columns`` was told that the name is no metadata key and to "give a numeric column by its own
name", which it is: the fix is to rename the column, as for a column ``source``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gradprobe.difficulty import DifficultyEstimator
from gradprobe.difficulty.metadata import check_metadata_keys
from gradprobe.tasks import load_task


@pytest.mark.parametrize("successes, attempts, shown", [
    ([1, 3, 0, 1], [2, 2, 2, 2], "prompt 'b' has successes 3 of attempts 2 (1 prompt(s)"),
    ([1, 0, -1, 5], [2, 2, 2, 4], "prompt 'c' has successes -1 of attempts 2 (2 prompt(s)"),
])
def test_observe_names_the_first_prompt_out_of_range(successes, attempts, shown):
    est = DifficultyEstimator()
    with pytest.raises(ValueError) as err:
        est.observe(["a", "b", "c", "d"], np.random.default_rng(0).normal(size=(4, 3)), successes, attempts)
    assert str(err.value) == (f"observe: {shown} out of range): need 0 <= successes <= attempts for every prompt")
    assert est.counts(["a", "b", "c", "d"])[0].tolist() == [0.0] * 4  # nothing recorded


def test_a_data_column_named_data_columns_is_to_be_renamed(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    rows = [{"prompt": f"What is {i}+{i}?", "answer": str(2 * i), "data_columns": i, "level": i} for i in range(1, 4)]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = sorted(load_task(f"jsonl:{folder}").split_rows("train"), key=lambda p: p.metadata["row"])
    first = problems[0]
    assert first.metadata["data_columns"] == {"data_columns": first.metadata["level"]}  # kept apart by the loader
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems, ["data_columns"])
    line = first.metadata["row"] + 1
    assert str(err.value) == (
        f"metadata key 'data_columns' (--metadata-keys): the data column 'data_columns' ({first.metadata['level']} in "
        f"prompt {first.id} (line {line}) of {folder / 'train.jsonl'}) is named as one of gradprobe's own metadata "
        "keys, so the loader keeps it apart in Problem.metadata['data_columns'], not as a feature; rename the column "
        "in the data (e.g. 'data_columns_value') and give that name (keys numeric in every prompt holding them: "
        "level)")
