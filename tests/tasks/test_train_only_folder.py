"""A single JSONL file holds back a share of its rows; when a request needs more training rows than
that leaves, the message says how to train on every row (a folder holding only train.jsonl)."""

from __future__ import annotations

import json

import pytest

from gradprobe.tasks import load_task


def _rows(n):
    return "".join(json.dumps({"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"}) + "\n" for i in range(n))


@pytest.mark.parametrize("kind", ["jsonl", "gsm8k"])
def test_the_message_names_the_train_only_folder_and_the_folder_uses_every_row(tmp_path, kind):
    (tmp_path / "pool.jsonl").write_text(_rows(10))
    with pytest.raises(ValueError) as err:
        load_task(f"{kind}:{tmp_path / 'pool.jsonl'}").problems("train", 10)
    assert "'train' has 8 problems; asked for 10 (" in str(err.value)
    assert (f"80% train / 20% heldout (heldout_fraction), so to use every row for training, put the file in a "
            f"folder as train.jsonl and give {kind}:FOLDER (a folder without test.jsonl holds nothing out)"
            in str(err.value))
    folder = tmp_path / "only_train"
    folder.mkdir()
    (tmp_path / "pool.jsonl").rename(folder / "train.jsonl")
    got = load_task(f"{kind}:{folder}").problems("train", 10)
    assert sorted(int(p.answer) for p in got) == list(range(1, 11))


def test_the_held_out_split_does_not_get_the_train_only_advice(tmp_path):
    (tmp_path / "pool.jsonl").write_text(_rows(10))
    with pytest.raises(ValueError) as err:
        load_task(f"jsonl:{tmp_path / 'pool.jsonl'}").problems("heldout", 3)
    assert "'heldout' has 2 problems; asked for 3" in str(err.value) and "train.jsonl" not in str(err.value)
