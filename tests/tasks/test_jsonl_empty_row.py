"""An empty JSON object ``{}`` in a ``jsonl:`` file is a malformed row (it has no question and no answer):
refused naming the file, the line and the missing fields, or skipped and counted with ``skip_malformed``,
wherever it stands (the first row too, which used to decide the column mapping)."""

from __future__ import annotations

import json

import pytest

from gradprobe.tasks import DatasetFormatError, load_task

ROWS = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(10)]


def _file(tmp_path, empty_at: int, name="d.jsonl"):
    """ROWS with ``{}`` inserted as line ``empty_at`` (1-based)."""
    lines = [json.dumps(r) for r in ROWS]
    lines.insert(empty_at - 1, "{}")
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("line", [1, 4])
def test_an_empty_object_is_refused_naming_file_line_fields_and_fix(tmp_path, line):
    path = _file(tmp_path, line)
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"jsonl:{path}").problems("train", 1)
    msg = str(info.value)
    fields = "'prompt' (or 'question') and 'answer'" if line == 1 else "'question' and 'answer'"
    assert msg.startswith(f"{path}, line {line}: an empty JSON object {{}}, missing the fields {fields}")
    assert "--skip-malformed" in msg and "skip_malformed = true under [task.config]" in msg


def test_a_mapped_column_is_named_as_the_missing_field(tmp_path):
    path = _file(tmp_path, 1)
    with pytest.raises(DatasetFormatError, match=r"line 1: an empty JSON object \{\}, missing the fields 'question' "
                                                 r"and 'answer'"):
        load_task(f"jsonl:{path}:question=question").problems("train", 1)


@pytest.mark.parametrize("line", [1, 6, 11])
def test_skip_malformed_skips_and_counts_an_empty_object(tmp_path, line):
    path = _file(tmp_path, line)
    task = load_task(f"jsonl:{path}", skip_malformed=True)
    with pytest.warns(UserWarning, match=rf"skipping malformed row: .*d.jsonl, line {line}: an empty JSON object"):
        rows = task.split_rows("train") + task.split_rows("heldout")
    assert task.skipped == 1
    assert sorted(p.answer for p in rows) == sorted(r["answer"] for r in ROWS)  # every real row kept


def test_only_empty_objects_is_an_empty_task_not_a_mapping_error(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text("{}\n{}\n")
    task = load_task(f"jsonl:{path}", skip_malformed=True)
    with pytest.warns(UserWarning, match="an empty JSON object"):
        with pytest.raises(ValueError, match=r"has 0 problems; asked for 1 \(2 malformed row\(s\) were skipped"):
            task.problems("train", 1)
