"""A numeric gold is read by the completion's rule (gradprobe.tasks.verify.numeric_gold): a unit, currency, '%' or a
final '.' in the gold no longer makes every correct rollout score 0; a gold of several numbers is kept as written."""

import json

import pytest

from gradprobe.tasks import load_task
from gradprobe.tasks.base import DatasetFormatError
from gradprobe.tasks.gsm8k import GSM8KTask
from gradprobe.tasks.verify import numeric_gold


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("gold", ["13 apples", "13.0", "$13", "13%", "13.", 13, 13.0, "#### 13 apples"])
def test_gold_with_unit_scores_like_the_completion(tmp_path, gold):
    rows = [{"question": f"q{i}", "answer": gold} for i in range(5)]
    task = load_task(f"jsonl:{_jsonl(tmp_path / 'u.jsonl', rows)}")
    p = task.split_rows("train")[0]
    assert p.answer == ("13" if gold in ("13 apples", "13.", "#### 13 apples") else str(gold))
    for completion in ("#### 13", "#### 13.0", "#### 13 apples", "so\n#### $13"):
        assert task.score(completion, p) == 1.0, completion
    assert task.score("#### 14 apples", p) == 0.0 and task.score("#### 1.3", p) == 0.0


@pytest.mark.parametrize("gold", ["3:30", "3 1/2", "1 000"])
def test_gold_with_several_numbers_is_kept_as_written(tmp_path, gold):
    """A time, a mixed number or a spaced thousand: which number is the answer is not the verifier's to guess; the
    gold is kept and compared as before the rule (a first version refused such rows, failing the whole load)."""
    rows = [{"question": "q0", "answer": "4"}, {"question": "q1", "answer": gold}]
    task = load_task(f"jsonl:{_jsonl(tmp_path / 'm.jsonl', rows)}")
    p = next(p for p in task.split_rows("train") + task.split_rows("heldout") if p.question == "q1")
    assert p.answer == gold and task.score(f"#### {gold}", p) == 1.0 and task.score("#### 4", p) == 0.0


def test_gsm8k_gold_with_unit(tmp_path):
    rows = [{"question": f"q{i}", "answer": f"6 + 7 = 13\n#### {['13 apples', '1,200.0'][i % 2]}"} for i in range(6)]
    task = GSM8KTask(_jsonl(tmp_path / "g.jsonl", rows))
    golds = {p.question: p.answer for p in task.split_rows("train") + task.split_rows("heldout")}
    assert golds == {f"q{i}": ["13", "1200.0"][i % 2] for i in range(6)}
    p = next(p for p in task.split_rows("train") if p.answer == "13")
    assert task.score("#### 13", p) == 1.0 and task.score("#### 13 apples", p) == 1.0
    bad = _jsonl(tmp_path / "b.jsonl", [{"question": "q", "answer": "#### twelve"}])
    with pytest.raises(DatasetFormatError, match=r"line 1: the final answer after '####' \('twelve'\) holds no number"):
        GSM8KTask(bad).split_rows("train")


def test_numeric_gold_rule():
    assert numeric_gold("13 apples") == ("13", "") and numeric_gold("-0.50 dollars") == ("-0.5", "")
    assert numeric_gold("3/4 cup") == ("0.75", "") and numeric_gold("3/4") == ("3/4", "")
    assert numeric_gold("\\sqrt{2}") == ("\\sqrt{2}", "")  # LaTeX: math-verify decides
    assert numeric_gold("twelve")[0] is None and "no number" in numeric_gold("twelve")[1]


@pytest.mark.parametrize("gold, stored", [("1,5", "1,5"), ("1,50", "1,50"), ("1234,567", "1234,567"),
                                          ("1,2345", "1,2345"), ("1.2.3", "1.2.3"), ("12,3456 m", "12,3456 m"),
                                          ("1,200", "1200"), ("-12,345,678.5", "-12345678.5")])
def test_gold_comma_is_a_thousands_separator_only_between_groups_of_three(tmp_path, gold, stored):
    """Every comma used to be dropped from a gold, so "1,5" became 15, which no completion matched: "#### 1,5" is read
    as 1 (then 5) and "#### 15" was the only answer scored 1. A comma is now read as in a completion."""
    rows = [{"question": f"q{i}", "answer": gold} for i in range(5)]
    task = load_task(f"jsonl:{_jsonl(tmp_path / 'c.jsonl', rows)}")
    gsm_rows = [{"question": f"q{i}", "answer": f"x\n#### {gold}"} for i in range(5)]
    gsm = GSM8KTask(_jsonl(tmp_path / "g.jsonl", gsm_rows))
    for t in (task, gsm):
        p = t.split_rows("train")[0]
        assert p.answer == stored and t.score(f"#### {gold}", p) == 1.0
        assert t.score(f"#### {gold.replace(',', '')}", p) == (1.0 if stored == gold.replace(",", "") else 0.0)


@pytest.mark.parametrize("gold, shown", [([1], "a JSON list ([1])"), ({"value": 1}, 'a JSON object ({"value": 1})')])
def test_a_gold_that_is_a_list_or_object_is_named_as_such(tmp_path, gold, shown):
    """A gold ``[1]`` was reported as "its value is empty"."""
    rows = [{"question": "q0", "answer": "4"}, {"question": "q1", "answer": gold}]
    with pytest.raises(DatasetFormatError) as e:
        load_task(f"jsonl:{_jsonl(tmp_path / 'l.jsonl', rows)}").split_rows("train")
    assert (f"line 2: column 'answer' (answer=) gives no gold answer holding a number (its value is {shown}, not text "
            "or a number (give the answer itself);") in str(e.value)
