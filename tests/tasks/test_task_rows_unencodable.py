"""Rows whose text a tokenizer cannot take are refused when the file loads, naming the file, the line, the field
and the fix (``gsm8k:`` and ``jsonl:`` alike; hub rows pass the same check):

- a lone UTF-16 surrogate escape (``"\\ud800"``): valid JSON text, but the decoded string holds half a character
  that UTF-8 cannot encode; it was loaded, and training crashed with a tokenizer ``TypeError`` when the prompt was
  first drawn;
- a blank question (or answer) in a ``gsm8k:`` file, which ``jsonl:`` refused and ``gsm8k:`` trained on as a
  prompt, now refused by the one check both use (:func:`gradprobe.tasks.base.text_cell_problem`).
"""

from __future__ import annotations

import json

import pytest

from gradprobe.tasks import DatasetFormatError, load_task
from gradprobe.tasks.dataset import DatasetTask

SURROGATE_FIX = ("an unpaired UTF-16 surrogate: half of a character, which no UTF-8 text can hold (a JSON escape "
                 "\\ud800-\\udbff must be followed by its \\udc00-\\udfff pair, e.g. \\ud83d\\ude00 for one emoji); "
                 "write the whole character (or its pair of escapes), or delete the escape")


def _rows(kind: str, n: int = 10) -> list[dict]:
    if kind == "gsm8k":
        return [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(n)]
    return [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(n)]


def _write(path, rows) -> None:
    """``rows`` as JSONL written by ``json.dumps`` (ASCII escapes: a lone surrogate becomes the text ``\\ud800``)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _all_rows(task) -> list:
    return task.split_rows("train") + task.split_rows("heldout")


@pytest.mark.parametrize("kind", ["gsm8k", "jsonl"])
def test_a_lone_surrogate_in_the_question_is_refused_naming_file_line_field_and_fix(tmp_path, kind):
    rows = _rows(kind)
    rows[2]["question"] = "What is \ud800 1+1?"
    path = tmp_path / "data.jsonl"
    _write(path, rows)
    assert "\\ud800" in path.read_text(encoding="utf-8")  # valid UTF-8 and valid JSON: the escape is ASCII
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"{kind}:{path}").problems("train", 1)
    msg = str(info.value)
    assert msg.startswith(f"{path}, line 3: field 'question' holds \\ud800 (character 9, after 'What is '), "
                          + SURROGATE_FIX)
    assert "--skip-malformed" in msg
    assert "TextEncodeInput" not in msg


@pytest.mark.parametrize("kind", ["gsm8k", "jsonl"])
def test_a_lone_surrogate_in_the_answer_is_refused(tmp_path, kind):
    rows = _rows(kind)
    rows[6]["answer"] = rows[6]["answer"][:-1] + "\udc00" + rows[6]["answer"][-1]
    path = tmp_path / "data.jsonl"
    _write(path, rows)
    after = "6 + 1 = 7\\n#### " if kind == "gsm8k" else ""
    char = 16 if kind == "gsm8k" else 1
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"{kind}:{path}").problems("train", 1)
    assert str(info.value).startswith(f"{path}, line 7: field 'answer' holds \\udc00 (character {char}, after "
                                      f"'{after}'), " + SURROGATE_FIX)


@pytest.mark.parametrize("kind", ["gsm8k", "jsonl"])
def test_skip_malformed_skips_and_counts_a_surrogate_row(tmp_path, kind):
    """Only the lone half is refused: a whole pair of escapes (json.dumps writes an emoji so) is one character."""
    rows = _rows(kind)
    rows[4]["question"] = "\ud83d What is 4 + 1?"
    rows[7]["question"] = "What is \U0001F600 + 1?"
    path = tmp_path / "data.jsonl"
    _write(path, rows)
    assert "\\ud83d\\ude00" in path.read_text(encoding="utf-8")
    task = load_task(f"{kind}:{path}", skip_malformed=True)
    with pytest.warns(UserWarning, match=r"data.jsonl, line 5: field 'question' holds \\ud83d \(character 1, "
                                         r"after ''\), an unpaired UTF-16 surrogate"):
        got = _all_rows(task)
    assert task.skipped == 1
    assert sorted(p.question for p in got) == sorted(r["question"] for i, r in enumerate(rows) if i != 4)
    assert "What is \U0001F600 + 1?" in {p.question for p in got}
    for p in got:  # every row kept is UTF-8 text (what the tokenizer is given)
        p.question.encode("utf-8")


def test_a_surrogate_inside_a_conversational_prompt_names_the_message(tmp_path):
    rows = [{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"{i} + 1 = ?"}],
             "answer": str(i + 1)} for i in range(6)]
    rows[1]["prompt"][1]["content"] = "1 + 1 = \udbff?"
    path = tmp_path / "chat.jsonl"
    _write(path, rows)
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"jsonl:{path}").problems("train", 1)
    assert str(info.value).startswith(f"{path}, line 2: field 'prompt'[1]['content'] holds \\udbff (character 9, "
                                      f"after '1 + 1 = '), " + SURROGATE_FIX)


def test_a_surrogate_in_a_kept_column_is_refused_too(tmp_path):
    """A scalar column is kept in Problem.metadata (written out by rank-prompts), so it is checked as well."""
    rows = _rows("jsonl")
    rows[3]["topic"] = "sums \ud800"
    path = tmp_path / "data.jsonl"
    _write(path, rows)
    with pytest.raises(DatasetFormatError, match=r"data.jsonl, line 4: field 'topic' holds \\ud800 \(character 6"):
        load_task(f"jsonl:{path}").problems("train", 1)


def test_hub_rows_pass_the_same_check(tmp_path):
    """``hf:`` rows are dicts read by the same parser (counted as rows, named with the split)."""
    task = DatasetTask("some/dataset", kind="hf")
    rows = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is \ud800?", "answer": "3"}]
    with pytest.raises(DatasetFormatError) as info:
        task._parse(enumerate(rows, start=1), "hf:some/dataset[train]", "dataset/train",
                    columns=["question", "answer"])
    assert str(info.value).startswith("hf:some/dataset[train], row 2: field 'question' holds \\ud800 (character 9, "
                                      "after 'What is '), " + SURROGATE_FIX)


@pytest.mark.parametrize(("question", "said"), [("", "is empty"), ("   \n", "is empty (whitespace only: '   \\n')")])
def test_gsm8k_refuses_a_blank_question_as_jsonl_does(tmp_path, question, said):
    rows = _rows("gsm8k")
    rows[1]["question"] = question
    path = tmp_path / "data.jsonl"
    _write(path, rows)
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"gsm8k:{path}").problems("train", 1)
    msg = str(info.value)
    assert msg.startswith(f"{path}, line 2: column 'question' {said}. Each line must be a JSON object with a "
                          "'question' and an 'answer'")
    assert "--skip-malformed" in msg
    # jsonl: says the same of the same row (its option named after the column)
    plain = tmp_path / "plain.jsonl"
    _write(plain, [{"question": r["question"], "answer": r["answer"].rsplit("#### ", 1)[1]} for r in rows])
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"jsonl:{plain}").problems("train", 1)
    assert str(info.value).startswith(f"{plain}, line 2: column 'question' (question=) {said}; fix or delete the row")


def test_gsm8k_skips_a_blank_question_with_skip_malformed(tmp_path):
    rows = _rows("gsm8k")
    rows[5]["question"] = " "
    path = tmp_path / "data.jsonl"
    _write(path, rows)
    task = load_task(f"gsm8k:{path}", skip_malformed=True)
    with pytest.warns(UserWarning, match=r"skipping malformed GSM8K row: .*data.jsonl, line 6: column 'question' is "
                                         r"empty \(whitespace only: ' '\)"):
        got = _all_rows(task)
    assert task.skipped == 1 and len(got) == 9
    assert all(p.question.strip() for p in got)


@pytest.mark.parametrize(("answer", "said"), [("", "column 'answer' is empty"),
                                              (None, "column 'answer' is null"),
                                              (42, "column 'answer' is not a string (got int)")])
def test_gsm8k_names_an_answer_that_is_blank_or_not_text(tmp_path, answer, said):
    rows = _rows("gsm8k")
    rows[0]["answer"] = answer
    path = tmp_path / "data.jsonl"
    _write(path, rows)
    with pytest.raises(DatasetFormatError) as info:
        load_task(f"gsm8k:{path}").problems("train", 1)
    assert str(info.value).startswith(f"{path}, line 1: {said}. Each line must be a JSON object")


def test_the_gsm8k_fixture_still_loads_and_a_surrogate_row_among_it_is_named(tmp_path, gsm8k_dir):
    """The real GSM8K rows (tests/data/gsm8k/train.jsonl, 300) all pass; one bad row put among them is refused, or
    skipped and counted, and the 300 real ones kept."""
    real = (gsm8k_dir / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(real) == 300
    bad = json.dumps({"question": "Q \ud800 " + json.loads(real[20])["question"],
                      "answer": json.loads(real[20])["answer"]})
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(real[:150] + [bad] + real[150:]) + "\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"train.jsonl, line 151: field 'question' holds \\ud800 "
                                                 r"\(character 3, after 'Q '\)"):
        load_task(f"gsm8k:{tmp_path}").split_rows("train")
    task = load_task(f"gsm8k:{tmp_path}", skip_malformed=True)
    with pytest.warns(UserWarning, match="line 151"):
        rows = task.split_rows("train")
    assert task.skipped == 1 and len(rows) == 300
    clean = load_task(f"gsm8k:{gsm8k_dir}")
    assert len(clean.split_rows("train")) == 300 and len(clean.split_rows("heldout")) == 100 and clean.skipped == 0
    assert [p.question for p in rows] == [p.question for p in clean.split_rows("train")]
