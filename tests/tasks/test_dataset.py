"""Your own data: jsonl:PATH and hf:NAME[:CONFIG] tasks, column mapping, TRL prompt formats, verifiers."""

import json
import pickle
from pathlib import Path

import pytest

from gradprobe.tasks import DatasetFormatError, TaskConfigError, TaskNotFoundError, format_prompt, load_task
from gradprobe.tasks.dataset import BOXED_INSTRUCTION, DatasetTask, PromptText, parse_dataset_spec


REPO_PLAN = Path(__file__).resolve().parents[2] / "plans" / "tiny.toml"


def _jsonl(path, rows):
    path.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows))
    return path


class ChatTokenizer:
    """The part of a tokenizer that format_prompt uses: a chat template rendering role: content lines."""

    chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt and not tokenize
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"


PLAIN = [{"prompt": f"Compute {i} + 2. Answer after ####.", "answer": str(i + 2)} for i in range(20)]
CONVERSATIONAL = [{"prompt": [{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": f"What is {i} times 3?"}],
                   "answer": f"{i} * 3 = {3 * i}\n#### {3 * i}", "solution": f"{i} * 3 = {3 * i}"} for i in range(20)]
MATH = [{"problem": f"Simplify \\frac{{{i}}}{{{2 * i}}}.", "final": "\\boxed{\\frac{1}{2}}"} for i in range(1, 21)]


# ------------------------------------------------------------------------------ specs and splits
def test_spec_parsing():
    assert parse_dataset_spec("jsonl:data/x.jsonl") == ("jsonl", "data/x.jsonl", None, {})
    assert parse_dataset_spec("jsonl:data/x.jsonl:answer=final,verifier=boxed") == (
        "jsonl", "data/x.jsonl", None, {"answer": "final", "verifier": "boxed"})
    assert parse_dataset_spec("hf:openai/gsm8k:main") == ("hf", "openai/gsm8k", "main", {})
    assert parse_dataset_spec("hf:openai/gsm8k:main:question=question") == (
        "hf", "openai/gsm8k", "main", {"question": "question"})
    assert parse_dataset_spec("hf:org/name:prompt=p") == ("hf", "org/name", None, {"prompt": "p"})
    with pytest.raises(TaskNotFoundError, match="names no path"):
        load_task("jsonl:")


def test_plain_trl_prompts_are_used_verbatim_and_split_deterministically(tmp_path):
    task = load_task(f"jsonl:{_jsonl(tmp_path / 'plain.jsonl', PLAIN)}")
    train, held = task.split_rows("train"), task.split_rows("heldout")
    assert len(train) == 16 and len(held) == 4 and not {p.id for p in train} & {p.id for p in held}
    assert task.problems("train", 5, seed=1) == load_task(f"jsonl:{tmp_path / 'plain.jsonl'}").problems("train", 5, seed=1)
    p = train[0]
    assert p.question.prompt_format == "plain" and p.metadata["prompt_format"] == "plain"
    assert format_prompt(ChatTokenizer(), p.question) == p.question == PLAIN[int(p.id.rsplit("/", 1)[1])]["prompt"]
    assert task.score(f"so\n#### {p.answer}", p) == 1.0 and task.score("#### 999", p) == 0.0
    assert task.numeric_answers and task.format_rate("#### 4") and not task.format_rate("4")


def test_conversational_trl_prompts_go_through_the_chat_template(tmp_path):
    task = load_task(f"jsonl:{_jsonl(tmp_path / 'chat.jsonl', CONVERSATIONAL)}")
    p = task.problems("train", 1)[0]
    assert p.question.prompt_format == "conversational" and p.question.startswith("What is")
    i = int(p.answer) // 3
    assert format_prompt(ChatTokenizer(), p.question) == f"system: Be brief.\nuser: What is {i} times 3?\nassistant:"
    assert p.metadata["solution"] == f"{i} * 3 = {3 * i}"  # the solution column is found by its default name
    assert p.answer == str(3 * i)  # a GSM8K-style answer column: the gold is the text after ####
    with pytest.raises(ValueError, match="needs a model whose tokenizer has a chat template"):
        format_prompt(None, p.question)
    restored = pickle.loads(pickle.dumps(p))  # study workers receive problems pickled
    assert restored == p and restored.question.messages == p.question.messages
    assert format_prompt(ChatTokenizer(), restored.question) == format_prompt(ChatTokenizer(), p.question)


def test_question_mapping_with_boxed_verifier_and_a_folder(tmp_path):
    _jsonl(tmp_path / "train.jsonl", MATH[:15])
    _jsonl(tmp_path / "test.jsonl", MATH[12:])  # 3 questions shared with train are dropped from heldout
    task = load_task(f"jsonl:{tmp_path}:question=problem,answer=final,verifier=boxed")
    assert len(task.split_rows("train")) == 15 and len(task.split_rows("heldout")) == 5
    p = task.problems("train", 1)[0]
    assert p.answer == "\\frac{1}{2}" and p.question.prompt_format == "question"
    text = format_prompt(None, p.question)
    assert text.startswith(BOXED_INSTRUCTION) and p.question in text
    assert task.score("so \\boxed{0.5}", p) == 1.0  # math-verify: 1/2 = 0.5
    assert task.score("\\boxed{\\dfrac{2}{4}}", p) == 1.0
    assert task.score("\\boxed{\\frac{1}{3}}", p) == 0.0 and task.score("no answer", p) == 0.0
    assert task.format_rate("\\boxed{1}") and not task.format_rate("#### 1")


def test_exact_and_callable_verifiers(tmp_path):
    rows = [{"prompt": f"Name colour {i}", "answer": "Dark Blue"} for i in range(10)]
    task = load_task(f"jsonl:{_jsonl(tmp_path / 'c.jsonl', rows)}", verifier="exact")
    p = task.problems("train", 1)[0]
    assert task.score("#### Dark   Blue", p) == 1.0 and task.score("#### dark blue", p) == 0.0
    calls = []
    mine = DatasetTask(tmp_path / "c.jsonl", verifier=lambda c, prob: calls.append(prob.id) or float("Blue" in c))
    assert mine.score("Blue!", p) == 1.0 and mine.score("red", p) == 0.0 and calls == [p.id, p.id]


def test_hub_form_reads_a_dataset_through_datasets(tmp_path):
    """hf:NAME goes through datasets.load_dataset (here a local folder it reads offline)."""
    folder = tmp_path / "hubcopy"
    folder.mkdir()
    _jsonl(folder / "train.jsonl", CONVERSATIONAL[:14])
    _jsonl(folder / "test.jsonl", CONVERSATIONAL[14:])
    task = load_task(f"hf:{folder}")
    assert len(task.split_rows("train")) == 14 and len(task.split_rows("heldout")) == 6
    assert task.problems("heldout", 1)[0].question.prompt_format == "conversational"
    one = load_task(f"hf:{folder}:heldout_split=none,heldout_fraction=0.5")
    assert len(one.split_rows("train")) == 7 and len(one.split_rows("heldout")) == 7
    with pytest.raises(TaskConfigError, match="heldout_split='validation'"):
        load_task(f"hf:{folder}:heldout_split=validation").problems("heldout", 1)
    with pytest.raises(TaskConfigError, match=r"column mapping answer='gold'.*no column 'gold'.*columns: \["):
        load_task(f"hf:{folder}:answer=gold").problems("train", 1)


def test_hub_config_and_splits_are_passed_to_load_dataset(monkeypatch):
    import sys
    import types

    calls = []

    class Split(list):
        column_names = ["question", "answer"]

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return Split({"question": f"q{i}{split}", "answer": f"#### {i}"} for i in range(6))

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    task = load_task("hf:openai/gsm8k:main:train_split=train,heldout_split=test")
    assert calls == []  # nothing is loaded before problems are asked for
    assert len(task.problems("heldout", 6)) == 6
    assert calls == [("openai/gsm8k", "main", "test"), ("openai/gsm8k", "main", "train")]
    assert task.split_rows("train")[0].question.prompt_format == "question"


def test_plan_style_keyword_config_and_train_size(tmp_path):
    """Plans pass [task.config] as keywords, and their pool size as train_size."""
    task = load_task(f"jsonl:{_jsonl(tmp_path / 'plain.jsonl', PLAIN)}", verifier="hash", train_size=5,
                     heldout_fraction=0.25)
    assert len(task.split_rows("train")) == 5 and len(task.split_rows("heldout")) == 5


# ---------------------------------------------------------------------------------- bad input
def test_unknown_option_and_verifier_name_the_valid_ones(tmp_path):
    file = _jsonl(tmp_path / "p.jsonl", PLAIN)
    with pytest.raises(TaskConfigError, match=r"unknown option 'answr'.*valid: prompt, question, answer"):
        load_task(f"jsonl:{file}:answr=x")
    with pytest.raises(TaskConfigError, match=r"verifier='latex' is not one of hash, boxed, exact"):
        load_task(f"jsonl:{file}", verifier="latex")
    with pytest.raises(TaskConfigError, match="either prompt= .* or question="):
        load_task(f"jsonl:{file}", prompt="prompt", question="prompt")
    with pytest.raises(TaskConfigError, match="hf:NAME datasets only"):
        load_task(f"jsonl:{file}", train_split="train")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_task(f"jsonl:{tmp_path / 'nope.jsonl'}")


def test_mapping_to_a_column_that_does_not_exist(tmp_path):
    file = _jsonl(tmp_path / "m.jsonl", MATH)
    with pytest.raises(TaskConfigError) as info:
        load_task(f"jsonl:{file}:question=problem,answer=solution").problems("train", 1)
    msg = str(info.value)
    assert "answer='solution'" in msg and "columns: ['final', 'problem']" in msg and "answer=COLUMN" in msg
    with pytest.raises(TaskConfigError, match="neither a 'prompt' nor a 'question' column.*prompt=COLUMN"):
        load_task(f"jsonl:{file}:answer=final").problems("train", 1)


def test_rows_with_missing_columns_name_file_row_and_fix(tmp_path):
    rows = PLAIN[:3] + [{"prompt": "no answer here"}] + PLAIN[3:]
    file = _jsonl(tmp_path / "d.jsonl", rows)
    with pytest.raises(DatasetFormatError, match=r"d.jsonl, line 4: no column for answer='answer'.*skip_malformed"):
        load_task(f"jsonl:{file}").problems("train", 1)
    task = load_task(f"jsonl:{file}:skip_malformed=true")
    with pytest.warns(UserWarning, match="line 4"):
        assert len(task.split_rows("train")) + len(task.split_rows("heldout")) == 20
    assert task.skipped == 1
    bad_gold = _jsonl(tmp_path / "g.jsonl", PLAIN[:2] + [{"prompt": "x", "answer": "twelve"}])
    with pytest.raises(DatasetFormatError, match="line 3: column 'answer' .* holding a number .*verifier=exact"):
        load_task(f"jsonl:{bad_gold}").problems("train", 1)


def test_conversational_prompt_without_a_user_turn(tmp_path):
    rows = CONVERSATIONAL[:2] + [{"prompt": [{"role": "system", "content": "You add numbers."}], "answer": "3"}]
    file = _jsonl(tmp_path / "c.jsonl", rows)
    with pytest.raises(DatasetFormatError, match=r"line 3: conversational prompt 'prompt' has no 'user' turn "
                                                 r"\(roles: \['system'\]\); add a message with role 'user'"):
        load_task(f"jsonl:{file}").problems("train", 1)
    for bad, why in (([{"role": "user"}], "message 0 is not a"), ([], "empty list of messages"),
                     ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "ends with an 'assistant'"),
                     (7, "is int")):
        file = _jsonl(tmp_path / "c.jsonl", [{"prompt": bad, "answer": "3"}])
        with pytest.raises(DatasetFormatError, match=why):
            load_task(f"jsonl:{file}").problems("train", 0)


def test_the_probe_runs_on_a_jsonl_task(tmp_path, capsys):
    """End to end: `gradprobe probe --task jsonl:...` on a tiny random model, plain TRL prompts."""
    from gradprobe.cli import main

    file = _jsonl(tmp_path / "plain.jsonl", PLAIN)
    out = tmp_path / "probe"
    assert main(["probe", "--model", "tiny-qwen2", "--task", f"jsonl:{file}:verifier=hash", "--rewards", "outcome",
                 "--prompts", "2", "--group", "2", "--heldout-prompts", "1", "--heldout-group", "2",
                 "--max-new-tokens", "4", "--bootstrap", "20", "--no-progress", "--out", str(out)]) == 0, \
        capsys.readouterr().err
    saved = json.loads((out / "probe.json").read_text())
    assert saved["config"]["task"] == f"jsonl:{file}:verifier=hash" and saved["batch"]["prompts"] == 2
    # a mapping to a column that is not there: status 2, the field named, no folder left behind
    assert main(["probe", "--model", "tiny-qwen2", "--task", f"jsonl:{file}:answer=gold", "--no-progress",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "answer='gold'" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_a_plan_names_a_jsonl_task_with_its_options(tmp_path):
    """Plans: [task] name = "jsonl:PATH", the options under [task.config], the pool as train_size."""
    from gradprobe.training.plan import parse_plan
    from gradprobe.training.run import load_run_task

    file = _jsonl(tmp_path / "math.jsonl", MATH)
    text = REPO_PLAN.read_text()  # the shipped plan with its [task] table replaced
    start = text.index("\n[task]")
    end = text.index("\n[", text.index("\n[task.config]") + 1)
    text = (text[:start] + f'\n[task]\nname = "jsonl:{file}"\npool = 8\n[task.config]\nquestion = "problem"\n'
            'answer = "final"\nverifier = "boxed"\n' + text[end:])
    text = text.replace("prompts_per_update = 16", "prompts_per_update = 8")  # an update fits in the pool of 8
    plan = parse_plan(text, check_schedule=False)
    task = load_run_task(plan.task)
    assert isinstance(task, DatasetTask) and task.verifier == "boxed" and task.mapping["question"] == "problem"
    assert len(task.split_rows("train")) == 8  # the plan's pool
    p = task.problems("train", 1)[0]
    assert task.score("\\boxed{1/2}", p) == 1.0
