"""--metadata-keys against a JSONL row's columns that the loader keeps apart in ``Problem.metadata["data_columns"]``
(lists, objects, nulls, and scalar columns named as one of gradprobe's own keys).

Before: ``data_columns`` was listed among the "keys present" and, given as a key, refused with the fix "make each such
value a number"; a key whose value was a list in some rows ([1]) passed silently (imputed as missing) and one null in
every row was called "in no prompt of this pool"; ``row`` (an identifier, never a feature) was accepted, as the
loader's row index, even where the data has its own ``row`` column; a data column ``source`` was refused as the
loader's file path with the fix "make each such value a number".
"""

from __future__ import annotations

import json
import warnings

import pytest

from gradprobe.difficulty.metadata import check_metadata_keys
from gradprobe.tasks import load_task

ROWS = [{"prompt": "What is 1+1?", "answer": "2", "level": [1], "tags": ["a"], "source": 3, "steps": 1},
        {"prompt": "What is 2+2?", "answer": "4", "level": 2, "tags": ["b"], "source": 4, "steps": 2},
        {"prompt": "What is 3+3?", "answer": "6", "level": None, "blank": None, "tags": None, "steps": 3}]


def _pool(tmp_path, rows=ROWS):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = load_task(f"jsonl:{folder}").split_rows("train")
    return folder / "train.jsonl", sorted(problems, key=lambda p: p.metadata["row"])


def _check(problems, keys):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_metadata_keys(problems, keys)
    return [str(w.message) for w in seen]


def test_data_columns_is_no_key_and_is_not_listed_as_present(tmp_path):
    _, problems = _pool(tmp_path)
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems, ["data_columns"])
    assert str(err.value) == (
        "metadata key 'data_columns' (--metadata-keys) is no metadata key: it is where the loader keeps a data row's "
        "columns that are not scalar metadata (lists, objects, nulls, columns named as gradprobe's own keys); give a "
        "numeric column by its own name (keys numeric in every prompt holding them: steps)")
    assert _check(problems, ["steps"]) == []  # a numeric column is a key as before
    said = _check(problems, ["stpes"])
    assert said == ["metadata_keys (--metadata-keys) stpes: in no prompt of this pool, so imputed as a constant that "
                    "carries no information (keys present: blank, level, prompt_format, row, source, steps, tags); "
                    "did you mean 'steps' for 'stpes'?"]


def test_a_list_kept_apart_is_refused_as_no_number(tmp_path):
    file, problems = _pool(tmp_path)
    assert problems[0].metadata["data_columns"] == {"level": [1], "tags": ["a"], "source": 3}
    assert problems[2].metadata["data_columns"] == {"level": None, "blank": None, "tags": None}
    assert problems[1].metadata["level"] == 2 and problems[0].metadata["steps"] == 1
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems, ["level"])
    assert str(err.value) == (
        f"metadata key 'level' (--metadata-keys) is not a number: [1] in prompt jsonl/train/0 (line 1) in {file}; "
        "'level' is numeric in 1 of 3 prompts: make each such value a number, or null (missing: imputed), or give "
        "numeric keys only (keys numeric in every prompt holding them: steps)")
    with pytest.raises(ValueError, match=r"^metadata key 'tags' \(--metadata-keys\) is not a number: \['a'\] in "
                                         r"prompt jsonl/train/0 \(line 1\), \['b'\] in prompt jsonl/train/1 "):
        check_metadata_keys(problems, ["tags"])


def test_a_column_null_in_every_row_is_called_null_not_absent(tmp_path):
    _, problems = _pool(tmp_path)
    assert _check(problems, ["blank"]) == [
        "metadata_keys (--metadata-keys) blank: null or NaN in every prompt of this pool holding it, so imputed as a "
        "constant that carries no information; give it numbers in the data or leave it out of --metadata-keys (keys "
        "numeric in every prompt holding them: steps)"]


@pytest.mark.parametrize("key, what", [("row", "the loader's row index"), ("id", "the data's id")])
def test_identifiers_are_never_features(tmp_path, key, what):
    rows = [{**r, "id": i, "row": 10 * i} for i, r in enumerate(ROWS)]
    _, problems = _pool(tmp_path, rows)
    assert problems[1].metadata["id"] == 1 and problems[1].metadata["row"] == 1, what
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems, ["steps", key])
    assert str(err.value) == (
        f"metadata key {key!r} (--metadata-keys) is an identifier (a data row's own id, or its 0-based row), never a "
        "feature: its order carries no difficulty; leave it out of --metadata-keys, or give a numeric column of "
        "another name (keys numeric in every prompt holding them: steps)")


def test_a_data_column_named_as_gradprobes_own_key_is_to_be_renamed(tmp_path):
    file, problems = _pool(tmp_path)
    assert problems[0].metadata["source"] == str(file)  # the loader's, not the data's 3
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems, ["source"])
    assert str(err.value) == (
        f"metadata key 'source' (--metadata-keys): the data column 'source' (3 in prompt jsonl/train/0 (line 1) of "
        f"{file}) is named as one of gradprobe's own metadata keys, so the loader keeps it apart in "
        "Problem.metadata['data_columns'], not as a feature; rename the column in the data (e.g. 'source_value') and "
        "give that name (keys numeric in every prompt holding them: steps)")

