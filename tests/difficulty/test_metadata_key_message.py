"""The refusal of a --metadata-keys key whose value is no number in some rows: it names those rows (first three,
with their line in the JSONL file), says in how many prompts the key is a number, and the fix; "numeric in this
pool" lists the keys numeric in every row holding them (it said only "numeric in this pool: none" before)."""

from __future__ import annotations

import json

import pytest

from gradprobe.difficulty.metadata import check_metadata_keys
from gradprobe.tasks import load_task
from gradprobe.tasks.base import Problem


def _pool(tmp_path, level, n=10):
    rows = [{"question": f"What is {i} + 1?", "answer": str(i + 1), "level": level(i), "steps": i % 4}
            for i in range(n)]
    file = tmp_path / "pool.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = load_task(f"jsonl:{file}:heldout_fraction=0.1")
    return file, sorted(task.split_rows("train"), key=lambda p: p.metadata["row"])


def test_one_text_value_among_numbers_is_named_by_line_and_counted(tmp_path):
    file, problems = _pool(tmp_path, lambda i: "hard" if i == 6 else i % 3)
    assert len(problems) == 9 and any(p.metadata["row"] == 6 for p in problems)
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems[::-1], ["level"])
    assert str(err.value) == (
        f"metadata key 'level' (--metadata-keys) is not a number: 'hard' in prompt jsonl/pool/6 (line 7) in {file}; "
        "'level' is numeric in 8 of 9 prompts: make each such value a number, or null (missing: imputed), or give "
        "numeric keys only (keys numeric in every prompt holding them: steps)")


def test_numbers_written_as_text_are_listed_first_three_in_line_order(tmp_path):
    file, problems = _pool(tmp_path, lambda i: str(i % 3))
    lines = [p.metadata["row"] + 1 for p in problems][:3]
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems[::-1], ["level"])
    msg = str(err.value)
    shown = ", ".join(f"'{(n - 1) % 3}' in prompt jsonl/pool/{n - 1} (line {n})" for n in lines)
    assert msg == (f"metadata key 'level' (--metadata-keys) is not a number: {shown} and 6 more in {file}; 'level' is "
                   'numeric in 0 of 9 prompts: write them as JSON numbers (2, not "2"), or give numeric keys only '
                   "(keys numeric in every prompt holding them: steps)")


def test_problems_without_a_data_row_are_named_by_id():
    problems = [Problem(id=f"p{i}", question="q", answer="1", metadata={"level": "x" if i == 2 else i})
                for i in range(4)]
    with pytest.raises(ValueError, match=r"not a number: 'x' in prompt p2; 'level' is numeric in 3 of 4 prompts: "
                                         r"make each .*\(keys numeric in every prompt holding them: none\)$"):
        check_metadata_keys(problems, ["level"])
