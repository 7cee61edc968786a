"""``gradprobe study`` checks every prompt's length once, in its preflight (:func:`gradprobe.study.preflight.
check_plan_inputs`), and its runs do not check the same prompts again (``run_training``'s
``prompt_lengths_checked``): each run used to build its pool and held-out set again, load the tokenizer and the
model's config and encode every prompt. A study whose preflight did not run (``check=False``), a Ray run (another
machine's files), or a task naming another plan than the worker reads keeps the run's own check."""

from __future__ import annotations

import pytest

from gradprobe.study import worker
from gradprobe.study.runner import run_study
from gradprobe.training import preflight as train_preflight
from gradprobe.training import run as run_module
from gradprobe.training.plan import load_plan

from helpers_rollout import one_thread
from study_helpers import toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

TOY = toy_plan("lengths_once", seeds=(0, 1), generated_tokens=200, checkpoint_every=None)


@pytest.fixture()
def checks(monkeypatch) -> dict:
    """Who checked the prompt lengths, and of how many prompts: ``{"study": [...], "run": [...]}``, one
    ``(pool size, held-out size)`` per call (the check still runs)."""
    seen = {"study": [], "run": []}

    def counted(who, check):
        def call(max_new_tokens, tokenizer, pool, heldout, **kwargs):
            seen[who].append((len(pool), len(heldout)))
            return check(max_new_tokens, tokenizer, pool, heldout, **kwargs)
        return call

    check = train_preflight.check_run_prompt_lengths
    monkeypatch.setattr(train_preflight, "check_run_prompt_lengths", counted("study", check))  # read by the study
    monkeypatch.setattr(run_module, "check_run_prompt_lengths", counted("run", check))  # run_training's own
    return seen


def test_a_study_checks_the_prompt_lengths_once_and_without_its_preflight_each_run_checks(tmp_path, checks):
    plan = write_plan(tmp_path, TOY)
    result = run_study(plan, tmp_path / "checked", executor="inline", probe=False, analyze=False)
    assert sorted(result.done) == [("grpo", 0), ("grpo", 1)] and not result.failed
    assert checks == {"study": [(16, 4)], "run": []}  # the pool of 16 and the 4 held-out prompts, once
    checks["study"].clear()
    result = run_study(plan, tmp_path / "unchecked", executor="inline", probe=False, analyze=False, check=False)
    assert sorted(result.done) == [("grpo", 0), ("grpo", 1)] and not result.failed
    assert checks == {"study": [], "run": [(16, 4), (16, 4)]}  # no preflight: each run checks its own prompts


def test_only_a_study_that_checked_on_this_machine_tells_its_runs():
    from gradprobe.study.orchestrator import _lengths_checked
    from gradprobe.training.plan import parse_plan

    plan = parse_plan(TOY)
    assert _lengths_checked(plan, True, "local") == plan.sha256 == _lengths_checked(plan, True, "inline")
    assert _lengths_checked(plan, True, "ray") is None  # a Ray task may read another machine's data and model
    assert _lengths_checked(plan, False, "local") is None


def test_a_task_naming_another_plan_leaves_the_check_to_the_run(tmp_path, checks):
    plan = write_plan(tmp_path, TOY)
    sha = load_plan(plan).sha256
    statuses = []
    for name, checked in [("same", sha), ("other", "0" * 64), ("absent", None)]:
        out = tmp_path / name / "runs" / "grpo" / "seed0"  # STUDY/runs/ARM/seedN: the run's tb folder is STUDY/tb
        task = {"kind": "train", "plan": str(plan), "arm": "grpo", "seed": 0, "out": str(out), "log": False}
        if checked is not None:
            task["prompt_lengths_checked"] = checked
        statuses.append(worker.execute_task(task)["status"])
    assert statuses == ["done", "done", "done"]
    assert checks == {"study": [], "run": [(16, 4), (16, 4)]}  # the plan of that sha256: not checked again
