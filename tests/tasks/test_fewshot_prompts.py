"""fewshot=K task config: K solved examples before every question as a plain prompt (issue 13)."""

import json
import pickle
from types import SimpleNamespace

import pytest

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.tasks import TaskConfigError, encode_prompt, format_prompt, load_task
from gradprobe.tasks.fewshot import FEWSHOT_SEED, FewShotPrompt, FewShotTask
from gradprobe.tasks.reasoning_gym import ReasoningGymTask

SPEC = "chain_sum:min_terms=2,max_terms=2,max_digits=1"
#: train problem 0 (seed 0) of SPEC is "... arithmetic problem: 3 - 3 ="; the 3 examples are the first
#: 3 train problems drawn with FEWSHOT_SEED, rendered as expression, worked solution, #### answer.
PROMPT_0 = ("5 + 9 =\n5 + 9 = 14\n#### 14\n\n"
            "1 - 9 =\n1 - 9 = -8\n#### -8\n\n"
            "7 + 6 =\n7 + 6 = 13\n#### 13\n\n"
            "3 - 3 =\n")


@pytest.fixture(scope="module")
def base():
    return load_task(SPEC)


@pytest.fixture(scope="module")
def fewshot():
    return load_task(f"{SPEC},fewshot=3")


def test_rendered_prompt_exact_and_plain(fewshot):
    p = fewshot.problems("train", 1)[0]
    assert isinstance(fewshot, FewShotTask) and fewshot.k == 3
    assert p.question == PROMPT_0
    assert p.question.prompt_format == "plain"
    assert p.question.original == "State the final answer to the following arithmetic problem: 3 - 3 ="
    tok = char_tokenizer("chat")  # has a chat template ("User: ..."); a plain prompt bypasses it
    assert format_prompt(tok, p.question) == PROMPT_0
    assert encode_prompt(tok, p.question) == tok.encode(PROMPT_0, add_special_tokens=False)
    assert "User:" not in tok.decode(encode_prompt(tok, p.question))


def test_fewshot_zero_is_no_key(base):
    zero = load_task(f"{SPEC},fewshot=0")
    assert type(zero) is ReasoningGymTask
    assert zero.problems("train", 6, seed=2) == base.problems("train", 6, seed=2)
    assert [p.metadata for p in zero.problems("heldout", 4)] == [p.metadata for p in base.problems("heldout", 4)]
    q = zero.problems("train", 1)[0].question
    assert type(q) is str and q == "State the final answer to the following arithmetic problem: 3 - 3 ="


def test_everything_but_the_question_unchanged(base, fewshot):
    for split, seed in (("train", 0), ("train", 5), ("heldout", 0)):
        a, b = base.problems(split, 8, seed=seed), fewshot.problems(split, 8, seed=seed)
        assert [(p.id, p.answer, p.metadata) for p in a] == [(p.id, p.answer, p.metadata) for p in b]
        assert [p.question for p in a] == [p.question.original for p in b]
        assert all(p.question.endswith("\n\n" + x.question.rsplit(": ", 1)[1] + "\n") for x, p in zip(a, b))
    assert fewshot.name == "chain_sum" and fewshot.numeric_answers and fewshot.config == base.config


def test_same_prefix_and_never_the_asked_question(fewshot):
    # The first 3 problems drawn with FEWSHOT_SEED are exactly the 3 examples: each must get a replacement.
    asked = fewshot.problems("train", 12, seed=FEWSHOT_SEED)
    prefixes = set()
    for p in asked:
        blocks = p.question.split("\n\n")
        examples, question = blocks[:-1], blocks[-1]
        assert len(examples) == 3 and question == p.question.original.rsplit(": ", 1)[1] + "\n"
        assert all(ex.split("\n")[0] != question.strip() for ex in examples)
        prefixes.add("\n\n".join(examples))
    assert "5 + 9 =\n5 + 9 = 14\n#### 14" not in asked[0].question  # asked[0] is "5 + 9 =": its example dropped
    assert asked[0].question.startswith("1 - 9 =\n1 - 9 = -8\n#### -8\n\n7 + 6 =")
    assert len(prefixes) == 4  # the fixed prefix for 9 problems, one replacement each for the first 3
    common = PROMPT_0.rsplit("\n\n", 1)[0]
    assert sum(p.question.startswith(common + "\n\n") for p in asked) == 9


def test_deterministic_and_picklable(fewshot):
    a = fewshot.problems("train", 5, seed=1)
    b = load_task(SPEC, fewshot=3).problems("train", 5, seed=1)
    assert [str(p.question) for p in a] == [str(p.question) for p in b] == [str(p.question) for p in
                                                                            fewshot.problems("train", 5, seed=1)]
    c = pickle.loads(pickle.dumps(a))
    assert c == a and isinstance(c[0].question, FewShotPrompt)
    assert c[0].question.original == a[0].question.original and c[0].question.prompt_format == "plain"
    task2 = pickle.loads(pickle.dumps(fewshot))
    assert [str(p.question) for p in task2.problems("train", 5, seed=1)] == [str(p.question) for p in a]


def test_scores_and_reference_solution_unchanged(base, fewshot):
    from gradprobe.rollout.guided import reference_solution

    for x, p in zip(base.problems("train", 6), fewshot.problems("train", 6)):
        for completion in (f"#### {x.answer}", f"{x.answer} =\n#### {int(x.answer) + 1}", "no answer"):
            assert fewshot.score(completion, p) == base.score(completion, x)
        assert fewshot.score(f"junk\n#### {x.answer}", p) == 1.0
        assert fewshot.format_rate("#### 7") and not fewshot.format_rate("7")
        assert reference_solution(p, "chain_sum", fewshot) == reference_solution(x, "chain_sum", base)


def test_plan_and_cli_paths():
    from gradprobe.training.run import load_run_task

    plan_task = load_run_task(SimpleNamespace(name=SPEC, config={"fewshot": 3}, pool=64))
    assert isinstance(plan_task, FewShotTask) and plan_task.train_size == 64
    assert plan_task.problems("train", 1)[0].question == PROMPT_0
    # --task passes the spec to load_task; a keyword overrides the inline value
    assert load_task(f"{SPEC},fewshot=3", fewshot=1).k == 1
    assert load_task("chain_sum:max_digits=1,fewshot=2").k == 2


@pytest.mark.parametrize("value", [-1, 2.5, "three", True, [3]])
def test_bad_fewshot_value(value):
    with pytest.raises(TaskConfigError, match=r"fewshot must be a non-negative integer.*fewshot=3"):
        load_task(SPEC, fewshot=value)


def test_bad_fewshot_in_spec():
    with pytest.raises(TaskConfigError, match="fewshot must be a non-negative integer"):
        load_task(f"{SPEC},fewshot=-2")


def test_task_without_reference_solutions():
    with pytest.raises(TaskConfigError, match=r"'basic_arithmetic'.*chain_sum, gsm8k, gsm_symbolic, hf, jsonl"):
        load_task("basic_arithmetic:fewshot=2")
    assert type(load_task("basic_arithmetic:fewshot=0")) is ReasoningGymTask


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_with_and_without_solution_column(tmp_path):
    rows = [{"question": f"What is {i} times 3?", "answer": str(3 * i), "solution": f"{i} * 3 = {3 * i}"}
            for i in range(20)]
    file = _jsonl(tmp_path / "d.jsonl", rows)
    task = load_task(f"jsonl:{file}:fewshot=2")
    p = task.problems("heldout", 1)[0]
    blocks = p.question.split("\n\n")
    assert len(blocks) == 3 and blocks[-1] == p.question.original + "\n"
    assert all(b.count("\n") == 2 and b.split("\n")[2].startswith("#### ") for b in blocks[:2])
    q, sol, ans = blocks[0].split("\n")
    i = int(q.split()[2])
    assert (sol, ans) == (f"{i} * 3 = {3 * i}", f"#### {3 * i}")
    assert task.score(f"#### {p.answer}", p) == 1.0
    bare = load_task(f"jsonl:{_jsonl(tmp_path / 'e.jsonl', [{k: r[k] for k in ('question', 'answer')} for r in rows])}"
                     f":fewshot=2")
    with pytest.raises(TaskConfigError, match=r"solution=COLUMN"):
        bare.problems("train", 1)


def test_gsm8k_file(tmp_path):
    rows = [{"question": f"Tom has {i} apples and buys 2. How many?", "answer": f"{i} + 2 = <<{i}+2={i + 2}>>{i + 2}\n"
             f"#### {i + 2}"} for i in range(30)]
    task = load_task(f"gsm8k:{_jsonl(tmp_path / 'g.jsonl', rows)}", fewshot=1)
    p = task.problems("train", 1)[0]
    example, asked = p.question.split("\n\n")
    q, sol, ans = example.split("\n")
    i = int(q.split()[2])
    assert (sol, ans) == (f"{i} + 2 = {i + 2}", f"#### {i + 2}")  # calculator annotations dropped
    assert asked == p.question.original + "\n" and q != p.question.original
