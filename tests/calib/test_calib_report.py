"""The calibration report and the calib/gradprobe command lines, end to end on synthetic studies."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calib.cli import main as calib_main
from calib.dataset import build_rows_many
from calib.report import FIGURES, validation_record, write_report
from calib_helpers import (default_arms, single_thread_blas, synthetic, synthetic_forecasts,  # noqa: F401
                           write_study)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
METRIC_KEYS = ("raw_bias", "calibrated_bias", "raw_mae", "mae", "coverage", "kendall_tau", "spearman_rho")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Three studies of different user arms (the truth: realized = -1.5 + 0.6 * forecast_probe + N(0, 0.3))."""
    root = tmp_path_factory.mktemp("report")
    studies = [write_study(root / f"s{i}", arms=default_arms(n_extra=2, rng=np.random.default_rng(10 + i)),
                           slope=0.6, bias=-1.5, noise=0.3, seed=i) for i in range(3)]
    out = root / "out"
    metrics = write_report(studies, out, forecast_fn=synthetic_forecasts, cv="study", n_permutations=999)
    return studies, out, metrics


def test_report_files_and_metrics(report):
    studies, out, metrics = report
    for name in FIGURES:
        data = (out / f"{name}.png").read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
    html = (out / "report.html").read_text()
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(embedded) == len(FIGURES)
    assert {base64.b64decode(e) for e in embedded} == {(out / f"{n}.png").read_bytes() for n in FIGURES}
    assert not re.search(r'src="(?!data:)', html)  # self-contained: no external references
    saved = json.loads((out / "metrics.json").read_text())
    for key in METRIC_KEYS:
        assert isinstance(saved[key], float), key
    assert saved["headline_cv"] == "study" and saved["cv_modes"] == ["study"] and saved["notes"] == []
    assert saved["n_studies"] == 3 and saved["rows"] == 3 * 6 * 4 and saved["grpo_rows_left_out"] == 12
    assert metrics["mae"] == saved["mae"] and "Leave one study out (headline)" in html and "grpo_2xlr" in html


def test_report_numbers_are_those_of_the_held_out_predictions(report):
    _, out, m = report
    pred = pd.read_csv(out / "cv_predictions.csv")
    rows = pd.read_csv(out / "rows.csv")
    base = rows[~rows["is_reference"] & np.isfinite(rows["target"])]
    for f in ("forecast_probe", "forecast_cost_only", "forecast_signal_proxy", "forecast_first_order"):
        ok = base[np.isfinite(base[f])]
        raw = m["errors"]["study"][f]["raw"]
        assert raw["rows"] == len(ok) and raw["mae"] == pytest.approx(np.mean(np.abs(ok[f] - ok["target"])))
        assert raw["bias"] == pytest.approx(np.mean(ok[f] - ok["target"]))
        held = pred[(pred["cv"] == "study") & (pred["forecaster"] == f) & (pred["method"] == "linear")]
        cal = m["errors"]["study"][f]["calibrated"]
        assert cal["mae"] == pytest.approx(np.mean(np.abs(held["cv_pred"] - held["target"])))
        assert cal["coverage"] == pytest.approx(np.mean((held["cv_lower"] <= held["target"])
                                                        & (held["target"] <= held["cv_upper"])))
        assert (held["fold"] == held["study"]).all()  # every run predicted with its whole study held out
    e = m["errors"]["study"]
    # the truth is linear in the probe's forecast: its correction transfers across studies; the raw first
    # order overestimates wildly and is only rescued by calibration; the learning-rate arm has no probe number
    assert e["forecast_probe"]["calibrated"]["mae"] < 0.4 < 1.0 < e["forecast_probe"]["raw"]["mae"]
    assert e["forecast_first_order"]["calibrated"]["mae"] < 0.5 * e["forecast_first_order"]["raw"]["mae"]
    assert e["forecast_probe"]["calibrated"]["mae"] < e["forecast_cost_only"]["calibrated"]["mae"]
    assert e["forecast_probe"]["raw"]["no_forecast_arms"] == sorted(f"{s}/grpo_2xlr" for s in m["studies"])
    assert m["common_rows"] == 3 * 5 * 4 and e["forecast_first_order"]["calibrated"]["common"]["rows"] == 60
    assert 0.6 <= m["coverage"] <= 1.0 and m["errors"]["study"]["forecast_probe"]["calibrated"]["coverage_rows"] == 60
    rk = m["ranking"]["forecast_probe"]
    assert rk["n_studies"] == 3 and rk["kendall_tau"] > 0.6 and not rk["exact"] and rk["n_permutations"] == 999
    assert rk["p_kendall"] < 0.01 and m["p_kendall"] == rk["p_kendall"]
    assert set(m["ranking"]) == {"forecast_probe", "forecast_cost_only", "forecast_signal_proxy",
                                 "forecast_first_order", "rho", "calibrated_forecast_probe"}


def test_report_gives_the_seed_noise_floor_and_errors_on_arm_means(report):
    from calib.bootstrap import MIN_INTERVAL_STUDIES
    from calib.noise_floor import arm_level_errors, seed_noise_floor

    _, out, m = report
    rows = pd.read_csv(out / "rows.csv")
    common = rows[~rows["is_reference"] & np.isfinite(rows[list(m["compared_forecasters"])]).all(axis=1)]
    assert len(common) == m["common_rows"] == 60
    expect = seed_noise_floor(common["target"], common["arm"], common["study"], min_studies=MIN_INTERVAL_STUDIES)
    assert m["seed_noise_floor"] == expect and expect["arms"] == 15 and expect["runs"] == 60
    assert expect["interval"] is None and expect["reason"].startswith("3 studies: no study-cluster bootstrap interval")
    # the synthetic truth's seed noise is N(0, 0.3): the floor is near 0.3 sqrt(2/pi) = 0.24 (interval: 2-study minimum)
    loose = seed_noise_floor(common["target"], common["arm"], common["study"])["interval"]
    assert 0.15 < expect["estimate"] < 0.35 and loose[0] < expect["estimate"] < loose[1]
    pred = pd.read_csv(out / "cv_predictions.csv")
    for f in m["compared_forecasters"]:
        held = pred[(pred["cv"] == "study") & (pred["forecaster"] == f) & (pred["method"] == "none")]
        held = held.merge(common[["study", "arm", "seed"]], on=["study", "arm", "seed"])
        got = m["errors"]["study"][f]["raw"]["common"]["arm_level"]
        assert got == arm_level_errors(held["cv_pred"], held["target"], held["arm"], held["study"],
                                       min_studies=MIN_INTERVAL_STUDIES)
        assert got["arms"] == 15 and got["floor"]["estimate"] < expect["estimate"]  # means of 4 seeds: about half
    html = (out / "report.html").read_text()
    assert f"Seed-noise floor of the run-level MAE on these runs: {expect['estimate']:.2f}" in html
    assert html.count("floor of arm means") == 1  # under the headline validation only
    ceiling = m["ranking"]["forecast_probe"]["oracle_kendall_tau"]
    critical = m["ranking"]["forecast_probe"]["critical_kendall_tau"]
    assert 0.5 < ceiling <= 1.0 and f"<td class=n>{ceiling:+.2f}</td><td class=n>{critical:+.2f}</td></tr>" in html
    assert 0 < critical < 1 and "Tau significant from: the smallest pooled tau" in html


def test_report_names_studies_it_cannot_split_by_held_out_items(report, capsys):
    """The synthetic studies keep no per-item results (nor runs.csv's reward columns): the held-out split of the
    floor says so per study, in metrics.json, on the command line and in the HTML, and the rest is reported."""
    from calib.cli import _print_heldout

    studies, out, m = report
    h = m["heldout_floor"]
    assert h["arms"] == [] and h["runs"] == 0 and len(h["skipped"]) == len(studies)
    for s, why in zip(studies, h["skipped"]):
        assert why.startswith(f"{s.name}: {s}/runs.csv lacks the column(s) accuracy_sampled, reward, lr_scale")
    saved = json.loads((out / "metrics.json").read_text())["heldout_floor"]
    assert saved["skipped"] == h["skipped"] and [f["multiple"] for f in saved["floors"]] == [1.0, 4.0, "inf"]
    assert "<p>Held-out split of the floor: n/a. Not split: s0: " in (out / "report.html").read_text()
    _print_heldout(h)
    assert capsys.readouterr().out.startswith(f"  held-out split          n/a: s0: {studies[0]}/runs.csv lacks")


def test_auto_validates_by_study_and_by_arm_within_study(tmp_path):
    from calib.report import compute

    rows = build_rows_many([write_study(tmp_path / n, seed=i) for i, n in enumerate("ab")],
                           forecast_fn=synthetic_forecasts)
    m, pred, _ = compute(rows, method="isotonic", n_permutations=99)
    assert m["cv_modes"] == ["study", "arm"] and m["headline_cv"] == "study"
    by_arm = pred[pred["cv"] == "arm"]
    assert (by_arm["fold"] == by_arm["study"] + "/" + by_arm["arm"]).all()
    # 2 studies: each study-out fold trains on 1 study, so no conformal interval (said as NaN, not an error)
    assert pred.loc[pred["cv"] == "study", "cv_lower"].isna().all()
    assert m["errors"]["study"]["forecast_probe"]["calibrated"]["coverage_rows"] == 0
    assert m["errors"]["arm"]["forecast_probe"]["calibrated"]["coverage_rows"] == 24


def test_single_study_report_says_leave_one_study_out_is_impossible(tmp_path):
    study = write_study(tmp_path / "only", arms=default_arms(n_extra=2, rng=np.random.default_rng(3)))
    m = write_report([study], tmp_path / "out", forecast_fn=synthetic_forecasts, method="isotonic")
    assert m["headline_cv"] == "arm" and m["cv_modes"] == ["arm"]
    assert "Leave-one-study-out is impossible with 1 study" in m["notes"][0]
    assert "Leave-one-study-out is impossible" in (tmp_path / "out" / "report.html").read_text()
    pred = pd.read_csv(tmp_path / "out" / "cv_predictions.csv")
    assert (pred["fold"] == pred["study"] + "/" + pred["arm"]).all()
    assert m["ranking"]["forecast_probe"]["exact"]  # one study of 6 arms with a probe number: 6! = 720 permutations


def _chromium_images(page, tmp_path):
    """Load ``page`` in headless Chromium; return [(complete, naturalWidth)] of every <img>."""
    script = ("<script>window.addEventListener('load', () => { const r = [...document.images].map(i => "
              "[i.complete, i.naturalWidth]); const p = document.createElement('pre'); p.id = 'img-check'; "
              "p.textContent = JSON.stringify(r); document.body.appendChild(p); });</script>")
    assert shutil.which(CHROMIUM), (f"headless Chromium not found ({CHROMIUM}): the README's test command installs "
                                     "Debian's chromium when it is missing (apt-get install -y chromium, as root)")
    checked = page.with_name(page.stem + ".check.html")
    checked.write_text(page.read_text().replace("</body>", script + "</body>"))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chrome'}",
           "--virtual-time-budget=10000", "--dump-dom", checked.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="img-check">(.*?)</pre>', proc.stdout)
    assert m, f"no image check in Chromium's DOM (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(m.group(1))


def test_report_opens_in_headless_chromium_with_every_image_loaded(report, tmp_path):
    _, out, _ = report
    images = _chromium_images(out / "report.html", tmp_path)
    assert len(images) == len(FIGURES)
    assert all(complete and width > 0 for complete, width in images), images
    # the PNG files beside it load too (a page that references them by relative path)
    page = out / "figures.html"
    page.write_text("<!DOCTYPE html><html><body>" + "".join(f'<img src="{n}.png">' for n in FIGURES) + "</body></html>")
    images = _chromium_images(page, tmp_path)
    assert len(images) == len(FIGURES) and all(c and w > 0 for c, w in images), images
    # and the check can fail: a missing file is reported as not loaded
    page.write_text('<!DOCTYPE html><html><body><img src="missing.png"></body></html>')
    assert _chromium_images(page, tmp_path)[0][1] == 0


def test_cli_rows_fit_report_apply_and_errors(tmp_path, capsys, synthetic):  # noqa: F811 (the fixture)
    study = write_study(tmp_path / "study", arms=default_arms(n_extra=3, rng=np.random.default_rng(4)))
    assert calib_main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 0
    assert calib_main(["fit", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "cal.json")]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "forecast_probe" in out and "domain: models ['tiny']" in out
    d = json.loads((tmp_path / "cal.json").read_text())
    assert d["training"]["rows"] == 6 * 4 and d["method"] == "linear" and d["cv"] == "arm"
    assert calib_main(["fit", str(tmp_path / "rows.csv"), "--method", "isotonic", "--forecaster",
                       "forecast_first_order", "--out", str(tmp_path / "iso.json")]) == 0
    assert calib_main(["report", str(study), "--method", "isotonic", "--out", str(tmp_path / "rep"),
                       "--validation-out", str(tmp_path / "validation.json")]) == 0
    out = capsys.readouterr().out
    assert "note: Leave-one-study-out is impossible with 1 study" in out and "ranking by forecast_probe" in out
    floor = json.loads((tmp_path / "rep" / "metrics.json").read_text())["seed_noise_floor"]
    assert re.search(rf"seed-noise floor +{floor['estimate']:.2f} \[no interval\]", out)  # 1 study: no interval
    assert "on arm means (each arm once" in out
    tau = json.loads((tmp_path / "rep" / "metrics.json").read_text())["ranking"]["forecast_probe"]
    assert "ranking by forecast_probe" in out and f"; ceiling {tau['oracle_kendall_tau']:+.2f}" in out
    crit = "n/a" if tau["critical_kendall_tau"] is None else f"{tau['critical_kendall_tau']:+.2f}"
    assert f", significant from {crit}\n" in out and "calib.metrics.critical_value)" in out
    # the forecaster choice of `gradprobe probe --forecaster auto`: the lowest validated error, as loaded
    from gradprobe.forecast.forecaster import load_validation

    record = load_validation(tmp_path / "validation.json")
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert record["cv"] == metrics["headline_cv"] == "arm" and record["best"] == min(record["mae"], key=record["mae"].get)
    assert record["mae"]["probe"] == pytest.approx(
        metrics["errors"]["arm"]["forecast_probe"]["raw"].get("common", metrics["errors"]["arm"]["forecast_probe"]["raw"])["mae"],
        abs=1e-4)
    assert f"--forecaster auto uses {record['best']}" in out
    floor = metrics["seed_noise_floor"]["estimate"]
    assert record["evidence"].endswith(f"points; seed-noise floor of single runs {floor:.2f}")
    no_floor = validation_record({k: v for k, v in metrics.items() if k != "seed_noise_floor"}, source="x")
    assert no_floor["evidence"] == record["evidence"][:record["evidence"].index("; seed-noise")]
    # apply: calibrated.json beside probe.json, which is left as it was
    probe = tmp_path / "probe"
    probe.mkdir()
    result = {"config": {"model": "tiny", "task": "chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1",
                         "budget_tokens": 1e6},
              "rewards": [{"name": n, "inner_product": 0.5, "per_group": [0.25, 0.25], "tokens_per_update": 300,
                           "predicted_gain_per_update": 0.005, "predicted_gain_at_budget": 4.0}  # load_probe's fields
                          for n in ("outcome", "mc_value")],
              "forecast": {"available": True, "rows": [{"arm": "outcome", "gain_probe": 0.0},
                                                       {"arm": "mc_value", "gain_probe": -2.0}]}}
    (probe / "probe.json").write_text(json.dumps(result))
    before = (probe / "probe.json").read_bytes()
    assert calib_main(["apply", str(probe), "--calibration", str(tmp_path / "cal.json")]) == 0
    assert "calibrated gain vs GRPO" in capsys.readouterr().out
    doc = json.loads((probe / "calibrated.json").read_text())
    assert (probe / "probe.json").read_bytes() == before and not doc["outside_domain"]
    assert doc["rewards"][1]["forecast"] == -2.0
    # bad input: one line naming the problem, status 2
    pd.read_csv(tmp_path / "rows.csv").drop(columns=["target"]).to_csv(tmp_path / "bad.csv", index=False)
    assert calib_main(["fit", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "x.json")]) == 2
    assert "lacks column(s) ['target']" in capsys.readouterr().err
    assert calib_main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "rep2")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert calib_main(["rows", str(tmp_path / "nothing"), "--out", str(tmp_path / "r.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert calib_main(["rows", str(tmp_path / "empty"), "--out", str(tmp_path / "r.csv")]) == 2
    assert "is not a study folder" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{\"format\": \"gradprobe-calib")
    assert calib_main(["apply", str(probe), "--calibration", str(tmp_path / "broken.json")]) == 2
    assert "broken.json is damaged: not valid JSON" in capsys.readouterr().err
    assert calib_main(["apply", str(tmp_path / "nothing"), "--calibration", str(tmp_path / "cal.json")]) == 2
    assert "nothing not found; pass a `gradprobe probe --out` folder" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_gradprobe_probe_calibration_flag(tmp_path, monkeypatch, capsys):
    """`gradprobe probe --calibration`: loaded before the probe runs, applied after; calibrated.json is written
    beside probe.json, which calib does not rewrite; the study's own task written inline is inside the domain."""
    import gradprobe.probe.run as run_mod
    from calib.dataset import build_rows
    from calib.model import fit_calibration
    from gradprobe.cli import main as gp_main
    from gradprobe.forecast import forecast_section

    cal = fit_calibration(build_rows(write_study(tmp_path / "study"), forecast_fn=synthetic_forecasts))
    cal.save(tmp_path / "cal.json")
    shipped = {e["name"]: e for e in json.loads((REPO / "data/study_tiny/probe/probe.json").read_text())["rewards"]}
    calls = []

    def fake_run_probe(config, *, out=None, **kw):  # the probe itself is tested in tests/probe
        calls.append(config)
        result = {"config": run_mod._config_dict(config), "versions": {}, "warnings": [],
                  "rewards": [dict(shipped[r]) for r in config.rewards],
                  "ledger": {"generated_tokens": {"rollout": 100}}, "reference": {},
                  "batch": {"mean_reward": 0.5, "truncation_rate": 0.0},
                  "costs": {"alignment_pass_seconds": 1.0, "alignment_to_update_ratio": None,
                            "update_forward_backward_seconds": 1.0}}
        Path(out).mkdir(parents=True, exist_ok=True)
        return result

    monkeypatch.setattr(run_mod, "run_probe", fake_run_probe)
    task = "chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1"
    # 500k: grpo's 112 updates lie within twice the default curve's last eval (57); at 1M the forecast gives no verdict
    base = ["probe", "--model", "tiny", "--task", task, "--budget-tokens", "500000", "--out", str(tmp_path / "probe"),
            "--no-progress"]
    assert gp_main(base + ["--rewards", "outcome,mc_value", "--calibration", str(tmp_path / "cal.json")]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert "calibrated_gain" not in saved["rewards"][1] and "calibration" not in saved  # probe.json is gradprobe's
    doc = json.loads((tmp_path / "probe" / "calibrated.json").read_text())
    by = {r["name"]: r for r in doc["rewards"]}
    row = {r["arm"]: r for r in forecast_section(saved)["rows"]}["mc_value"]
    point, lo, hi = cal.predict(np.array([[row["gain_probe"]]]))
    assert by["mc_value"]["forecast"] == pytest.approx(row["gain_probe"])
    assert by["mc_value"]["calibrated_gain"] == pytest.approx(point[0])
    assert by["mc_value"]["calibrated_interval"] == pytest.approx([lo[0], hi[0]])
    # 500k is inside the accepted half-to-twice band of the 1M fit, not its fitted range: a note, no mark
    note = ("tokens budget 500k is outside the fitted 1M-1M but within the 0.5x-2x tolerance (500k-2M): extrapolated, "
            "so the calibrated gain and interval were not fitted or validated at this budget")
    assert doc["calibration"]["source"] == str(tmp_path / "cal.json") and doc["warnings"] == [note]
    assert not doc["outside_domain"] and f"note: {note}" in printed.splitlines()
    assert "calibrated gain vs GRPO" in printed and f"{point[0]:+.3f}" in printed
    assert not list((tmp_path / "probe").glob("*.tmp"))
    # the default distribution of chain_sum is another task: computed, marked, warned
    assert gp_main(base[:4] + ["chain_sum"] + base[5:] + ["--rewards", "outcome,mc_value", "--calibration",
                                                           str(tmp_path / "cal.json")]) == 0
    doc = json.loads((tmp_path / "probe" / "calibrated.json").read_text())
    assert doc["outside_domain"] and doc["warnings"][0].startswith("task 'chain_sum:allow_negation=false,max_digits=4")
    assert "outside domain" in capsys.readouterr().out
    # refused before any compute: no outcome reward; a missing or unshipped default calibration
    n = len(calls)
    assert gp_main(base + ["--rewards", "mc_value", "--calibration", str(tmp_path / "cal.json")]) == 2
    assert "needs the 'outcome' reward too" in capsys.readouterr().err
    # a model without a shipped reference curve, and no --reference-curve: the corrected forecast cannot be made
    no_curve = base[:2] + ["tiny-qwen2"] + base[3:] + ["--rewards", "outcome,mc_value"]
    assert gp_main(no_curve + ["--calibration", str(tmp_path / "cal.json")]) == 2
    assert ("this calibration corrects 'forecast_probe', a forecast read on a reference learning curve, and none is "
            "shipped for model 'tiny-qwen2': pass --reference-curve") in capsys.readouterr().err
    assert len(calls) == n  # refused before the probe ran
    monkeypatch.setattr("calib.model.default_path", lambda: tmp_path / "none" / "calibration.json")
    assert gp_main(base + ["--calibration", "default"]) == 2
    assert "no default calibration is shipped yet" in capsys.readouterr().err
    assert len(calls) == n
