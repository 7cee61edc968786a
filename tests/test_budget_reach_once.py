"""A token budget out of reach of the updates, in a plan frozen into a study or the flags of a run made before such
budgets were refused, is warned about once per command or API call, at the caller's line, naming the plan's file.

1. ``gradprobe study PLAN --out STUDY`` read the frozen plan three times (the check, the freeze, the frozen copy) and
   warned each time; ``--analyze-only``, ``gradprobe.load_study`` and ``Study.run`` (which reads the study back)
   warned twice or more; every warning pointed into budget.py.
2. ``gradprobe train`` resuming a run folder whose ``config.json`` records out-of-reach flags resumed without a word;
   a rerun into a run folder with other flags, themselves out of reach, was told the folder holds another
   configuration (use another --out), which then refused the flags: it is now refused for the flags first.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import gradprobe
import gradprobe.study.orchestrator as orchestrator
import gradprobe.training.run as training_run
from gradprobe.cli import main
from gradprobe.study.result import StudyResult
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget

from helpers_training import tiny_plan
from test_budget_reach import _FEWEST, _PER, _old_study

#: the facts of _old_study's frozen plan (5 updates x 2 x 4 x 16 tokens = 640 < 1,000)
_FROZEN = ("budget.generated_tokens = 1,000 is out of reach of budget.updates = 5: one update of arm 'grpo' (reward "
           "'outcome': rollout tokens only) generates at most B * G * max_new_tokens = 2 * 4 * 16 = 128 tokens "
           "(train.prompts_per_update * train.group * sampling.max_new_tokens), so 5 updates generate at most 640 < "
           "1,000 tokens: the frozen plan's runs stop on updates with the token budget unspent (a new plan with this "
           "budget is refused)")


def _reach_warnings(call):
    """(``call()``'s result, the out-of-reach warnings it gave), every warning recorded ("always": no location
    registry hides a repeated one)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [w for w in caught if " is out of reach of " in str(w.message)]


def _study_and_copy(tmp_path):
    study = _old_study(tmp_path)
    copy = tmp_path / "plan.toml"  # the plan the user resumes with: the frozen plan's bytes in its own file
    shutil.copyfile(study / "plan.toml", copy)
    return study, copy


def _stopped(*args, **kwargs):
    raise KeyboardInterrupt  # once frozen, before any run: as a Ctrl-C there


def test_gradprobe_study_resuming_a_frozen_out_of_reach_plan_warns_once_naming_the_plan(tmp_path, monkeypatch):
    study, copy = _study_and_copy(tmp_path)
    monkeypatch.setattr(orchestrator, "_run", _stopped)
    status, caught = _reach_warnings(lambda: main(["study", str(copy), "--out", str(study), "--executor", "inline",
                                                   "--no-probe"]))
    assert status == 130
    assert len(caught) == 1  # was 3: the check, the freeze and the frozen copy each warned
    assert [str(w.message) for w in caught] == [f"plan {copy}: {_FROZEN}"]
    assert caught[0].filename == __file__  # the caller's line, not budget.py's


def test_gradprobe_study_analyze_only_warns_once_into_the_study_and_into_reanalysis(tmp_path):
    study, _ = _study_and_copy(tmp_path)
    status, caught = _reach_warnings(lambda: main(["study", "--analyze-only", "--out", str(study)]))
    assert status == 0 and (study / "analysis.json").is_file()
    assert len(caught) == 1  # was 2: the analysis reads the frozen plan twice
    assert [str(w.message) for w in caught] == [f"plan {study / 'plan.toml'}: {_FROZEN}"]
    # into reanalysis/: the stale-analysis check reads the plan first, its other warnings hidden; this one still shows
    status, caught = _reach_warnings(lambda: main(["study", "--analyze-only", "--out", str(study)]))
    assert status == 0 and (study / "reanalysis" / "analysis.json").is_file()
    assert len(caught) == 1
    assert [str(w.message) for w in caught] == [f"plan {study / 'plan.toml'}: {_FROZEN}"]


def test_load_study_and_study_run_warn_once_at_the_callers_line(tmp_path, monkeypatch):
    study, copy = _study_and_copy(tmp_path)
    result, caught = _reach_warnings(lambda: gradprobe.load_study(study))
    assert result.plan.budget.updates == 5
    assert len(caught) == 1  # was 2: load_study and runs.csv's reader each read the plan
    assert [(str(w.message), w.filename) for w in caught] == [(f"plan {study / 'plan.toml'}: {_FROZEN}", __file__)]
    # Study.run: the check, the freeze and the frozen copy, then the study read back (load_study): one warning
    monkeypatch.setattr(orchestrator, "_run", lambda plan, record, out, *args: StudyResult(out=out,
                                                                                           plan_sha256=plan.sha256))
    result, caught = _reach_warnings(lambda: gradprobe.Study(copy, study).run(executor="inline", probe=False))
    assert result.plan.path == str(study / "plan.toml")  # the frozen copy's plan, not read again
    assert len(caught) == 1  # was 5
    assert [(str(w.message), w.filename) for w in caught] == [(f"plan {copy}: {_FROZEN}", __file__)]
    # outside a command, each read of the plan still warns (Python's filters decide)
    _, caught = _reach_warnings(lambda: [gradprobe.load_plan(study / "plan.toml", check_schedule=False)
                                         for _ in range(2)])
    assert len(caught) == 2


# ------------------------------------------------------------------ gradprobe train: a run folder's own flags

_FLAGS = ["--budget-tokens", "5k", "--updates", "3"]  # 3 updates of at most 320 tokens: 960 < 5,000
_RESUMED = (f"--budget-tokens 5,000 is out of reach of --updates 3: one update of arm 'grpo' (reward 'outcome': "
            f"rollout tokens only) generates at most {_PER}, so 3 updates generate at most 960 < 5,000 tokens: the run "
            "being resumed was started with these flags, so it resumes under them and stops on updates with the "
            "token budget unspent (a new run with them is refused)")


def _run_folder(tmp_path, tokens: int, updates: int):
    """(plan file, a run folder whose config.json records ``--budget-tokens tokens --updates updates``, as written
    before out-of-reach flags were refused: the record made of a reachable pair, then edited)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(budget={"generated_tokens": 250_000}))
    record = shorten_budget(parse_plan(plan.read_text()).arm("grpo"), {"updates": 9, "generated_tokens": 2_000})
    run = record.to_dict()
    run["budget"].update(generated_tokens=tokens, updates=updates)
    run["budget_override"]["flags"] = {"--updates": updates, "--budget-tokens": tokens}
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"run": run}))
    return plan, out


def _resume_checked_only(calls: list):
    """A run_training that only checks the folder's configuration as a resume does (then stops)."""
    def resume(run, out, **kwargs):
        out = Path(out)
        assert training_run._check_existing(out, run) is None  # the same configuration: a real resume goes on
        calls.append(run.budget_override["flags"])
        (out / "metrics.jsonl").write_text("")
        return {"updates": 0, "stop_reason": "resumed (test)", "budget_spent": None, "overshoot": 0}
    return resume


def test_gradprobe_train_resuming_a_run_with_its_own_out_of_reach_flags_warns_once(tmp_path, monkeypatch, capsys):
    plan, out = _run_folder(tmp_path, 5_000, 3)
    calls = []
    monkeypatch.setattr(training_run, "run_training", _resume_checked_only(calls))
    status, caught = _reach_warnings(lambda: main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out),
                                                   "--no-progress", *_FLAGS]))
    assert status == 0, capsys.readouterr().err
    assert calls == [{"--updates": 3, "--budget-tokens": 5_000}]
    assert len(caught) == 1  # was 0: resumed without a word
    assert [(str(w.message), w.filename) for w in caught] == [(_RESUMED, __file__)]
    # gradprobe.train names its arguments
    _, caught = _reach_warnings(lambda: gradprobe.train(plan, out, arm="grpo", updates=3, budget_tokens=5_000))
    assert len(calls) == 2
    assert [str(w.message) for w in caught] == [
        _RESUMED.replace("--budget-tokens ", "budget_tokens=").replace("--updates ", "updates=").replace(
            "these flags", "these arguments")]


def test_changed_flags_out_of_reach_are_refused_as_for_a_new_run_not_as_another_configuration(tmp_path, capsys):
    plan, out = _run_folder(tmp_path, 2_000, 9)  # a run of --budget-tokens 2000 --updates 9: reachable (2,880)
    config = (out / "config.json").read_text()
    status, caught = _reach_warnings(lambda: main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out),
                                                   "--no-progress", *_FLAGS]))
    assert status == 2 and caught == []
    assert capsys.readouterr().err == (
        "gradprobe train: error: --budget-tokens 5,000 is out of reach of --updates 3: one update of arm 'grpo' "
        f"(reward 'outcome': rollout tokens only) generates at most {_PER}, so 3 updates generate at most 960 < 5,000 "
        f"tokens: the run always stops on updates with the token budget unspent; give --updates at least 16 "
        f"(ceil(5,000 / 320): {_FEWEST}) or only one of the two\n")
    assert (out / "config.json").read_text() == config
    with pytest.raises(PlanError, match=r"^budget_tokens=5,000 is out of reach of updates=3: "):
        gradprobe.train(plan, out, arm="grpo", updates=3, budget_tokens=5_000)
