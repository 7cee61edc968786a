"""Hints that named the wrong thing first:

* a study started or continued from another directory with a relative ``[model] name = "models/m"`` (of the form
  of a hub id) was told to download it from the hub (``hf download models/m``), though the folder sat beside the
  plan, or where the study's runs had found it; that is now said first: run from DIR, or give the absolute path;
* ``gradprobe.train(..., arn="grpo")`` suggested ``run=`` (difflib's ratio ties ``run`` and ``arm`` at 0.67 and the
  first accepted one won); the fewest edits now decide (``arm=``: one), and a tie names every tied keyword.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import gradprobe
from gradprobe.study.preflight import PreflightError, check_plan_inputs
from gradprobe.study.runner import run_study
from gradprobe.tiers import tier_path
from gradprobe.training.plan import load_plan

from helpers_training import tiny_plan

HUB = ("read as given: 'models/m' is neither a local folder nor a model in the local Hugging Face cache (OSError), "
       "and the study's runs load models offline (HF_HUB_OFFLINE); download it first (`hf download models/m`), give a "
       "local folder, or set HF_HUB_OFFLINE=0 to let the runs download it (checked before the study folder was "
       "written; nothing was)")


@pytest.fixture
def project(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A plan ``proj/plan.toml`` on ``models/m`` (a copy of the tiny tier beside it), and the working directory
    ``elsewhere``, from which ``models/m`` names nothing; (the plan, the project directory)."""
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub id reading stays local, whatever the network
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    shutil.copytree(tier_path("tiny"), proj / "models" / "m")
    elsewhere.mkdir()
    plan = proj / "plan.toml"
    plan.write_text(tiny_plan(model={"name": "models/m"}))
    monkeypatch.chdir(elsewhere)
    return plan, proj


def test_a_relative_model_beside_the_plan_is_named_before_the_hub_download(project, tmp_path, monkeypatch):
    plan, proj = project
    out = tmp_path / "study"
    with pytest.raises(PreflightError) as e:
        run_study(plan, out, executor="inline", probe=False, analyze=False)
    folder = (proj / "models" / "m").resolve()
    assert str(e.value) == (
        f"[model] name = 'models/m': 'models/m' is a relative path, read from the working directory ({os.getcwd()}), "
        f"where it names nothing; from the plan's directory it names {folder}: run the command from "
        f"{proj.resolve()}, or give [model] name = '{folder}' (the absolute path); {HUB}")
    assert not out.exists()
    absolute = proj / "absolute.toml"  # the second fix, from here
    absolute.write_text(tiny_plan(model={"name": str(folder)}))
    assert check_plan_inputs(load_plan(absolute), executor="inline").model_source == str(folder)
    monkeypatch.chdir(proj)  # the first fix
    assert check_plan_inputs(load_plan(plan), executor="inline").model_source == "models/m"


def test_where_the_study_runs_found_it_comes_first_and_a_name_found_nowhere_has_no_hint(project, tmp_path):
    plan, proj = project
    out, moved = tmp_path / "study", tmp_path / "start"
    shutil.copytree(proj / "models", moved / "models")
    config = out / "runs" / "grpo" / "seed0" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"run": {}, "model_weights": {
        "source": "folder", "path": str((moved / "models" / "m").resolve()), "files": ["model.safetensors"],
        "method": "sha256", "digest": "0" * 64}}))
    with pytest.raises(PreflightError) as e:
        check_plan_inputs(load_plan(plan), executor="inline", out=out)
    assert str(e.value) == (
        f"[model] name = 'models/m': 'models/m' is a relative path, read from the working directory ({os.getcwd()}), "
        f"where it names nothing; this study's runs started from the local model {(moved / 'models' / 'm').resolve()}: "
        f"run the command from {moved.resolve()}; {HUB}")
    shutil.rmtree(proj / "models")
    with pytest.raises(PreflightError) as e:
        check_plan_inputs(load_plan(plan), executor="inline")  # no study folder, nothing beside the plan
    assert str(e.value) == f"[model] name = 'models/m': {HUB.removeprefix('read as given: ')}"


def test_a_misspelt_keyword_names_the_keyword_fewest_edits_away(tmp_path):
    with pytest.raises(TypeError) as err:
        gradprobe.train(tmp_path / "plan.toml", tmp_path / "run", arn="grpo")
    assert str(err.value).startswith("train() got an unexpected keyword argument 'arn'; did you mean arm=? (it "
                                     "accepts: run, out, arm, seed,")
    assert list(tmp_path.iterdir()) == []


def test_keywords_as_close_as_each_other_are_all_named():
    from gradprobe.api.study import _edits, _keywords_checked

    assert (_edits("arn", "arm"), _edits("arn", "run"), _edits("updtaes", "updates"), _edits("", "ab")) == (1, 2, 1, 2)

    @_keywords_checked
    def fn(*, cart=0, care=0, cast=0):
        return cart + care + cast

    with pytest.raises(TypeError) as err:
        fn(carx=1)
    assert str(err.value) == ("fn() got an unexpected keyword argument 'carx'; did you mean cart= or care=? (it "
                              "accepts: cart, care, cast)")
    assert fn(cart=1, cast=2) == 3
