"""A training split smaller than --probe-batches x --prompts said only "has 10 problems; asked for 24", naming neither
flag (a trial user asked for 3 batches of 8 prompts)."""

import json

import pytest

from gradprobe.probe.batches import _distinct_train_prompts
from gradprobe.tasks import load_task


def test_the_message_names_the_flags(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(12)))
    task = load_task(f"jsonl:{data}")
    assert len(_distinct_train_prompts(task, 8, 0)) == 8
    with pytest.raises(ValueError) as e:
        _distinct_train_prompts(task, 24, 0)
    assert str(e.value).startswith(f"jsonl:{data} 'train' has 10 problems; asked for 24 (")
    assert str(e.value).endswith("; ask for fewer or give more rows (the 24 asked for are --probe-batches x --prompts: "
                                 "each probe batch draws its own prompts)")


def test_a_malformed_row_keeps_its_own_error(tmp_path):
    """A reviewer: the flags' note was added to every ValueError, and a DatasetFormatError lost its type."""
    from gradprobe.tasks.base import DatasetFormatError

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(12)) + "{not json\n")
    with pytest.raises(DatasetFormatError) as e:
        _distinct_train_prompts(load_task(f"jsonl:{data}"), 4, 0)
    assert "line 13: not valid JSON" in str(e.value) and "--probe-batches" not in str(e.value)
