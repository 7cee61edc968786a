"""Tasks: reasoning-gym and GSM8K problem sources, load_task, prompts."""

import json
import string

import pytest

from gradprobe.tasks import (
    INSTRUCTION,
    DatasetFormatError,
    Problem,
    TaskConfigError,
    TaskNotFoundError,
    encode_prompt,
    format_prompt,
    load_task,
)
from gradprobe.tasks.gsm8k import GSM8KTask, gold_from_solution



# ---------------------------------------------------------------- reasoning-gym
@pytest.fixture(scope="module")
def chain_sum():
    return load_task("chain_sum")


def test_reasoning_gym_same_seed_same_problems(chain_sum):
    a = chain_sum.problems("train", 30, seed=3)
    b = load_task("chain_sum").problems("train", 30, seed=3)
    assert a == b
    assert len(a) == 30 and all(isinstance(p, Problem) for p in a)
    assert len({p.id for p in a}) == 30


def test_reasoning_gym_different_seed_different_problems(chain_sum):
    a = [p.question for p in chain_sum.problems("train", 30, seed=0)]
    b = [p.question for p in chain_sum.problems("train", 30, seed=1)]
    assert a != b
    assert len(set(a) & set(b)) < 10


def test_reasoning_gym_ids_stable_and_prefix(chain_sum):
    first = chain_sum.problems("train", 5)
    longer = chain_sum.problems("train", 20)
    assert first == longer[:5]
    assert [p.id for p in first] == [f"chain_sum/train/{i}" for i in range(5)]
    assert chain_sum.problems("train", 2, seed=4)[1].id == "chain_sum/train/s4/1"
    assert chain_sum.problems("heldout", 1)[0].id.startswith("chain_sum/heldout/")
    json.dumps([p.metadata for p in longer])  # JSON-serialisable


@pytest.mark.parametrize("seed", [0, 7])
def test_train_heldout_disjoint_even_on_a_small_question_space(seed):
    # 1-digit, 2-term sums: only 100 distinct questions, so plenty of collisions.
    task = load_task("chain_sum", min_terms=2, max_terms=2, min_digits=1, max_digits=1)
    train = task.problems("train", 40, seed=seed)
    held = task.problems("heldout", 40, seed=seed)
    assert len(held) == 40
    assert not {p.question for p in train} & {p.question for p in held}
    assert held == task.problems("heldout", 40, seed=seed)  # still deterministic


def test_heldout_deduplicated_against_train_size():
    task = load_task("chain_sum", min_terms=2, max_terms=2, max_digits=1, train_size=60)
    train = {p.question for p in task.problems("train", 60)}
    held = task.problems("heldout", 10)
    assert not train & {p.question for p in held}


def test_too_small_question_space_raises():
    # a train pool of 3000 covers all ~200 one-digit a +/- b questions
    task = load_task("chain_sum", min_terms=2, max_terms=2, max_digits=1, train_size=3000)
    with pytest.raises(ValueError, match="too few distinct questions"):
        task.problems("heldout", 5)


@pytest.mark.parametrize(("name", "n"), [("chain_sum", 50), ("basic_arithmetic", 20)])
def test_gold_answer_scores_one(name, n):
    task = load_task(name)
    for split in ("train", "heldout"):
        for p in task.problems(split, n, seed=1):
            completion = f"step\n#### {p.answer}"
            assert task.score(completion, p) == 1.0, (p.question, p.answer)
            assert task.format_rate(completion)


def test_score_and_format_rate_values(chain_sum):
    p = Problem(id="x", question="1 + 2 =", answer="3", metadata={})
    assert chain_sum.score("1 + 2 = 3\n#### 3", p) == 1.0
    assert chain_sum.score("#### 4", p) == 0.0
    assert chain_sum.score("the answer is 3", p) == 0.0
    assert chain_sum.score("\\boxed{3}", p) == 1.0
    assert chain_sum.format_rate("\\boxed{3}") is False
    assert chain_sum.format_rate("#### three") is False
    assert chain_sum.format_rate("#### 3 apples") is True


def test_multiline_gold_compares_the_block_after_the_marker(chain_sum):
    grid = Problem(id="g", question="grid?", answer="1 0\n0 1", metadata={})
    assert chain_sum.score("rows:\n####\n1  0\n0 1\n", grid) == 1.0
    assert chain_sum.score("#### 1 0\n1 1", grid) == 0.0
    assert chain_sum.score("#### 1 0 0 1", grid) == 0.0  # wrong shape


def test_every_registered_dataset_scores_its_gold():
    from gradprobe.tasks.reasoning_gym import registered_names

    names = [n for n in registered_names() if n != "composite"]  # composite needs config
    assert len(names) > 90
    for name in names[::7]:  # a spread sample keeps the suite fast
        task = load_task(name)
        for p in task.problems("train", 3) + task.problems("heldout", 2):
            assert task.score(f"work\n#### {p.answer}", p) == 1.0, (name, p.answer)


def test_config_passes_through():
    task = load_task("chain_sum", min_terms=3, max_terms=3, min_digits=2, max_digits=2)
    for p in task.problems("train", 20):
        assert p.metadata["num_terms"] == 3
        terms = p.metadata["expression"].split()[::2]
        assert all(len(t.lstrip("-")) == 2 for t in terms)


def test_invalid_config_key_names_it():
    with pytest.raises(TaskConfigError, match="'max_term'.*min_terms"):
        load_task("chain_sum", max_term=3)
    with pytest.raises(TaskConfigError, match="'seed'"):
        load_task("chain_sum", seed=3)
    with pytest.raises(TaskConfigError, match="max_terms must be >= min_terms"):
        load_task("chain_sum", min_terms=5, max_terms=2)


def test_bad_split_and_n(chain_sum):
    with pytest.raises(ValueError, match="split"):
        chain_sum.problems("test", 3)
    with pytest.raises(ValueError, match="non-negative"):
        chain_sum.problems("train", -1)
    assert chain_sum.problems("heldout", 0) == []


def test_gsm_symbolic_loads():
    task = load_task("gsm_symbolic")
    probs = task.problems("train", 3)
    assert all(task.score(f"#### {p.answer}", p) == 1.0 for p in probs)


def test_unknown_task_lists_names():
    with pytest.raises(TaskNotFoundError, match="chain_sum") as info:
        load_task("chain_sums")
    msg = str(info.value)
    assert "basic_arithmetic" in msg and "gsm8k:PATH" in msg and "'chain_sums'" in msg
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------------- GSM8K
def test_gsm8k_folder_counts_and_gold(gsm8k_dir):
    task = load_task(f"gsm8k:{gsm8k_dir}")
    assert len(task.split_rows("heldout")) == 100  # tests/data/gsm8k: the first 100 test rows
    assert len(task.split_rows("train")) == 300  # and the first 300 train rows
    first = task.split_rows("heldout")[0]
    assert first.id == "gsm8k/test/0" and first.answer == "18"
    assert first.question.startswith("Janet")
    assert all("," not in p.answer for p in task.split_rows("train"))


def test_gsm8k_sampling_deterministic_and_scored(gsm8k_dir):
    task = GSM8KTask(gsm8k_dir)
    a = task.problems("heldout", 25, seed=0)
    assert a == task.problems("heldout", 25, seed=0)
    assert a[:10] == task.problems("heldout", 10, seed=0)
    assert [p.id for p in a] != [p.id for p in task.problems("heldout", 25, seed=1)]
    for p in a:
        assert task.score(p.metadata["solution"], p) == 1.0  # the gold solution itself
    with pytest.raises(ValueError, match="100"):
        task.problems("heldout", 200)


def test_gold_from_solution():
    assert gold_from_solution("a\n#### 1,200") == "1200"
    assert gold_from_solution("#### 1\n#### -7") == "-7"
    assert gold_from_solution("no marker") is None
    assert gold_from_solution("####  ") is None


def _write(path, rows):
    path.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows))


GOOD = [{"question": f"q{i}?", "answer": f"work\n#### {i}"} for i in range(10)]


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({"question": "q?", "answer": "no marker here"}, "after '####'"),
        ({"question": "q?"}, "no 'answer' key"),
        ("{not json\n", "not valid JSON"),
    ],
)
def test_gsm8k_malformed_row_raises_with_line(tmp_path, bad, why):
    file = tmp_path / "data.jsonl"
    _write(file, GOOD[:3] + [bad] + GOOD[3:])
    task = load_task(f"gsm8k:{file}")
    with pytest.raises(DatasetFormatError, match=rf"data.jsonl, line 4: .*{why}.*skip_malformed"):
        task.problems("train", 2)


def test_gsm8k_skip_malformed_counts_and_warns(tmp_path):
    file = tmp_path / "data.jsonl"
    _write(file, GOOD[:3] + [{"question": "q?"}, "\n"] + GOOD[3:])
    task = load_task(f"gsm8k:{file}", skip_malformed=True)
    with pytest.warns(UserWarning, match="line 4"):
        train = task.split_rows("train")
    held = task.split_rows("heldout")
    assert task.skipped == 1
    assert len(train) + len(held) == 10 and len(held) == 2
    assert not {p.question for p in train} & {p.question for p in held}
    lines = [0, 1, 2, 5, 6, 7, 8, 9, 10, 11]  # 0-based; line 3 is malformed, line 4 blank
    assert {p.id for p in train + held} == {f"gsm8k/data/{i}" for i in lines}
    # asking for more than is left says why the split is small
    with pytest.raises(ValueError, match=r"'train' has 8 problems; asked for 9 \(1 malformed row\(s\) were skipped; "
                                         r"a single file is split 80% train / 20% heldout"):
        task.problems("train", 9)
    with pytest.raises(ValueError, match="held-out questions that also appear in train are removed"):
        task.problems("heldout", 3)


def test_gsm8k_gold_without_a_number_is_refused_or_skipped_and_counted(tmp_path):
    """'#### twelve' was accepted as gold, and a completion echoing 'Twelve.' scored 1.0."""
    from gradprobe.tasks.verify import holds_number

    file = tmp_path / "data.jsonl"
    words = {"question": "How many eggs?", "answer": "She has a dozen.\n#### twelve"}
    _write(file, GOOD[:3] + [words] + GOOD[3:] + [{"question": "q?", "answer": "#### 3/4"},
                                                  {"question": "r?", "answer": "#### \\frac{1}{2}"}])
    with pytest.raises(DatasetFormatError, match=r"data.jsonl, line 4: the final answer after '####' \('twelve'\) "
                                                 r"holds no number.*skip_malformed"):
        load_task(f"gsm8k:{file}").problems("train", 2)
    task = load_task(f"gsm8k:{file}", skip_malformed=True)
    with pytest.warns(UserWarning, match="line 4: .*holds no number"):
        rows = task.split_rows("train") + task.split_rows("heldout")
    assert task.skipped == 1 and len(rows) == 12
    assert "gsm8k/data/3" not in {p.id for p in rows}  # the row is masked, not scored
    assert {p.answer for p in rows} >= {"3/4", "\\frac{1}{2}"}  # fractions and LaTeX are numbers
    assert not holds_number("twelve") and not holds_number("  ") and holds_number("1,200") and holds_number("\\sqrt{2}")


def test_gsm8k_malformed_message_names_the_command_line_flag(tmp_path):
    file = tmp_path / "data.jsonl"
    _write(file, GOOD[:2] + ["not json"])
    with pytest.raises(DatasetFormatError, match="--skip-malformed; plans: skip_malformed = true under"):
        load_task(f"gsm8k:{file}").problems("train", 1)


def test_gsm8k_fixture_malformed_rows(gsm8k_dir):
    """tests/data/gsm8k/malformed.jsonl: real rows with five kinds of malformed line among them."""
    file = gsm8k_dir / "malformed.jsonl"
    with pytest.raises(DatasetFormatError, match=r"malformed.jsonl, line 4: .*no final answer after '####'"):
        load_task(f"gsm8k:{file}").problems("train", 1)
    task = load_task(f"gsm8k:{file}", skip_malformed=True)
    with pytest.warns(UserWarning) as caught:
        rows = task.split_rows("train") + task.split_rows("heldout")
    warned = [str(w.message) for w in caught]
    for line, why in ((4, "after '####'"), (5, "no 'answer' key"), (6, "not valid JSON"), (8, "no 'question'"),
                      (11, "after '####'")):
        assert any(f"line {line}: " in m and why in m for m in warned), (line, warned)
    assert task.skipped == 5 and len(rows) == 7
    assert sorted(int(p.id.rsplit("/", 1)[1]) for p in rows) == [0, 1, 2, 8, 9, 11, 12]  # 0-based line indices
    for p in rows:
        assert task.score(p.metadata["solution"], p) == 1.0


def test_gsm8k_folder_heldout_drops_train_questions(tmp_path):
    _write(tmp_path / "train.jsonl", GOOD[:5])
    _write(tmp_path / "test.jsonl", GOOD[3:8])
    task = load_task(f"gsm8k:{tmp_path}")
    assert [p.answer for p in task.split_rows("heldout")] == ["5", "6", "7"]


def test_gsm8k_hub_is_loaded_lazily_through_datasets(monkeypatch):
    import sys
    import types

    calls = []

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return GOOD[:6] if split == "train" else GOOD[4:9]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    task = load_task("gsm8k")
    assert calls == []  # nothing loaded before problems are asked for
    held = task.problems("heldout", 3, seed=0)
    assert ("openai/gsm8k", "main", "test") in calls
    assert sorted(p.answer for p in task.split_rows("heldout")) == ["6", "7", "8"]
    assert {p.id for p in held} <= {"gsm8k/test/2", "gsm8k/test/3", "gsm8k/test/4"}


def test_gsm8k_bad_paths_and_config(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_task(f"gsm8k:{tmp_path / 'nope.jsonl'}")
    with pytest.raises(FileNotFoundError, match="neither"):
        load_task(f"gsm8k:{tmp_path}")
    with pytest.raises(TaskConfigError, match="'seed'"):
        load_task("gsm8k", seed=1)


# -------------------------------------------------------------------- prompts
def _char_tokenizer(chat_template=None, template_has_bos=True):
    """A character-level PreTrainedTokenizerFast whose encode() prepends <s>."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>"]
    chars = sorted(set(string.printable) | set("\u2019\u2212"))
    vocab = {tok: i for i, tok in enumerate(specials + chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", vocab["<s>"])]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>", additional_special_tokens=["<|user|>", "<|assistant|>"],
    )
    if chat_template:
        fast.chat_template = chat_template
    return fast


TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_instruction_asks_for_lines_and_hashes():
    assert "####" in INSTRUCTION and "one reasoning step per line" in INSTRUCTION


def test_format_prompt_with_chat_template():
    tok = _char_tokenizer(TEMPLATE)
    text = format_prompt(tok, "What is 2+3?")
    assert text == f"<s><|user|>What is 2+3?\n\n{INSTRUCTION}\n<|assistant|>"
    ids = encode_prompt(tok, "What is 2+3?")
    assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id
    # the pitfall encode_prompt avoids: default tokenization doubles the BOS
    assert tok.encode(text)[:2] == [tok.bos_token_id] * 2
    assert ids == tok.encode(text, add_special_tokens=False)


def test_encode_prompt_adds_bos_when_template_lacks_it():
    tok = _char_tokenizer(TEMPLATE.replace("{{ bos_token }}", ""))
    text = format_prompt(tok, "Q")
    assert not text.startswith("<s>")
    ids = encode_prompt(tok, "Q")
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    assert ids[1:] == tok.encode(text, add_special_tokens=False)


def test_format_prompt_without_chat_template():
    tok = _char_tokenizer()
    text = format_prompt(tok, "What is 2+3?")
    assert text == f"{INSTRUCTION}\n\nQuestion: What is 2+3?\nAnswer:\n"
    assert format_prompt(None, "What is 2+3?") == text
    ids = encode_prompt(tok, "What is 2+3?")
    assert ids == tok.encode(text)  # one BOS, as the tokenizer itself adds
    assert ids.count(tok.bos_token_id) == 1


def test_encode_prompt_without_bos_token():
    tok = _char_tokenizer(TEMPLATE.replace("{{ bos_token }}", ""))
    tok.bos_token = None
    assert tok.bos_token_id is None
    ids = encode_prompt(tok, "Q")
    assert ids == tok.encode(format_prompt(tok, "Q"), add_special_tokens=False)


def test_a_config_value_of_the_wrong_type_names_the_key_and_the_type():
    from gradprobe.tasks import TaskConfigError, load_task

    with pytest.raises(TaskConfigError, match=r"'min_terms' of task 'chain_sum' must be a whole number .*got 'x'"):
        load_task("chain_sum:min_terms=x")
    with pytest.raises(TaskConfigError, match=r"must be a whole number .*got 2.5; e.g. chain_sum:min_terms=2"):
        load_task("chain_sum", min_terms=2.5)
    assert load_task("chain_sum:min_terms=2,max_terms=3").name == "chain_sum"


@pytest.mark.parametrize("spec, key", [("chain_sum:min_terms=3,min_terms=4", "min_terms"),
                                       ("chain_sum:max_digits=1, max_digits =2", "max_digits")])
def test_a_task_config_key_given_twice_is_refused(spec, key):
    """`--task chain_sum:min_terms=3,min_terms=4` ran on min_terms=4 (the last value) without a word."""
    from gradprobe.tasks import TaskConfigError, load_task

    with pytest.raises(TaskConfigError, match=rf"^task config key '{key}' is given twice \(.*\); give each key once$"):
        load_task(spec)
