"""A guided arm's hinted prompts (the question plus the first lines of its reference solution: what its guided
rollouts are sampled from) are checked against the samplers' length rule before anything runs, as the plain prompts
are: a problem whose plain prompt fits but whose hinted one does not stopped the run at the first update that drew
it for a guided completion. The refusal names the data line, the arm's guidance, the tokens, the limit and the fixes;
arms without guidance cost no second encoding of the pool."""

from __future__ import annotations

import json

import pytest

from gradprobe.rollout import PromptTooLongError
from gradprobe.rollout import prompt_lengths as shared_rule
from gradprobe.rollout.guidance import hinted_question
from gradprobe.study.preflight import PreflightError, check_plan_inputs
from gradprobe.tasks import encode_prompt, load_task
from gradprobe.training.loading import load_run_tokenizer
from gradprobe.training.plan import parse_plan
from gradprobe.training.preflight import check_run_prompt_lengths

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

LIMIT = 1024  # tiny-qwen2's max_position_embeddings (load_run_context_limit)
LONG_STEPS = [f"{i} + 1 = {i + 1}" for i in range(63)]  # a hinted prompt of 1,011 tokens: it fits, not with 40


def _rows(n: int, start: int = 0, long_at: int | None = None) -> str:
    """``n`` GSM8K rows (``What is i + i?``, a one-line solution), the one at ``long_at`` with a 63-line solution."""
    rows = []
    for i in range(start, start + n):
        steps = LONG_STEPS if i - start == long_at else [f"{i} + {i} = {2 * i}"]
        rows.append({"question": f"What is {i} + {i}?", "answer": "\n".join(steps) + f"\n#### {2 * i}"})
    return "".join(json.dumps(r) + "\n" for r in rows)


def _data(tmp_path, long_at: int | None = 4):
    folder = tmp_path / "data"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text(_rows(10, long_at=long_at))
    (folder / "test.jsonl").write_text(_rows(4, start=100))
    return folder


def _plan(folder, arms: dict) -> str:
    return tiny_plan(model={"name": "tiny-qwen2"}, task={"name": f"gsm8k:{folder}", "pool": 10, "config": None},
                     heldout={"prompts": 4}, arms=arms)


GUIDED = {"grpo": {"reward": "outcome"},
          "guided": {"reward": "outcome", "guidance": {"fraction": 0.5, "prefix": 1.0}}}


def _lengths(folder, row: int) -> tuple[int, int]:
    """(plain, hinted) prompt tokens of training row ``row`` (prefix 1.0: every solution line is the hint)."""
    tokenizer = load_run_tokenizer(parse_plan(_plan(folder, GUIDED)).model)
    question = f"What is {row} + {row}?"
    return (len(encode_prompt(tokenizer, question)),
            len(encode_prompt(tokenizer, hinted_question(question, "\n".join(LONG_STEPS)))))


def test_the_study_refuses_an_over_long_hinted_prompt_naming_its_line_and_arm(tmp_path):
    folder = _data(tmp_path)
    plain, hinted = _lengths(folder, 4)
    assert plain + 40 <= LIMIT < hinted + 40  # the plain prompt fits: only its hint makes it too long
    with pytest.raises(PreflightError) as info:
        check_plan_inputs(parse_plan(_plan(folder, GUIDED)), executor="inline")
    assert str(info.value) == (
        f"[task] name = 'gsm8k:{folder}': prompt gsm8k/train/4 (line 5) of {folder / 'train.jsonl'} of the training "
        f"pool, with its hint from [arms.guided] guidance (prefix 1), has {hinted} tokens; with max_new_tokens=40 "
        f"that is {hinted + 40} > the model's max_position_embeddings={LIMIT}. Lower max_new_tokens to at most "
        f"{LIMIT - hinted} or shorten the prompt. It is the only hinted prompt of the training pool's 10 that does "
        "not fit; a smaller prefix in [arms.guided] guidance (prefix 1) gives shorter hints. (checked before the "
        "study folder was written; nothing was)")


def test_only_guided_arms_encode_the_pool_again_and_alike_arms_once(tmp_path, monkeypatch):
    folder = _data(tmp_path, long_at=None)  # every prompt fits, hinted or not
    calls = []
    encode = shared_rule.encode_prompts
    monkeypatch.setattr(shared_rule, "encode_prompts", lambda tok, qs: calls.append(len(qs)) or encode(tok, qs))
    check_plan_inputs(parse_plan(_plan(folder, {"grpo": {"reward": "outcome"}, "loo": {"reward": "outcome_loo"}})),
                      executor="inline")
    assert calls == [10, 4]  # the pool and the held-out set: no guided arm, no second encoding
    calls.clear()
    twin = {**GUIDED, "guided2": {"reward": "outcome_loo", "guidance": {"fraction": 0.25, "prefix": 1.0}}}
    check_plan_inputs(parse_plan(_plan(folder, twin)), executor="inline")
    assert calls == [10, 4, 10]  # one more for both guided arms: their hints are alike (prefix 1)


def test_the_train_check_reads_the_guided_runs_only(tmp_path):
    folder = _data(tmp_path)
    task = load_task(f"gsm8k:{folder}")
    pool, heldout = task.problems("train", 10, seed=0), task.problems("heldout", 4, seed=0)
    plan = parse_plan(_plan(folder, {**GUIDED, "twin": {"reward": "outcome_loo",
                                                        "guidance": {"fraction": 0.5, "prefix": 1.0}},
                                     "none": {"reward": "outcome", "guidance": {"fraction": 0.1, "prefix": 1.0}},
                                     "empty": {"reward": "outcome", "guidance": {"fraction": 0.5, "prefix": 0.0}}}))
    tokenizer = load_run_tokenizer(plan.model)
    _, hinted = _lengths(folder, 4)
    check = dict(limit=LIMIT, task=task)
    check_run_prompt_lengths(40, tokenizer, pool, heldout, **check)  # no runs: plain prompts only, which fit
    check_run_prompt_lengths(40, tokenizer, pool, heldout, runs=[plan.arm("grpo")], **check)
    check_run_prompt_lengths(40, tokenizer, pool, heldout, runs=[plan.arm("none")], **check)  # 0.1 x G=4: no hint
    check_run_prompt_lengths(40, tokenizer, pool, heldout, runs=[plan.arm("empty")], **check)  # prefix 0: empty
    check_run_prompt_lengths(40, tokenizer, pool, heldout, runs=[plan.arm("guided")], limit=None, task=task)
    with pytest.raises(PromptTooLongError) as info:
        check_run_prompt_lengths(40, tokenizer, pool, heldout, runs=[plan.arm(a) for a in plan.arms], **check)
    assert str(info.value).startswith(
        f"prompt gsm8k/train/4 (line 5) of {folder / 'train.jsonl'} of the training pool, with its hint from "
        f"[arms.guided] guidance and [arms.twin] guidance (prefix 1), has {hinted} tokens; ")
    budget = LIMIT - hinted + 1  # one token too many for the hinted prompt only
    with pytest.raises(PromptTooLongError, match=rf"that is {LIMIT + 1} > the model's max_position_embeddings="
                                                 rf"{LIMIT}\. Lower max_new_tokens to at most {LIMIT - hinted} or "
                                                 r"shorten the prompt\. It is the only hinted prompt of the training "
                                                 r"pool's 10 that does not fit; a smaller prefix in \[arms\.guided\] "
                                                 r"guidance \(prefix 1\) gives shorter hints; checked before X\.$"):
        check_run_prompt_lengths(budget, tokenizer, pool, heldout, runs=[plan.arm("guided")], when="checked before X",
                                 **check)
    check_run_prompt_lengths(budget - 1, tokenizer, pool, heldout, runs=[plan.arm("guided")], **check)  # fills it


def test_train_refuses_an_over_long_hinted_prompt_before_the_policy_and_the_run_folder(tmp_path, capsys,
                                                                                      monkeypatch):
    from gradprobe.cli import main
    from gradprobe.training import run as run_module

    def refuse(*args, **kwargs):
        raise AssertionError("the policy was loaded: the hinted length check came too late")

    monkeypatch.setattr(run_module, "load_run_policy", refuse)
    folder = _data(tmp_path)
    _, hinted = _lengths(folder, 4)
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan(folder, GUIDED))
    code = main(["train", "--plan", str(plan), "--arm", "guided", "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(
        f"gradprobe train: error: prompt gsm8k/train/4 (line 5) of {folder / 'train.jsonl'} of the training pool, "
        f"with its hint from [arms.guided] guidance (prefix 1), has {hinted} tokens; ")
    assert err.endswith(f"before the run folder {str(tmp_path / 'run')!r} was written; nothing was.\n")
    assert not (tmp_path / "run").exists()


def test_a_guided_probe_checks_its_batchs_hinted_prompts_before_any_rollout(tmp_path):
    from types import SimpleNamespace

    from gradprobe.config import SamplingConfig
    from gradprobe.probe.config import ProbeConfig
    from gradprobe.probe.prompt_lengths import check_probe_prompts

    folder = _data(tmp_path)
    _, hinted = _lengths(folder, 4)
    tokenizer = load_run_tokenizer(parse_plan(_plan(folder, GUIDED)).model)
    policy = SimpleNamespace(tokenizer=tokenizer, model=SimpleNamespace(config=SimpleNamespace(
        max_position_embeddings=LIMIT)))
    task = load_task(f"gsm8k:{folder}")

    def config(guidance):
        return ProbeConfig.from_dict(dict(model="tiny-qwen2", task=f"gsm8k:{folder}", rewards=("outcome",),
                                          prompts=10, group=2, heldout_prompts=4, progress=False, guidance=guidance,
                                          sampling=SamplingConfig(max_new_tokens=40)))

    check_probe_prompts(config(None), policy, task, None)  # the plain prompts fit
    check_probe_prompts(config({"fraction": 0.5, "prefix": 0.0}), policy, task, None)  # empty hints: the plain ones
    check_probe_prompts(config({"fraction": 0.2, "prefix": 1.0}), policy, task, None)  # no guided completion (G=2)
    with pytest.raises(PromptTooLongError) as info:
        check_probe_prompts(config({"fraction": 0.5, "prefix": 1.0}), policy, task, None)
    assert str(info.value) == (
        f"prompt gsm8k/train/4 (line 5) of {folder / 'train.jsonl'} of the probe batch, with its hint from "
        f"--guidance (prefix 1), has {hinted} tokens; with max_new_tokens=40 that is {hinted + 40} > the model's "
        f"max_position_embeddings={LIMIT}. Lower max_new_tokens to at most {LIMIT - hinted} or shorten the prompt. "
        "It is the only hinted prompt of the probe batch's 10 that does not fit; a smaller prefix in --guidance "
        "(prefix 1) gives shorter hints; checked before the probe's first rollout; nothing was sampled.")
