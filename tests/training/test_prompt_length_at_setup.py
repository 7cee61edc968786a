"""Every prompt of a run's training pool and held-out set is checked against the samplers' length rule at setup,
before update 0 (``gradprobe train``), before any run (``gradprobe study``) and before the probe's first rollout:
one over-long row of a JSONL pool used to stop ``gradprobe train`` at the first update that drew it (and leaving
the row out then made the resume refuse the edited file). The refusal names the file line, the tokens, the limit
and the fix; a pool within the limit trains as before."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gradprobe.cli import main
from gradprobe.config import SamplingConfig
from gradprobe.models import load_tokenizer
from gradprobe.probe.config import ProbeConfig
from gradprobe.probe.prompt_lengths import check_probe_prompts
from gradprobe.rollout import HFSampler, PromptTooLongError
from gradprobe.study.preflight import PreflightError, check_plan_inputs
from gradprobe.tasks import encode_prompt, load_task
from gradprobe.tasks.prompts import encode_prompts
from gradprobe.training import run as run_module
from gradprobe.training.loading import load_run_context_limit
from gradprobe.training.plan import ModelSpec, parse_plan
from gradprobe.training.preflight import check_run_prompt_lengths

from helpers_rollout import one_thread
from helpers_training import metric_lines, tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

LIMIT = 1024  # the tiny tier's max_position_embeddings
LONG = "long " * 250 + "What is 1 + 1?"  # about 1,300 characters: the tier's character tokenizer passes 1024


def _rows(n: int, start: int = 0, long_at: int | None = None) -> str:
    """``n`` GSM8K rows (questions ``What is i + i?``), the one at index ``long_at`` over-long."""
    rows = [{"question": LONG if i == long_at else f"What is {i + start} + {i + start}?",
             "answer": f"{i + start} + {i + start} = {2 * (i + start)}\n#### {2 * (i + start)}"} for i in range(n)]
    return "".join(json.dumps(r) + "\n" for r in rows)


def _data(tmp_path, *, train_long: int | None = None, test_long: int | None = None):
    """A ``gsm8k:`` folder of 10 training rows and 4 test rows (every row used by the plan of :func:`_plan`)."""
    folder = tmp_path / "data"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text(_rows(10, long_at=train_long))
    (folder / "test.jsonl").write_text(_rows(4, start=100, long_at=test_long))
    return folder


def _plan(folder, **changes) -> str:
    return tiny_plan(task={"name": f"gsm8k:{folder}", "pool": 10, "config": None}, heldout={"prompts": 4}, **changes)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


@pytest.fixture()
def nothing_sampled(monkeypatch):
    """Fail the test if the run loads its policy or samples (the refusal must come first)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the policy was loaded or sampled: the length check came too late")

    monkeypatch.setattr(run_module, "load_run_policy", refuse)
    monkeypatch.setattr(HFSampler, "sample", refuse)


def _train(plan_text, tmp_path, capsys) -> tuple[int, str]:
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text)
    code = main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(tmp_path / "run"), "--no-progress"])
    return code, capsys.readouterr().err


def test_train_refuses_an_over_long_pool_row_before_update_0_naming_its_line(tmp_path, capsys, tokenizer,
                                                                              nothing_sampled):
    folder = _data(tmp_path, train_long=5)
    n = len(encode_prompt(tokenizer, LONG))
    assert n > LIMIT
    code, err = _train(_plan(folder), tmp_path, capsys)
    assert code == 2
    assert err == (f"gradprobe train: error: prompt gsm8k/train/5 (line 6) of {folder / 'train.jsonl'} of the "
                   f"training pool has {n} tokens; with max_new_tokens=40 that is {n + 40} > the model's "
                   f"max_position_embeddings={LIMIT}. The prompt alone leaves no room for a completion: shorten it "
                   "or leave it out of the prompt pool. It is the only prompt of the training pool's 10 that does "
                   f"not fit; checked before update 0 and before the run folder {str(tmp_path / 'run')!r} was "
                   "written; nothing was.\n")
    assert not (tmp_path / "run").exists()  # no config.json, metrics.jsonl or checkpoint: the fix needs no resume


def test_train_refuses_an_over_long_held_out_row(tmp_path, capsys, tokenizer, nothing_sampled):
    folder = _data(tmp_path, test_long=2)
    n = len(encode_prompt(tokenizer, LONG))
    code, err = _train(_plan(folder), tmp_path, capsys)
    assert code == 2
    assert err.startswith(f"gradprobe train: error: prompt gsm8k/test/2 (line 3) of {folder / 'test.jsonl'} of the "
                          f"held-out set has {n} tokens; with max_new_tokens=40 that is {n + 40} > ")
    assert "It is the only prompt of the held-out set's 4 that does not fit; checked before update 0" in err
    assert not (tmp_path / "run").exists()


def test_a_prompt_that_fits_only_without_its_budget_names_the_budget_fix_and_a_task_without_file_its_index(
        tmp_path, capsys, tokenizer, nothing_sampled):
    task = load_task("chain_sum", train_size=8, min_terms=3, max_terms=4, min_digits=1, max_digits=1)
    pool = task.problems("train", 8, seed=0)
    lengths = [len(encode_prompt(tokenizer, p.question)) for p in pool]
    budget = LIMIT - min(lengths) + 1  # every prompt of the pool is one token or more too long with it
    code, err = _train(tiny_plan(sampling={"max_new_tokens": budget}), tmp_path, capsys)
    assert code == 2
    first, longest = lengths[0], max(lengths)
    assert first < longest  # the bound is the longest prompt's, which the message names: the first's was refused again
    assert err.startswith(f"gradprobe train: error: prompt {pool[0].id} (index 0 of 8) of the training pool has "
                          f"{first} tokens; with max_new_tokens={budget} that is {first + budget} > the model's "
                          f"max_position_embeddings={LIMIT}. Lower max_new_tokens to at most {LIMIT - longest}, the "
                          f"bound for the longest prompt of the training pool ({longest} tokens), or shorten the "
                          "prompts. 8 of the training pool's 8 prompts do not fit; checked before update 0")


def test_the_rule_is_the_samplers_one_at_the_boundary(tmp_path, tokenizer):
    file = tmp_path / "rows.jsonl"  # 10 rows of different lengths, 8 train and 2 held-out
    file.write_text("".join(json.dumps({"question": "What is 2 + 3?" + " and 1" * i, "answer": f"#### {5 + i}"})
                            + "\n" for i in range(10)))
    task = load_task(f"gsm8k:{file}")
    pool = task.problems("train", 6, seed=0)
    heldout = task.problems("heldout", 2, seed=0)
    longest = max(len(ids) for ids in encode_prompts(tokenizer, [p.question for p in pool + heldout]))
    check_run_prompt_lengths(LIMIT - longest, tokenizer, pool, heldout, limit=LIMIT)  # exactly fills it: no error
    with pytest.raises(PromptTooLongError, match=rf"that is {LIMIT + 1} > the model's max_position_embeddings"):
        check_run_prompt_lengths(LIMIT - longest + 1, tokenizer, pool, heldout, limit=LIMIT)
    check_run_prompt_lengths(10**6, tokenizer, pool, heldout, limit=None)  # no known limit: nothing refused


def test_a_pool_within_the_limit_trains_as_before(tmp_path, capsys):
    folder = _data(tmp_path)
    code, err = _train(_plan(folder), tmp_path, capsys)
    assert code == 0, err
    lines = metric_lines(tmp_path / "run")
    assert [line["update"] for line in lines if not line.get("eval")] == [1]


def test_the_study_refuses_once_before_any_run(tmp_path):
    folder = _data(tmp_path, train_long=7)
    with pytest.raises(PreflightError) as info:
        check_plan_inputs(parse_plan(_plan(folder)), executor="inline")
    message = str(info.value)
    assert message.startswith(f"[task] name = 'gsm8k:{folder}': prompt gsm8k/train/7 (line 8) of "
                              f"{folder / 'train.jsonl'} of the training pool has ")
    assert message.endswith("It is the only prompt of the training pool's 10 that does not fit. (checked before the "
                            "study folder was written; nothing was)")


def test_the_context_limit_is_read_from_the_config_without_the_weights():
    assert load_run_context_limit(ModelSpec(name="tiny")) == LIMIT
    assert load_run_context_limit(ModelSpec(name="tiny-qwen2")) == LIMIT
    assert load_run_context_limit(ModelSpec(name="/no/such/model")) is None  # the model's own load reports it


def test_the_probe_checks_its_batch_and_held_out_prompts_with_the_samplers_limit(tmp_path, tokenizer):
    folder = _data(tmp_path, test_long=0)
    task = load_task(f"gsm8k:{folder}")
    config = ProbeConfig.from_dict(dict(model="tiny", task=f"gsm8k:{folder}", rewards=("outcome",), prompts=4,
                                        group=2, heldout_prompts=4, sampling=SamplingConfig(max_new_tokens=8),
                                        progress=False))
    policy = SimpleNamespace(tokenizer=tokenizer, model=SimpleNamespace(config=SimpleNamespace(
        max_position_embeddings=LIMIT)))
    with pytest.raises(PromptTooLongError, match=r"^prompt gsm8k/test/0 \(line 1\) of .*test.jsonl of the held-out "
                                                 r"set has \d+ tokens; .* checked before the probe's first rollout"):
        check_probe_prompts(config, policy, task, None)  # a sampler without context_limit: the model's limit

    class Small:
        def context_limit(self):
            return 20, "the engine's limit"

    with pytest.raises(PromptTooLongError, match=r"of the probe batch has \d+ tokens; with max_new_tokens=8 that "
                                                 r"is \d+ > the engine's limit=20\."):
        check_probe_prompts(config, policy, load_task(f"gsm8k:{_data(tmp_path / 'b')}"), Small())


def test_encode_prompts_gives_encode_prompts_ids(tokenizer):
    questions = ["What is 2 + 3?", LONG, "A train leaves at 3pm.\nHow far?"]
    assert encode_prompts(tokenizer, questions) == [encode_prompt(tokenizer, q) for q in questions]
    assert tokenizer.is_fast

    class Slow:  # a tokenizer without the batched call: asked per prompt
        bos_token_id, chat_template, is_fast = 1, None, False

        def encode(self, text, add_special_tokens=True):
            return ([1] if add_special_tokens else []) + [ord(c) % 50 + 3 for c in text]

    slow = Slow()
    assert encode_prompts(slow, questions) == [encode_prompt(slow, q) for q in questions]
    assert encode_prompts(slow, []) == []
