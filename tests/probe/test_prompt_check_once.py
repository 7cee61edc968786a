"""``run_probe(prompt_check=...)``: a caller that probes the same prompts again (the TRL callback, every
``probe_every`` steps) had every batch and held-out prompt encoded again at each call by the prompt-length check.
Given the same :class:`~gradprobe.probe.run.PromptCheck`, a call skips the check when the task and tokenizer are the
ones it passed on and the settings it reads are the same, and checks again when one changed; a check that refuses
is not recorded, and without the holder every call checks.
"""

from __future__ import annotations

import pytest

import gradprobe.probe.run as probe_run
from gradprobe.models import load_policy
from gradprobe.probe.run import DEFAULT_TASK, ProbeConfig, run_probe
from gradprobe.rollout import PromptTooLongError
from gradprobe.tasks import load_task

SETTINGS = dict(model="tiny", task=DEFAULT_TASK, rewards=["outcome"], prompts=2, group=2, heldout_prompts=3,
                heldout_group=2, max_new_tokens=8, progress=False)


class _Stopped(Exception):
    """Raised in place of the rollouts: the check is all these tests run."""


@pytest.fixture(scope="module")
def policy():
    return load_policy("tiny", seed=0)


@pytest.fixture
def checks(monkeypatch):
    """The (config, task) of every prompt-length check made; the probe stopped at its rollouts."""
    made, check = [], probe_run.check_probe_prompts

    def counted(config, policy, task, sampler):
        made.append((config, task))
        check(config, policy, task, sampler)

    def stop(*args, **kwargs):
        raise _Stopped

    monkeypatch.setattr(probe_run, "check_probe_prompts", counted)
    monkeypatch.setattr(probe_run, "sample_batch", stop)
    return made


def _probe(config, policy, task, **kwargs) -> None:
    with pytest.raises(_Stopped):
        run_probe(config, policy=policy, task=task, **kwargs)


def test_the_same_prompts_are_checked_once_and_again_when_what_the_check_reads_changed(policy, checks):
    config, task = ProbeConfig.from_dict(SETTINGS), load_task(DEFAULT_TASK)
    held = probe_run.PromptCheck()
    for lr in (1e-5, 2e-5, 3e-5):  # the learning rate, which the callback's probes change, is not read by it
        _probe(config.with_settings(lr=lr), policy, task, prompt_check=held)
    assert len(checks) == 1 and held.passed[0] is task and held.passed[1] is policy.tokenizer
    for changed in ({"max_new_tokens": 9}, {"prompts": 3}, {"seed": 1}, {"heldout_prompts": 4}, {"group": 4},
                    {"guidance": {"fraction": 0.5, "prefix": 1.0}}):
        _probe(ProbeConfig.from_dict({**SETTINGS, **changed}), policy, task, prompt_check=held)
    assert len(checks) == 7
    other = load_task(DEFAULT_TASK)  # another task object
    _probe(config, policy, other, prompt_check=held)
    _probe(config, policy, other, prompt_check=held)
    assert len(checks) == 8 and checks[-1] == (config, other)
    _probe(config, policy, task)  # without the holder: checked every time
    _probe(config, policy, task)
    assert len(checks) == 10


def test_a_refused_check_is_not_recorded_and_refuses_again(policy, checks):
    config, task = ProbeConfig.from_dict(SETTINGS), load_task(DEFAULT_TASK)
    held = probe_run.PromptCheck()
    _probe(config, policy, task, prompt_check=held)
    passed = held.passed
    too_long = ProbeConfig.from_dict({**SETTINGS, "max_new_tokens": 1024})  # the tiny model's whole context
    for _ in range(2):
        with pytest.raises(PromptTooLongError, match="checked before the probe's first rollout"):
            run_probe(too_long, policy=policy, task=task, prompt_check=held)
    assert len(checks) == 3 and held.passed == passed
    _probe(config, policy, task, prompt_check=held)
    assert len(checks) == 3
