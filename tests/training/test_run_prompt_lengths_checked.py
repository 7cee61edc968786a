"""``run_training(..., prompt_lengths_checked=True)``: the caller (a study's preflight) checked every prompt of the
run's pool and held-out set, so the run does not check them again, nor load the tokenizer and model config for that
check alone; without it (``gradprobe train``, the API) a too-long prompt is still refused before the run folder is
written, and a guided arm's guidance is checked either way."""

from __future__ import annotations

import json

import pytest

from gradprobe.rollout import PromptTooLongError
from gradprobe.training import run as run_module
from gradprobe.training.plan import parse_plan
from gradprobe.training.preflight import GuidancePreflightError

from helpers_training import tiny_plan

LONG = "long " * 250 + "What is 1 + 1?"  # about 1,300 characters: past the tiny tier's context of 1024


class PolicyLoad(Exception):
    """Raised in place of loading the policy: the run got past every check made before its folder."""


def _gsm8k(tmp_path) -> str:
    """A ``gsm8k:`` folder of 8 training rows and 4 other test rows (the test row 2 over-long)."""
    folder = tmp_path / "data"
    folder.mkdir()
    for name, start, n, long_at in [("train", 0, 8, None), ("test", 100, 4, 2)]:
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(
            {"question": LONG if i == long_at else f"What is {start + i} + {start + i}?",
             "answer": f"#### {2 * (start + i)}"}) + "\n" for i in range(n)))
    return f"gsm8k:{folder}"


def _refused(what: str):
    def call(*args, **kwargs):
        raise AssertionError(f"{what} was called: the prompt lengths were checked again")
    return call


@pytest.fixture()
def no_policy(monkeypatch):
    def load(*args, **kwargs):
        raise PolicyLoad

    monkeypatch.setattr(run_module, "load_run_policy", load)


def test_run_training_checks_the_prompt_lengths_unless_told_they_were_checked(tmp_path, monkeypatch, no_policy):
    run = parse_plan(tiny_plan(task={"name": _gsm8k(tmp_path), "pool": 8, "config": None},
                               heldout={"prompts": 4})).arm("grpo")
    out = tmp_path / "run"
    with pytest.raises(PromptTooLongError) as info:
        run_module.run_training(run, out)
    assert str(info.value).startswith(f"prompt gsm8k/test/2 (line 3) of {tmp_path / 'data' / 'test.jsonl'} of the "
                                      "held-out set has ")
    assert str(info.value).endswith(f"checked before update 0 and before the run folder {str(out)!r} was written; "
                                    "nothing was.")
    assert not out.exists()
    for name in ("check_run_prompt_lengths", "load_run_tokenizer", "load_run_context_limit"):
        monkeypatch.setattr(run_module, name, _refused(name))
    with pytest.raises(PolicyLoad):  # past the preflight: the caller's check stands for the run's
        run_module.run_training(run, out, prompt_lengths_checked=True)


def test_a_guided_run_told_the_lengths_were_checked_still_checks_its_guidance(tmp_path, monkeypatch, no_policy):
    file = tmp_path / "plain.jsonl"  # no solution column: a guided arm has no hint to give
    file.write_text("".join(json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(20)))
    plan = parse_plan(tiny_plan(model={"name": "tiny-qwen2"}, task={"name": f"jsonl:{file}", "config": None},
                                arms={"guided": {"reward": "outcome", "guidance": {"fraction": 0.5, "prefix": 1.0}}}))
    monkeypatch.setattr(run_module, "check_run_prompt_lengths", _refused("check_run_prompt_lengths"))
    out = tmp_path / "run"
    with pytest.raises(GuidancePreflightError, match=r"^\[arms\.guided\] guidance: problem jsonl/plain/.* has no "
                                                     r"reference solution"):
        run_module.run_training(plan.arm("guided"), out, prompt_lengths_checked=True)
    assert not out.exists()
