"""A trial user's findings on the data loaders, rank-prompts' metadata keys and train()'s budget arguments.

F9a: an empty JSONL file (or blank lines only) said "'train' has 0 problems ... put the file in a folder as
train.jsonl"; it now names the file, says it has no row and shows one. F10: held-out rows removed as repeats of a
training prompt were not counted in the "has 2 problems; asked for 4" error, and a training split repeating a
prompt was not warned about. F11: the refusal of a non-numeric metadata key offered the identifiers ``id`` and
``row`` as numeric keys; a key no prompt holds is warned about with the numeric key it is likely a typo of. F9g:
``gradprobe.train(..., updates=0)`` named the flag ``--updates``; it names the argument ``updates=``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from gradprobe.difficulty.metadata import check_metadata_keys
from gradprobe.tasks import load_task
from gradprobe.tasks.base import DatasetFormatError


PLAN = Path(__file__).resolve().parents[2] / "plans" / "tiny.toml"


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------- F9a: a file with no row


@pytest.mark.parametrize("kind", ["jsonl", "gsm8k"])
@pytest.mark.parametrize(("text", "said"), [("", "is empty"), ("\n\n   \n", "holds 3 blank line(s) and no row")])
def test_a_file_with_no_row_names_the_file_and_shows_a_row(tmp_path, kind, text, said):
    """Was: "'train' has 0 problems; asked for 4 (... put the file in a folder as train.jsonl ...)"."""
    file = tmp_path / "pool.jsonl"
    file.write_text(text)
    with pytest.raises(DatasetFormatError) as err:
        load_task(f"{kind}:{file}").problems("train", 4)
    msg = str(err.value)
    assert msg.startswith(f"{file} {said}: a JSONL file holds one row per line, each a JSON object such as ")
    row = '{"question": "What is 2 + 3?", "answer": "5"}' if kind == "jsonl" else \
        '{"question": "What is 2 + 3?", "answer": "2 + 3 = 5\\n#### 5"}'
    assert row in msg and "has 0 problems" not in msg and "train.jsonl" not in msg


def test_the_row_shown_uses_the_mapped_columns_and_skipped_rows_are_still_counted(tmp_path):
    file = tmp_path / "pool.jsonl"
    file.write_text("\n")
    with pytest.raises(DatasetFormatError, match=r'such as \{"problem": "What is 2 \+ 3\?", "final": "5"\}; add rows'):
        load_task(f"jsonl:{file}:question=problem,answer=final").problems("train", 1)
    # rows that were there but skipped are not "no row": the split-size message counts them, as before
    file.write_text("not json\n{}\n")
    task = load_task(f"jsonl:{file}", skip_malformed=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"'train' has 0 problems; asked for 1 \(2 malformed row\(s\) were "):
            task.problems("train", 1)


# ---------------------------------------------------------------- F10: held-out rows removed, repeats in train

# 0-based rows holding one question; the fixed split of 40 rows holds out rows 2 7 11 13 17 19 23 32
REPEATED = {0, 7, 11, 13, 17, 19, 23}


def _forty_rows():
    return [{"question": "7 + 7 + 1" if i in REPEATED else f"{i} + 100", "answer": "15" if i in REPEATED
             else str(i + 100)} for i in range(40)]


def test_held_out_rows_removed_as_training_prompts_are_counted_with_their_lines(tmp_path):
    """Was: "'heldout' has 2 problems; asked for 4 (one source is split 80% train / 20% heldout
    (heldout_fraction)); ask for fewer or give more rows", the six removed rows unsaid."""
    task = load_task(f"jsonl:{_write(tmp_path / 'dup.jsonl', _forty_rows())}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the one copy left in train repeats nothing: no warning
        assert len(task.problems("train", 32)) == 32
    assert [p.metadata["row"] for p in task.split_rows("heldout")] == [2, 32]
    with pytest.raises(ValueError) as err:
        task.problems("heldout", 4)
    assert str(err.value) == (
        f"jsonl:{tmp_path / 'dup.jsonl'} 'heldout' has 2 problems; asked for 4 (one source is split 80% train / 20% "
        "heldout (heldout_fraction); 6 of the 8 held-out rows were removed because their prompt is also a training "
        "prompt (line 8 repeats line 1; line 12 repeats line 1; line 14 repeats line 1; ...), and a held-out score "
        "must not count prompts trained on; give the data distinct prompts); ask for fewer or give more rows")
    assert len(task.problems("heldout", 2)) == 2  # a request the split fills is unchanged


@pytest.mark.parametrize("kind", ["jsonl", "gsm8k"])
def test_a_folder_names_the_files_of_a_removed_row(tmp_path, kind):
    rows = [{"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(4)]
    _write(tmp_path / "train.jsonl", rows)
    _write(tmp_path / "test.jsonl", [{"question": "What is 9 + 1?", "answer": "#### 10"}, rows[2]])
    with pytest.raises(ValueError) as err:
        load_task(f"{kind}:{tmp_path}").problems("heldout", 2)
    assert "'heldout' has 1 problems; asked for 2 (" in str(err.value)
    assert ("1 of the 2 held-out rows were removed because their prompt is also a training prompt (test.jsonl line 2 "
            "repeats train.jsonl line 3)") in str(err.value)


@pytest.mark.parametrize("kind", ["jsonl", "gsm8k"])
def test_a_training_split_repeating_a_prompt_is_warned_once_with_its_lines(tmp_path, kind):
    questions = ["What is 1 + 1?", "What is 2 + 1?", "What is  1 + 1?", "What is 3 + 1?", "What is 1 + 1?"]
    _write(tmp_path / "train.jsonl", [{"question": q, "answer": "#### 2"} for q in questions])
    task = load_task(f"{kind}:{tmp_path}")
    with pytest.warns(UserWarning) as record:
        task.problems("train", 5)
        task.problems("train", 3, seed=1)
        task.split_rows("train")
    said = [str(w.message) for w in record]
    assert said == [f"{kind}:{tmp_path}: 2 training row(s) repeat an earlier row's prompt (1 prompt(s) on several "
                    "lines: 'What is 1 + 1?' on lines 1, 3, 5 (3 rows)): each copy is drawn as a prompt of its own, "
                    "so a batch can hold several groups of one question and fewer distinct questions than prompts; "
                    "keep one row per prompt"]
    assert len(task.split_rows("train")) == 5  # the rows are kept


@pytest.mark.parametrize("kind", ["jsonl", "gsm8k"])
def test_repeated_prompts_with_different_golds_are_named(tmp_path, kind):
    """A trial user's pool asked 'What is 2+2?' with gold 4 on line 1 and 5 on line 3: only the repeat was warned
    about, while one of the two rows rewards a correct completion 0."""
    rows = [("What is 2+2?", "4"), ("What is 3+1?", "4"), ("What is 2+2?", "5"), ("What is 1+1?", "2"),
            ("What is 1+1?", "2"), ("Half of 1?", "0.5"), ("Half of 1?", "1/2")]  # 0.5 and 1/2: one answer
    _write(tmp_path / "train.jsonl", [{"question": q, "answer": f"#### {a}"} for q, a in rows])
    with pytest.warns(UserWarning) as record:
        load_task(f"{kind}:{tmp_path}").split_rows("train")
    said = [str(w.message) for w in record]
    assert len(said) == 2 and said[0].startswith(f"{kind}:{tmp_path}: 3 training row(s) repeat an earlier row's")
    assert said[1] == (f"{kind}:{tmp_path}: 1 repeated training prompt(s) have different gold answers ('What is "
                       "2+2?': '4' on line 1, '5' on line 3): at most one gold can be right, so the same correct "
                       "completion is rewarded 1 on one row and 0 on another; fix the golds (keep one row per prompt)")


# ---------------------------------------------------------------- F11: metadata keys


def _topic_pool(tmp_path):
    rows = [{"id": i, "question": f"What is {i} + 1?", "answer": str(i + 1), "level": i % 3,
             "topic": "sum" if i % 2 else "arith"} for i in range(6)]
    _write(tmp_path / "train.jsonl", rows)
    return load_task(f"jsonl:{tmp_path}").problems("train", 6)


def test_the_refusal_of_a_text_key_offers_no_identifier_as_a_numeric_key(tmp_path):
    """Was: "(keys numeric in every prompt holding them: id, level, row)": a row's id and index are no features."""
    problems = _topic_pool(tmp_path)
    with pytest.raises(ValueError) as err:
        check_metadata_keys(problems, ["topic"])
    assert str(err.value).endswith("give numeric keys only (keys numeric in every prompt holding them: level)")


def test_a_key_no_prompt_holds_is_warned_with_the_numeric_key_it_is_likely_a_typo_of(tmp_path):
    problems = _topic_pool(tmp_path)
    with pytest.warns(UserWarning) as record:
        check_metadata_keys(problems, ["levle"])
    assert [str(w.message) for w in record] == [
        "metadata_keys (--metadata-keys) levle: in no prompt of this pool, so imputed as a constant that carries no "
        "information (keys present: id, level, prompt_format, row, source, topic); did you mean 'level' for 'levle'?"]


# ---------------------------------------------------------------- F9g: train()'s budget arguments


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"updates": 0}, "updates= must be a whole number > 0 (a budget the run can spend), got 0"),
    ({"budget_flops": float("nan")}, "budget_flops= must be a finite number > 0 (a budget the run can spend), got nan"),
    ({"budget_tokens": 500_000}, "budget_tokens=500,000 is more than the plan's budget.generated_tokens = 250,000: "
                                 "the budget arguments only shorten a run"),
    ({"updates": 20, "budget_tokens": 2000}, "updates=20 conflicts with budget_tokens = 2,000: each update of arm "
                                             "'grpo' costs at least B * G = 16 * 8 = 128 tokens"),
    ({"updates": 2000}, "updates=2,000 conflicts with the plan's budget.generated_tokens = 250,000: "),
])
def test_train_names_its_own_budget_arguments_not_the_flags(tmp_path, kwargs, said):
    """Was: "--updates must be a whole number > 0 ...": the command line's flag, from Python."""
    import gradprobe
    from gradprobe.training.plan import PlanError

    out = tmp_path / "run"
    with pytest.raises(PlanError) as err:
        gradprobe.train(PLAN, out, arm="grpo", **kwargs)
    assert str(err.value).startswith(said) and "--" not in str(err.value)
    assert not out.exists()


def test_train_says_how_many_updates_the_token_budget_allows_by_its_argument(tmp_path):
    import gradprobe
    from gradprobe.training.plan import PlanError

    # 1953 * 128 = 249,984 < 250,000 tokens: update 1954 still starts (it said "at most 1953")
    with pytest.raises(PlanError, match=r"always stops on tokens before update 2,000; give updates= at most 1_954 "):
        gradprobe.train(PLAN, tmp_path / "run", arm="grpo", updates=2000)
