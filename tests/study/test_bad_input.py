"""Bad input is refused before any run, with an error that names the key and the fix, and nothing is
written: hypotheses at an axis the runs do not record or at a point without a promised eval,
negative or duplicate seeds, a [power] section out of range, --replicate of an unfinished study."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study import runner
from gradprobe.training.plan import AXES, PlanError, load_plan, parse_plan, replicate_plan

from study_helpers import make_study, plan_head

BASE = plan_head("bad", [0, 1]) + """[budget]
generated_tokens = 1000
[eval]
at_updates = [2, 5]
at_fractions = [0.5, 1.0]
[arms.grpo]
reward = "outcome"
[arms.mc_value]
reward = "mc_value"
"""
HYP = '[[hypotheses]]\nname = "h"\nstatement = "s"\ntest = "sign_flip"\narms = ["grpo", "mc_value"]\n'


def test_the_axes_are_one_vocabulary():
    assert AXES == ("updates", "generated_tokens", "flops", "device_seconds")
    plan = parse_plan(BASE.replace("generated_tokens = 1000", "generated_tokens = 1000\nflops = 1e12") + HYP
                      + 'at = "flops"\n')
    assert plan.hypotheses[0].at == "flops"
    assert parse_plan(BASE + HYP + 'at = "updates"\nbudget = 5\n').hypotheses[0].budget == 5
    assert parse_plan(BASE + HYP + "budget = 500\n").hypotheses[0].budget == 500  # the 0.5 fraction


@pytest.mark.parametrize("text, message", [
    (BASE + HYP + 'at = "tokens"\n',
     "hypotheses[0].at 'tokens' is not an axis the runs record; use one of updates, generated_tokens, flops, "
     "device_seconds"),
    (BASE + HYP + 'at = "updates"\nbudget = 3\n',
     "hypotheses[0]: the eval schedule promises no eval at updates = 3 (promised: 0, 2, 5); add 3 to [eval] "
     "at_updates"),
    (BASE + HYP + "budget = 300\n", "promises no eval at generated_tokens = 300 (promised: 0, 500, 1000); add the "
                                    "fraction 0.3 to [eval] at_fractions"),
    (BASE + HYP + 'at = "flops"\nbudget = 1e9\n', "set [budget] flops (at_fractions are fractions of it)"),
    (BASE + HYP + "budget = -5\n", "hypotheses[0].budget must be > 0"),
    (BASE.replace("seeds = [0, 1]", "seeds = [0, -1]"), "seeds must be integers in [0, 2**63 - 1] (they seed "
                                                        "numpy and torch generators), got -1"),
    (BASE.replace("seeds = [0, 1]", "seeds = [0, 1, 1]"), "seeds must be distinct: 1 is listed more than once"),
    (BASE.replace("seeds = [0, 1]", "seeds = []"), "seeds must be a non-empty list"),
    (BASE + "[power]\npilot = 'x'\n", "[power] needs the key(s) min_effect"),
    (BASE + "[power]\nmin_effect = -1\n", "power.min_effect must be > 0"),
    (BASE + "[power]\nmin_effect = 1.5\npower = 80\n", "power.power must be in (0, 1), e.g. 0.8"),
    (BASE + "[power]\nmin_effect = 1.5\nseeds = 4\n", "unknown key 'power.seeds'"),
])
def test_a_bad_plan_is_refused_before_anything_is_written(tmp_path, capsys, text, message):
    with pytest.raises(PlanError) as e:
        parse_plan(text)
    assert message in str(e.value)
    (tmp_path / "plan.toml").write_text(text)
    out = tmp_path / "study"
    assert cli_main(["study", str(tmp_path / "plan.toml"), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_the_shipped_plans_still_load():
    repo = Path(__file__).resolve().parents[2]
    for p in [*sorted((repo / "plans").glob("*.toml")), repo / "data" / "study_tiny" / "plan.toml"]:
        plan = load_plan(p)
        assert all(h.at in AXES for h in plan.hypotheses)


def test_replicate_plan_fresh_seeds_and_held_out_set():
    plan = parse_plan(BASE.replace("seeds = [0, 1]", "seeds = [3, 4, 5]"))
    rep = replicate_plan(plan, seed_offset=10)
    assert rep.seeds == (13, 14, 15) and rep.heldout.seed == plan.heldout.seed + 10 and rep.name == "bad_rep10"
    assert rep.sha256 != plan.sha256 and rep.arms == plan.arms and rep.eval == plan.eval
    assert rep.arm("grpo", seed=13).heldout.seed == 10
    with pytest.raises(PlanError, match=r"reuses seeds \[4, 5\] of the original study; .* use seed_offset >= 3"):
        replicate_plan(plan, seed_offset=1)
    with pytest.raises(PlanError, match="seed_offset must be an integer >= 1"):
        replicate_plan(plan, seed_offset=0)


def test_replicate_flag_validation(tmp_path, capsys, monkeypatch):
    unfinished = make_study(tmp_path / "unfinished", seeds=2, finished=False)
    new = tmp_path / "new"
    cases = [
        (["--replicate", str(unfinished), "--out", str(new)], "--replicate: "),
        (["--replicate", str(tmp_path / "nowhere"), "--out", str(new)], "is not a folder"),
        (["--replicate", str(unfinished)], "--replicate needs --out NEW_DIR"),
        (["plan.toml", "--replicate", str(unfinished), "--out", str(new)], "drop the PLAN argument"),
        (["--seed-offset", "3", "--out", str(new)], "--seed-offset goes with --replicate"),
    ]
    for argv, message in cases:
        assert cli_main(["study", *argv]) == 2
        assert message in capsys.readouterr().err
    assert cli_main(["study", "--replicate", str(unfinished), "--out", str(new)]) == 2
    assert "not a finished study (study.json has no 'finished'" in capsys.readouterr().err
    done = make_study(tmp_path / "done", seeds=2)
    assert cli_main(["study", "--replicate", str(done), "--out", str(done)]) == 2
    assert "is the study being replicated" in capsys.readouterr().err
    assert cli_main(["study", "--replicate", str(done), "--out", str(new), "--seed-offset", "1"]) == 2
    assert "reuses seeds [1] of the original study" in capsys.readouterr().err
    assert not new.exists()  # nothing written by any refused request
    calls = []

    def fake(source, out, *, plan, **kw):
        calls.append((source, out, plan, kw))
        return runner.StudyResult(out=Path(out), plan_sha256=plan.sha256)

    monkeypatch.setattr(runner, "replicate_study", fake, raising=False)
    assert cli_main(["study", "--replicate", str(done), "--out", str(new), "--executor", "inline"]) == 0
    (source, out, plan, kw), = calls
    assert source == done and out == str(new) and plan.seeds == (2, 3) and plan.heldout.seed == 2
    assert kw["executor"] == "inline"


def test_a_study_frozen_before_the_schedule_check_is_still_analysed(tmp_path):
    """A plan frozen before hypotheses needed a promised eval: refused for new runs, analysed with
    its reads checked instead (grpo is read at 3 updates between its evals at 2 and 5, within the
    promised interval; mc_value ends at 2 updates, so none of its seeds is read)."""
    from study_helpers import PLAN

    plan = PLAN.split("[[hypotheses]]")[0] + HYP.replace('"grpo", "mc_value"', '"grpo_2xlr", "grpo"') + (
        'at = "updates"\nbudget = 3\n')
    study = make_study(tmp_path, seeds=8, plan=plan)
    with pytest.raises(PlanError, match="promises no eval at updates = 3"):
        load_plan(study / "plan.toml")
    from gradprobe.study.analysis import analyze

    h = analyze(study, write=False, figures=False, n_resamples=2000)["hypotheses"][0]
    assert h["seeds"] == 8 and h["excluded_seeds"] == [] and h["estimate"] == pytest.approx(2.5 / 3)
