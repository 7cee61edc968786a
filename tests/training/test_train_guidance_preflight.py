"""``gradprobe train`` refuses an unusable guided arm before it writes or computes anything, with the same
check as ``gradprobe study`` (:mod:`gradprobe.training.preflight`): a pool problem without a reference
solution, or a prompt format that drops the hint. The refusal names the arm's guidance once."""

from __future__ import annotations

import json

import pytest

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.cli import main
from gradprobe.models import load_tokenizer
from gradprobe.rollout.guidance import GuidanceError, hinted_question
from gradprobe.tasks import encode_prompt, load_task
from gradprobe.training import preflight as train_preflight
from gradprobe.training import run as run_module
from gradprobe.training.loading import load_run_policy, load_run_tokenizer
from gradprobe.training.plan import ModelSpec, parse_plan
from gradprobe.training.preflight import GuidancePreflightError, check_run_guidance

from helpers_rollout import one_thread
from helpers_templates import hint_dropping_tokenizer  # renders the first paragraph only: drops a hint
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

def _plan(task, model="tiny-qwen2", **guidance):
    """TOML text of a plan on ``task`` and ``model`` (no ``[task.config]``) with arms ``grpo`` and ``guided``
    (``guidance = {fraction = 0.5, prefix = 1.0}``, changed by ``guidance``'s keys)."""
    return tiny_plan(model={"name": model}, task={"name": task, "config": None},
                     arms={"grpo": {"reward": "outcome"},
                           "guided": {"reward": "outcome", "guidance": {"fraction": 0.5, "prefix": 1.0, **guidance}}})


def _no_solutions(tmp_path):
    """A ``jsonl:`` task file of 20 questions with answers and no solution column."""
    file = tmp_path / "data" / "plain.jsonl"
    file.parent.mkdir()
    file.write_text("".join(json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(20)))
    return f"jsonl:{file}"


def _plan_file(tmp_path, task, model="tiny-qwen2"):
    path = tmp_path / "plan.toml"
    path.write_text(_plan(task, model))
    return path


def _train(plan, out, arm="guided"):
    return main(["train", "--plan", str(plan), "--arm", arm, "--out", str(out), "--no-progress"])


@pytest.fixture()
def no_model(monkeypatch):
    """Fail the test if the run loads its policy (the refusal must come before any compute)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the policy was loaded: the guidance check came too late")

    monkeypatch.setattr(run_module, "load_run_policy", refuse)


def test_train_refuses_a_task_without_reference_solutions_before_the_run_folder(tmp_path, capsys, no_model):
    plan = _plan_file(tmp_path, _no_solutions(tmp_path))
    out = tmp_path / "runs" / "guided"
    assert _train(plan, out) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradprobe train: error: [arms.guided] guidance: problem jsonl/plain/")
    assert "has no reference solution (metadata['solution'])" in err and "solution=COLUMN" in err
    assert "checked before the run folder" in err and err.count("guidance:") == 1
    assert not out.exists() and not out.parent.exists()  # nothing written, not even the parent folder


def test_the_api_refuses_the_same_run_and_an_unguided_arm_is_not_checked(tmp_path, no_model):
    plan = parse_plan(_plan(_no_solutions(tmp_path), "tiny-qwen2"))
    out = tmp_path / "api"
    with pytest.raises(GuidancePreflightError) as info:
        run_module.run_training(plan.arm("guided"), out)
    assert isinstance(info.value, GuidanceError) and isinstance(info.value, ValueError)
    assert info.value.key == "[arms.guided] guidance" and "has no reference solution" in info.value.reason
    assert not out.exists()
    # the plain arm of the same plan passes the pre-flight (and reaches the policy loader, patched to fail)
    with pytest.raises(AssertionError, match="the policy was loaded"):
        run_module.run_training(plan.arm("grpo"), out)


def test_train_refuses_a_model_whose_prompt_format_drops_the_hint(tmp_path, capsys, monkeypatch, no_model):
    tok = hint_dropping_tokenizer()
    task = load_task("chain_sum", train_size=8)
    p = task.problems("train", 1)[0]
    assert encode_prompt(tok, hinted_question(p.question, "1 + 2 = 3")) == encode_prompt(tok, p.question)
    monkeypatch.setattr(run_module, "load_run_tokenizer", lambda spec: tok)
    plan = _plan_file(tmp_path, "chain_sum", model="tiny")
    out = tmp_path / "guided"
    assert _train(plan, out) == 2
    err = capsys.readouterr().err
    assert "error: [arms.guided] guidance: the model's prompt format drops the hint (problem chain_sum" in err
    assert "remove guidance from the arm" in err and err.count("guidance:") == 1  # one prefix, not two
    assert not out.exists()


def test_a_template_that_keeps_the_hint_passes_and_prefix_0_is_not_checked(tmp_path):
    task = load_task("chain_sum", train_size=8)
    pool = task.problems("train", 8)
    plan = parse_plan(_plan("chain_sum", "tiny-qwen2"))
    check_run_guidance([plan.arm("guided"), plan.arm("grpo")], task, char_tokenizer("chat"), pool)
    with pytest.raises(GuidancePreflightError, match=r"^\[arms.guided\] guidance: the model's prompt format drops"):
        check_run_guidance([plan.arm("guided")], task, hint_dropping_tokenizer(), pool)
    empty = parse_plan(_plan("chain_sum", prefix=0.0))
    check_run_guidance([empty.arm("guided")], task, hint_dropping_tokenizer(), pool)  # empty hints: no hint to drop
    none = parse_plan(_plan("chain_sum", fraction=0.1))
    check_run_guidance([none.arm("guided")], task, hint_dropping_tokenizer(), pool)  # 0.1 x G=4 -> 0 guided rows


def test_the_study_preflight_uses_the_same_check_with_one_prefix(tmp_path, monkeypatch):
    from gradprobe.study import preflight

    plan = parse_plan(_plan("chain_sum", "tiny-qwen2"))
    monkeypatch.setattr(preflight, "_resolve_model", lambda spec, offline: ("tiny-qwen2", hint_dropping_tokenizer()))
    with pytest.raises(preflight.PreflightError) as info:
        preflight.check_plan_inputs(plan)
    msg = str(info.value)
    assert msg.startswith("[arms.guided] guidance: the model's prompt format drops the hint")
    assert msg.count("guidance:") == 1 and msg.endswith("(checked before the study folder was written; nothing was)")
    calls = []
    monkeypatch.setattr(train_preflight, "check_run_guidance", lambda runs, *a: calls.append([r.arm for r in runs]))
    monkeypatch.setattr(preflight, "_resolve_model", lambda spec, offline: ("tiny-qwen2", char_tokenizer("chat")))
    preflight.check_plan_inputs(plan)
    assert calls == [["guided"]]  # the study calls the shared check, with its guided arms only
    nosol = parse_plan(_plan(_no_solutions(tmp_path), "tiny-qwen2"))
    monkeypatch.undo()
    with pytest.raises(preflight.PreflightError, match=r"^\[arms.guided\] guidance: problem jsonl/plain/\d+ of task "
                                                       r"'jsonl' has no reference solution"):
        preflight.check_plan_inputs(nosol)


def test_the_tokenizer_alone_is_the_policy_s_tokenizer():
    spec = ModelSpec(name="tiny")  # the tier's saved tokenizer.json (tiny-qwen2 is char_tokenizer() on both sides)
    alone, policy = load_run_tokenizer(spec), load_run_policy(spec)
    assert type(alone) is type(policy.tokenizer)
    assert alone.chat_template == policy.tokenizer.chat_template == load_tokenizer("tiny").chat_template
    question = load_task("chain_sum", train_size=2).problems("train", 1)[0].question
    assert encode_prompt(alone, question) == encode_prompt(policy.tokenizer, question)


def test_the_tiny_tier_s_own_tokenizer_is_checked_and_passes(tmp_path, no_model):
    # no monkeypatch: the tier's saved tokenizer (its compact template keeps a hint paragraph) is loaded alone,
    # the check passes, and the run goes on to load its policy (patched here to stop it)
    plan = parse_plan(_plan("chain_sum", "tiny"))
    out = tmp_path / "tiny"
    with pytest.raises(AssertionError, match="the policy was loaded"):
        run_module.run_training(plan.arm("guided"), out)
