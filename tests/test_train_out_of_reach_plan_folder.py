"""``gradprobe train --plan OOR --out D`` (and :func:`gradprobe.train`) with a plan whose ``[budget]
generated_tokens`` is out of reach of its updates (refused for a new run) took the plan for a resumed run's whenever
``D`` held any ``config.json``: a damaged one, a user's own file or another run's. The plan was only warned about
("the frozen plan's runs stop on updates ...") and the command then failed on "config.json is damaged" or "holds a run
with a different configuration"; once the folder was fixed, the plan was refused after all. The plan is now warned
about only where ``D``'s ``config.json`` records this very run (the configuration a resume compares,
:func:`gradprobe.training.run_folder.records_run`), and refused as a new run's in any other folder, before anything
is read or written there. Budget flags out of reach of each other are decided the same way."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import gradprobe
import gradprobe.training.run as training_run
from gradprobe.cli import main
from gradprobe.training.budget import OutOfReachWarning
from gradprobe.training.plan import PlanError, parse_plan, shorten_budget
from gradprobe.training.run_folder import records_run

from helpers_training import tiny_plan

#: the plan's facts: 10 updates of at most 2 x 4 x 40 = 320 tokens never spend 250,000
_FACTS = ("budget.generated_tokens = 250,000 is out of reach of budget.updates = 10: one update of arm 'grpo' (reward "
          "'outcome': rollout tokens only) generates at most B * G * max_new_tokens = 2 * 4 * 40 = 320 tokens "
          "(train.prompts_per_update * train.group * sampling.max_new_tokens), so 10 updates generate at most 3,200 < "
          "250,000 tokens")
_REFUSED = _FACTS + ": every run of the arm stops on updates with the token budget unspent"


def _caught(call):
    """(``call()``'s result, every warning it gave, none hidden)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, caught


@pytest.fixture
def plan(tmp_path):
    path = tmp_path / "oor.toml"
    path.write_text(tiny_plan(budget={"updates": 10, "generated_tokens": 250_000}))
    return path


def _recorded_run(plan: Path, **changes) -> dict:
    """The configuration of the plan's grpo run at seed 0 as a run's config.json records it (``changes``: another
    run's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutOfReachWarning)
        run = parse_plan(plan.read_text(), path=str(plan), check_reach=False).arm("grpo")
    return {**run.to_dict(), **changes}


def _folder(tmp_path, name: str, config: str) -> Path:
    out = tmp_path / name
    out.mkdir()
    (out / "config.json").write_text(config)
    return out


def _folders(tmp_path, plan) -> dict[str, Path]:
    return {"damaged": _folder(tmp_path, "damaged", '{"run": {"arm": "grpo", "seed'),
            "a user's own": _folder(tmp_path, "mine", json.dumps({"learning_rate": 0.1, "layers": 2})),
            "another run's": _folder(tmp_path, "other", json.dumps({"run": _recorded_run(plan, seed=1)}))}


@pytest.mark.parametrize("which", ["damaged", "a user's own", "another run's"])
def test_the_plan_is_refused_as_a_new_runs_beside_any_other_config_json(tmp_path, plan, capsys, which):
    out = _folders(tmp_path, plan)[which]
    before = (out / "config.json").read_text()
    status, caught = _caught(lambda: main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out),
                                           "--no-progress"]))
    err = capsys.readouterr().err
    assert status == 2 and err.startswith(f"gradprobe train: error: {_REFUSED}, not matched on generated tokens as the "
                                          "plan says; raise [budget] updates to at least 782 (ceil(250,000 / 320)")
    assert caught == [] and "config.json" not in err  # was: warned, then refused for the folder
    assert sorted(p.name for p in out.iterdir()) == ["config.json"] and (out / "config.json").read_text() == before
    refusal, caught = _caught(lambda: pytest.raises(PlanError, gradprobe.train, plan, out, arm="grpo"))
    assert caught == [] and str(refusal.value).startswith(_REFUSED)
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]


def _resume_checked_only(calls: list):
    """A run_training that only checks the folder's configuration as a resume does (then stops)."""
    def resume(run, out, **kwargs):
        assert training_run._check_existing(Path(out), run) is None  # the same configuration: the resume goes on
        calls.append(run.budget.given())
        (Path(out) / "metrics.jsonl").write_text("")
        return {"updates": 0, "stop_reason": "resumed (test)", "budget_spent": None, "overshoot": 0}
    return resume


def test_the_plan_of_the_run_the_folder_holds_is_warned_once_and_the_run_resumes(tmp_path, plan, monkeypatch, capsys):
    out = _folder(tmp_path, "run", json.dumps({"run": _recorded_run(plan, plan_name="renamed")}))  # names: not compared
    calls = []
    monkeypatch.setattr(training_run, "run_training", _resume_checked_only(calls))
    status, caught = _caught(lambda: main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out),
                                           "--no-progress"]))
    assert status == 0, capsys.readouterr().err
    assert calls == [{"updates": 10, "generated_tokens": 250_000}]
    assert [(w.category, w.filename) for w in caught] == [(OutOfReachWarning, __file__)]
    assert str(caught[0].message) == (f"plan {plan}: {_FACTS}: the run being resumed was started under this plan, so "
                                      "it resumes under it and stops on updates with the token budget unspent (a new "
                                      "run with this plan is refused)")  # a train run's plan, not a study's frozen one
    _, caught = _caught(lambda: gradprobe.train(plan, out, arm="grpo"))
    assert len(calls) == 2 and [(w.category, w.filename) for w in caught] == [(OutOfReachWarning, __file__)]


def _flags_run(plan: Path, seed: int) -> dict:
    """A run's record of ``--budget-tokens 5000 --updates 3`` (out of reach: 3 x 320 = 960 < 5,000) at ``seed`` of the
    plan written to ``plan``, as made before such flags were refused: a reachable pair's record, then edited."""
    plan.write_text(tiny_plan(budget={"generated_tokens": 250_000}))
    record = shorten_budget(parse_plan(plan.read_text()).arm("grpo", seed=seed),
                            {"updates": 9, "generated_tokens": 2_000}).to_dict()
    record["budget"].update(generated_tokens=5_000, updates=3)
    record["budget_override"]["flags"] = {"--updates": 3, "--budget-tokens": 5_000}
    return record


def test_flags_out_of_reach_beside_another_run_with_the_same_flags_are_refused_as_for_a_new_run(tmp_path, capsys,
                                                                                               monkeypatch):
    plan = tmp_path / "reachable.toml"
    other = _folder(tmp_path, "other", json.dumps({"run": _flags_run(plan, seed=1)}))  # the same flags, seed 1
    flags = ["--budget-tokens", "5k", "--updates", "3"]
    status, caught = _caught(lambda: main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(other),
                                           "--no-progress", *flags]))
    err = capsys.readouterr().err
    assert status == 2 and caught == [] and "different configuration" not in err
    assert err.startswith("gradprobe train: error: --budget-tokens 5,000 is out of reach of --updates 3: ")
    # the run itself (seed 1) resumes under them, warned
    calls = []
    monkeypatch.setattr(training_run, "run_training", _resume_checked_only(calls))
    status, caught = _caught(lambda: main(["train", "--plan", str(plan), "--arm", "grpo", "--seed", "1", "--out",
                                           str(other), "--no-progress", *flags]))
    assert status == 0 and len(calls) == 1 and [w.category for w in caught] == [OutOfReachWarning]


def test_records_run_compares_what_a_resume_compares(tmp_path, plan):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutOfReachWarning)
        run = parse_plan(plan.read_text(), path=str(plan), check_reach=False).arm("grpo")
    out = _folder(tmp_path, "run", json.dumps({"run": _recorded_run(plan, plan_sha256="0" * 64)}))
    assert records_run(out, run)  # the plan's labels are not compared
    assert not records_run(out, run.__class__(**{**run.__dict__, "seed": 1}))
    assert not records_run(tmp_path / "none", run)
    assert not records_run(_folder(tmp_path, "list", "[1, 2]"), run)
    (_folder(tmp_path, "bytes", "") / "config.json").write_bytes(b"\xff{}")
    assert not records_run(tmp_path / "bytes", run)


@pytest.mark.parametrize("action", ["once", "default"])
def test_resuming_the_run_three_times_from_one_line_warns_once_under_once_and_default(tmp_path, plan, monkeypatch,
                                                                                       action):
    """The trial read that decides whether the folder holds this run is silenced by gradprobe itself
    (:func:`gradprobe.training.budget.reach_silenced`), not by a ``warnings.catch_warnings`` block, whose entry resets
    every module's registry of warnings shown: three resumes from one line gave three warnings under ``-W once``."""
    out = _folder(tmp_path, "run", json.dumps({"run": _recorded_run(plan)}))
    calls = []
    monkeypatch.setattr(training_run, "run_training", _resume_checked_only(calls))
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter(action)
        for _ in range(3):
            gradprobe.train(plan, out, arm="grpo")
    assert len(calls) == 3
    assert [w.category for w in caught] == [OutOfReachWarning]


def test_under_an_error_filter_the_warning_is_the_commands_one_error_line(tmp_path, plan, monkeypatch, capsys):
    """``python -W error`` (or ``PYTHONWARNINGS=error``) turns the resumed run's warning into an exception: the
    command printed a traceback (exit 1); it prints one error line naming the warning, exit 2, the folder unchanged."""
    out = _folder(tmp_path, "run", json.dumps({"run": _recorded_run(plan)}))
    before = (out / "config.json").read_bytes()
    monkeypatch.setattr(training_run, "run_training", _resume_checked_only([]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutOfReachWarning)
        status = main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"gradprobe train: error: OutOfReachWarning (a warning turned into an error by a warnings "
                          f"filter, e.g. -W error): plan {plan}: {_FACTS}: the run being resumed was started under ")
    assert (out / "config.json").read_bytes() == before and sorted(p.name for p in out.iterdir()) == ["config.json"]
