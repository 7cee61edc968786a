"""A study refuses to train its remaining runs on another model than its finished ones: a tester edited the model
folder's config.json between two invocations, and seed 1 trained on the edited model while the study reported two
runs complete (each run's own resume checks only its own record)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from gradprobe.study.folder import StudyError
from gradprobe.study.runner import run_study
from gradprobe.tiers import shipped_root, tier_path

from helpers_rollout import one_thread
from helpers_training import tiny_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def test_a_model_edited_between_invocations_is_refused_while_runs_remain_and_restored_continues(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(shipped_root() / tier_path("tiny").name, model)
    plan_path, out = tmp_path / "plan.toml", tmp_path / "study"
    plan_path.write_text(tiny_plan(model={"name": str(model)}, seeds=[0, 1]))
    assert run_study(plan_path, out, executor="inline", probe=False, analyze=False).ok
    shutil.rmtree(out / "runs" / "grpo" / "seed1")  # seed 1 still to train
    original = (model / "config.json").read_text()
    (model / "config.json").write_text(json.dumps({**json.loads(original), "rms_norm_eps": 0.1}))
    a = hashlib.sha256(original.encode()).hexdigest()[:12]
    b = hashlib.sha256((model / "config.json").read_bytes()).hexdigest()[:12]
    with pytest.raises(StudyError) as e:
        run_study(plan_path, out, executor="inline", probe=False, analyze=False)
    assert str(e.value) == (
        f"{out}: model {str(model)!r} now loads the same weights from {model.resolve()}, but files beside them "
        f"differ from the run's record: config.json (sha256 {a} then, {b} now) (the record of its run grpo seed 0, "
        "config.json model_weights): the study's remaining runs would train another model than its finished ones, "
        "and the analysis would average the two; "
        f"to resume it, restore those files in {model.resolve()} as they were when the run started, or run the plan "
        "as a new study under a new --out; nothing was run or written")
    assert not (out / "runs" / "grpo" / "seed1").exists()
    (model / "config.json").write_text(original)  # the fix
    assert run_study(plan_path, out, executor="inline", probe=False, analyze=False).ok
    assert (out / "runs" / "grpo" / "seed1" / "summary.json").is_file()
