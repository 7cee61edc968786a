"""Defects of saved reference curves and of the forecast built on them (FINDINGS 1, 6, 7, 11, 12, 16).

- a saved curve (.json) with a NaN, out-of-range or edited parameter, or an unknown version, is refused when it
  is read (before any compute), naming the file, the field and the fix;
- an unexpected error after ``gradprobe probe`` started (even one while formatting its printout) puts the earlier
  probe back;
- a verdict's interval always holds its point; a falling curve and a budget below one update get a note; gains
  and intervals that print as 0.0 are "no detectable difference"; ``--bootstrap`` says what it governs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.forecast import CurveError, ReferenceCurve, default_curve_path, forecast_rewards, scalerl_sigmoid
from gradprobe.forecast.result import verdict

C_OUT, C_MC = 4_000, 20_000
S0 = [0, 2, 5, 10, 14, 20, 29, 42, 57]  # the update counts of data/study_tiny's evals
SMALL = ["--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4", "--no-progress",
         "--bootstrap", "100", "--rewards", "outcome,mc_value"]


def _probe(rho=2.0, **kw):
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    return probe_result({"outcome": o, "mc": rho * o}, {"outcome": C_OUT, "mc": C_MC},
                        signal={"outcome": o ** 2, "mc": 9.0 * o ** 2}, **kw)


def _edited(tmp_path, edit) -> str:
    """A copy of the shipped curve with ``edit(document)`` applied, as a file."""
    d = json.loads(default_curve_path().read_text())
    edit(d)
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(d))
    return str(path)


# ---------------------------------------------------------------- 1, 7: the saved curve's loader

@pytest.mark.parametrize("field,value,want", [
    ("A", math.nan, r"field params\.A is nan, it must be a finite number in \[0, 100\]"),
    ("A", 500.0, r"field params\.A is 500\.0, it must be a finite number in \[0, 100\]"),
    ("R0", -50.0, r"field params\.R0 is -50\.0, it must be a finite number in \[0, 100\]"),
    ("n_mid", 0.0, r"field params\.n_mid is 0\.0, it must be a finite number > 0"),
    ("B", math.inf, r"field params\.B is inf, it must be a finite number in \[0\.1, 10\]"),
])
def test_saved_curve_with_a_parameter_out_of_range_is_refused(tmp_path, field, value, want):
    path = _edited(tmp_path, lambda d: d["params"].__setitem__(field, value))
    with pytest.raises(CurveError, match=want) as e:
        ReferenceCurve.load(path)
    msg = str(e.value)
    assert "\n" not in msg and repr(path) in msg and "rebuild it from its source" in msg


def test_saved_curve_whose_params_do_not_fit_its_points_is_refused(tmp_path):
    # A edited within its range: the stored rmse no longer matches the curve through the params
    with pytest.raises(CurveError, match=r"field rmse is 1\.36\d* but the curve through its params has rmse 2\.1"):
        ReferenceCurve.load(_edited(tmp_path, lambda d: d["params"].__setitem__("A", 85.0)))

    def consistent_edit(d):  # rmse rewritten to match the edited A: only the refit shows the params are not the fit
        d["params"]["A"] = 85.0
        n, y = np.array(d["points"]["update"]), np.array(d["points"]["accuracy"])
        d["rmse"] = float(np.sqrt(np.mean((scalerl_sigmoid(n, **d["params"]) - y) ** 2)))

    with pytest.raises(CurveError, match=r"its params do not fit its points: rmse 2\.13 points, where a refit of the "
                                         r"points gives 1\.365 \(params R0 67\.6, A 85,"):
        ReferenceCurve.load(_edited(tmp_path, consistent_edit))
    with pytest.raises(CurveError, match=r"params\.R0 is 70\.0 but the mean accuracy of its points at update 0 is "
                                         r"67\.6"):
        ReferenceCurve.load(_edited(tmp_path, lambda d: d["params"].__setitem__("R0", 70.0)))
    with pytest.raises(CurveError, match=r"field replicates\[3\] \(A\) is 500\.0"):
        ReferenceCurve.load(_edited(tmp_path, lambda d: d["replicates"][3].__setitem__(1, 500.0)))


@pytest.mark.parametrize("edit,got", [(lambda d: d.__setitem__("version", "99"), "is '99'"),
                                      (lambda d: d.__setitem__("version", 2), "is 2"),
                                      (lambda d: d.pop("version"), "is missing")])
def test_saved_curve_of_an_unknown_version_is_refused(tmp_path, edit, got):
    path = _edited(tmp_path, edit)
    with pytest.raises(CurveError, match=f"field 'version' {got}, and this gradprobe reads version 1 only; rebuild"):
        ReferenceCurve.load(path)


def test_valid_saved_curves_still_load(tmp_path):
    shipped = ReferenceCurve.load(default_curve_path())
    assert shipped.params["A"] == pytest.approx(89.817, abs=1e-3)
    for kw in (dict(updates=[0, 5, 10, 20, 40], accuracy=[90, 97, 99.5, 100, 100]),  # A at its bound 100
               dict(updates=S0, accuracy=[70.0] * 9),  # flat
               dict(updates=[1, 2, 5, 10, 20], accuracy=[10, 20, 30, 35, 37]),  # R0 fitted
               dict(updates=S0, accuracy=[50, 55, 60, 62, 63, 63, 64, 64, 64], B=2.0)):  # B fixed
        c = ReferenceCurve(**kw)
        assert ReferenceCurve.load(c.save(tmp_path / "c.json")).params == c.params


def test_probe_with_a_nan_curve_is_refused_before_any_compute_and_keeps_the_earlier_probe(tmp_path, capsys):
    from gradprobe.cli import main

    out = tmp_path / "p"
    out.mkdir()
    (out / "probe.json").write_text('{"earlier": true}')
    path = _edited(tmp_path, lambda d: d["params"].__setitem__("A", math.nan))
    assert main(["probe", *SMALL, "--reference-curve", path, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gradprobe probe: error: reference curve file") and "params.A is nan" in err
    assert len(err.splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["probe.json"]
    assert (out / "probe.json").read_text() == '{"earlier": true}'


# ---------------------------------------------------------------- 1b: roll back on any error

def _earlier_probe(out):
    out.mkdir()
    (out / "probe.json").write_text('{"earlier": true}')
    (out / "tokens.jsonl").write_text("earlier\n")


def _fake_probe(config, *, batches=1, out=None, **kw):
    """What run_probe_batches leaves behind (its files), without a model."""
    (Path(out) / "tokens.jsonl").write_text("new\n")
    (Path(out) / "alignment.safetensors").write_bytes(b"new")
    return {"config": {"model": "tiny"}, "rewards": []}


@pytest.mark.parametrize("where", ["forecast", "printout"])
def test_an_unexpected_error_after_the_probe_started_puts_the_earlier_probe_back(tmp_path, monkeypatch, capsys,
                                                                                  where):
    import gradprobe.forecast
    import gradprobe.probe.batches
    import gradprobe.probe.report_html
    import gradprobe.probe.run
    from gradprobe.cli import main

    def boom(*a, **k):
        raise TypeError("unsupported format string passed to NoneType.__format__")

    monkeypatch.setattr(gradprobe.probe.batches, "run_probe_batches", _fake_probe)
    monkeypatch.setattr(gradprobe.probe.report_html, "write_probe_report",
                        lambda out, result: Path(out, "report.html").write_text("new"))
    monkeypatch.setattr(gradprobe.forecast, "forecast_section",
                        boom if where == "forecast" else (lambda result, **k: {"available": False, "note": "x"}))
    if where == "printout":  # the traceback of FINDINGS 1: format_forecast failing after every file was written
        monkeypatch.setattr(gradprobe.probe.run, "format_table", boom)
    out = tmp_path / "p"
    _earlier_probe(out)
    with pytest.raises(TypeError, match="unsupported format string"):
        main(["probe", "--no-progress", "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == ["probe.json", "tokens.jsonl"]  # no .earlier-probe either
    assert (out / "probe.json").read_text() == '{"earlier": true}'
    assert (out / "tokens.jsonl").read_text() == "earlier\n"
    err = capsys.readouterr().err
    assert (f"gradprobe probe: internal error (traceback below, please report it); the unfinished probe's files in "
            f"{out} were removed; the earlier probe's files (probe.json, tokens.jsonl) were put back") in err


def test_a_real_probe_failing_in_its_printout_is_rolled_back(tmp_path, monkeypatch):
    import gradprobe.probe.table
    from gradprobe.cli import main

    def boom(section):
        raise TypeError("unsupported format string passed to NoneType.__format__")

    monkeypatch.setattr(gradprobe.probe.table, "format_forecast", boom)
    out = tmp_path / "p"
    _earlier_probe(out)
    with pytest.raises(TypeError):
        main(["probe", *SMALL, "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == ["probe.json", "tokens.jsonl"]
    assert (out / "probe.json").read_text() == '{"earlier": true}'


# ---------------------------------------------------------------- 7: an interval holds its point

def test_the_gain_interval_always_holds_the_point_gain():
    curve = synthetic_curve(noise=0.3, seeds=4)
    curve.replicates = curve.replicates.copy()
    curve.replicates[:, 1] -= 10.0  # replicates' asymptote 10 points below the main fit's: a skewed spread
    t = forecast_rewards(curve, _probe(rho=2.0), n_draws=300, method="probe").table.set_index("arm")
    for arm in ("mc",):
        row = t.loc[arm]
        gain, (lo, hi) = row["forecast_gain"], row["gain_interval"]
        assert lo <= gain <= hi, (gain, lo, hi)
        assert gain == pytest.approx(curve(250_000 / C_MC * 2.0) - curve(250_000 / C_OUT), abs=1e-12)
        for meth in ("probe", "cost_only", "signal_proxy"):
            g, (a, b) = row[f"gain_{meth}"], row[f"gain_{meth}_interval"]
            assert a <= g <= b, (meth, g, a, b)
        assert f"{gain:+.1f} [{lo:+.1f}, {hi:+.1f}]" in row["verdict"]


# ---------------------------------------------------------------- 6: a falling curve

def test_a_falling_curve_is_forecast_with_a_note_saying_so():
    falling = ReferenceCurve(updates=S0, accuracy=[90 - 3 * i for i in range(9)], source="decreasing.csv")
    assert falling.params["A"] < falling.params["R0"] == 90.0
    res = forecast_rewards(falling, _probe(rho=1.0), n_draws=300)
    notes = [n for n in res.notes if "falls" in n]
    assert len(notes) == 1
    assert notes[0].startswith(f"the reference curve decreasing.csv falls (A {falling.params['A']:.1f} < R0 90.0 "
                               "points: grpo's accuracy drops with updates): forecasts read off it reward FEWER "
                               "updates")
    rising = forecast_rewards(synthetic_curve(seeds=2), _probe(rho=1.0), n_draws=300)
    flat = forecast_rewards(ReferenceCurve(updates=S0, accuracy=[70.0] * 9), _probe(rho=1.0), n_draws=300)
    assert not any("falls" in n for n in rising.notes + flat.notes)


# ---------------------------------------------------------------- 11: round-off is no difference

def test_gains_that_print_as_zero_are_no_detectable_difference():
    assert verdict(1e-9, (1e-10, 2e-9), "250k", "tokens") == \
        "no detectable difference at 250k: +0.0 [+0.0, +0.0] vs grpo"
    assert verdict(-1e-9, (-2e-9, -1e-10), "250k", "tokens") == \
        "no detectable difference at 250k: +0.0 [+0.0, +0.0] vs grpo"
    assert verdict(0.3, (0.04, 0.6), "250k", "tokens") == "worth its tokens at 250k: +0.3 [+0.0, +0.6] vs grpo"
    assert verdict(-0.3, (-0.6, -0.04), "250k", "tokens") == "not worth its tokens at 250k: -0.3 [-0.6, +0.0] vs grpo"
    for acc in (100.0, 0.0):  # saturated and zero curves (FINDINGS 11: "+0.0 [+0.0, +0.0]" worth / not worth):
        c = ReferenceCurve(updates=S0, accuracy=[acc] * 9, seeds=[0] * 9)  # grpo does not learn on them: no verdict
        row = forecast_rewards(c, _probe(rho=3.0), n_draws=300).table.set_index("arm").loc["mc"]
        assert row["verdict"].startswith("no verdict at 250k: grpo does not learn on this curve"), row["verdict"]


# ---------------------------------------------------------------- 12: a budget below one update

def test_a_budget_below_one_update_says_the_forecast_is_the_curves_start():
    curve = synthetic_curve(seeds=2)
    res = forecast_rewards(curve, _probe(rho=2.0), budget_tokens=100, n_draws=300)
    notes = [n for n in res.notes if "fewer than one update" in n]
    assert notes == ["the budget of 100 tokens buys fewer than one update of outcome (0.025 updates of 4,000 tokens), "
                     "mc (0.005 updates of 20,000 tokens): the forecast there is the curve's start (within one update "
                     "of R0 = 60.0 points: no training to speak of) and says nothing about the rewards; give a budget "
                     "of several updates"]
    assert res.grpo_accuracy == pytest.approx(curve(100 / C_OUT), abs=1e-12)
    # 10,000 tokens: 2.5 updates of grpo, 0.5 of mc
    res = forecast_rewards(curve, _probe(rho=2.0), budget_tokens=10_000, n_draws=300)
    assert [n for n in res.notes if "fewer than one update" in n] == [
        "the budget of 10k tokens buys fewer than one update of mc (0.5 updates of 20,000 tokens): the forecast "
        "there is the curve's start (within one update of R0 = 60.0 points: no training to speak of) and says "
        "nothing about the rewards; give a budget of several updates"]
    assert not any("fewer than one update" in n for n in forecast_rewards(curve, _probe(), n_draws=300).notes)


# ---------------------------------------------------------------- 16: what --bootstrap governs

def test_bootstrap_help_says_the_forecast_intervals_are_its_own(capsys):
    from gradprobe.cli import main

    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("--bootstrap BOOTSTRAP bootstrap resamples over prompts of the probe table's 95% intervals (0: no "
            "intervals there); the forecast's rho and gain intervals and SNR of rho-1 always come from its own 2000 "
            "draws over the same per-group contributions, whatever this is (default: 1000)") in text
    # and they do: the forecast does not read the probe's n_bootstrap
    a = forecast_rewards(synthetic_curve(seeds=2), _probe(rho=2.0), n_draws=300)
    p = _probe(rho=2.0)
    p["config"]["n_bootstrap"] = 0
    b = forecast_rewards(synthetic_curve(seeds=2), p, n_draws=300)
    assert a.table.set_index("arm").loc["mc", "rho_interval"] == b.table.set_index("arm").loc["mc", "rho_interval"]
