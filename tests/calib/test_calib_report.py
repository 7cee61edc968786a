"""The calibration report and the calib/gradprobe command lines, end to end on synthetic studies."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from calib.cli import main as calib_main
from calib.report import FIGURES, write_report
from calib_helpers import default_arms, single_thread_blas, write_study  # noqa: F401

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
METRIC_KEYS = ("raw_bias", "calibrated_bias", "mae", "coverage", "kendall_tau", "spearman_rho")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    arms, rewards = default_arms(n_extra=5, rng=np.random.default_rng(11))
    study = write_study(root / "study", arms=arms, rewards=rewards, slope=0.5, bias=-1.5, noise=0.3)
    out = root / "out"
    metrics = write_report([study], out)
    return study, out, metrics


def test_report_files_and_metrics(report):
    study, out, metrics = report
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
    # the probe was written with slope 0.5 and bias -1.5: predicted - realized = 0.5 p + 1.5 on average
    rows = __import__("pandas").read_csv(out / "cv_predictions.csv")
    assert saved["raw_bias"] == pytest.approx(np.mean(rows["predicted_gain"] - rows["target"]))
    assert saved["raw_bias"] == pytest.approx(np.mean(0.5 * rows["predicted_gain"] + 1.5), abs=4 * 0.3 / np.sqrt(len(rows)))
    assert abs(saved["calibrated_bias"]) < abs(saved["raw_bias"]) and saved["mae"] < saved["raw_mae"]
    assert saved["coverage"] == pytest.approx(np.mean((rows["cv_lower"] <= rows["target"])
                                                      & (rows["target"] <= rows["cv_upper"])))
    assert saved["kendall_tau"] > 0.5 and saved["spearman_rho"] > 0.5
    assert saved["counts"]["rows"] == 9 * 4 and saved["counts"]["dropped_reference"] == 4
    assert set(saved["by_budget"]) == {"tokens", "time", "updates"}
    assert "Ranking" in html and "grpo_2xlr" in html and metrics["mae"] == saved["mae"]


def _chromium_images(page, tmp_path):
    """Load ``page`` in headless Chromium; return [(complete, naturalWidth)] of every <img>."""
    script = ("<script>window.addEventListener('load', () => { const r = [...document.images].map(i => "
              "[i.complete, i.naturalWidth]); const p = document.createElement('pre'); p.id = 'img-check'; "
              "p.textContent = JSON.stringify(r); document.body.appendChild(p); });</script>")
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


def test_cli_rows_fit_report_and_errors(tmp_path, capsys):
    arms, rewards = default_arms(n_extra=3, rng=np.random.default_rng(4))
    study = write_study(tmp_path / "study", arms=arms, rewards=rewards)
    assert calib_main(["rows", str(study), "--out", str(tmp_path / "rows.csv")]) == 0
    assert calib_main(["fit", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "cal.json")]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "predicted_gain" in out
    d = json.loads((tmp_path / "cal.json").read_text())
    assert d["training"]["rows"] == 7 * 4 and d["method"] == "linear"
    assert calib_main(["fit", str(tmp_path / "rows.csv"), "--method", "isotonic", "--out",
                       str(tmp_path / "iso.json")]) == 0
    # bad input: one line naming the problem, status 2
    import pandas as pd

    pd.read_csv(tmp_path / "rows.csv").drop(columns=["target"]).to_csv(tmp_path / "bad.csv", index=False)
    assert calib_main(["fit", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "x.json")]) == 2
    assert "lacks column(s) ['target']" in capsys.readouterr().err
    assert calib_main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "rep")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert calib_main(["rows", str(tmp_path / "nothing"), "--out", str(tmp_path / "r.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert calib_main(["rows", str(tmp_path), "--out", str(tmp_path / "r.csv")]) == 2
    assert "is not a study folder" in capsys.readouterr().err
    (tmp_path / "half" / "probe").mkdir(parents=True)
    assert calib_main(["rows", str(tmp_path / "half"), "--out", str(tmp_path / "r.csv")]) == 2
    assert "probe.json is missing" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_gradprobe_probe_calibration_flag(tmp_path, monkeypatch, capsys):
    """`gradprobe probe --calibration`: checked before the probe runs, applied after, probe.json rewritten."""
    import gradprobe.probe.run as run_mod
    from calib.model import fit_calibration
    from calib.dataset import build_rows
    from calib_helpers import probe_entry

    from gradprobe.cli import main as gp_main

    arms, rewards = default_arms(n_extra=3, rng=np.random.default_rng(4))
    cal = fit_calibration(build_rows(write_study(tmp_path / "study", arms=arms, rewards=rewards)))
    cal.save(tmp_path / "cal.json")
    calls = []

    def fake_run_probe(config, *, out=None, **kw):  # the probe itself is tested in tests/probe
        calls.append(config)
        result = {"config": run_mod._config_dict(config), "versions": {}, "warnings": [],
                  "rewards": [probe_entry(r, *rewards[r]) for r in config.rewards],
                  "ledger": {"generated_tokens": {"rollout": 100}}, "reference": {},
                  "batch": {"mean_reward": 0.5, "truncation_rate": 0.0},
                  "costs": {"alignment_pass_seconds": 1.0, "alignment_to_update_ratio": None,
                            "update_forward_backward_seconds": 1.0}}
        (tmp_path / "probe").mkdir(exist_ok=True)
        (tmp_path / "probe" / "probe.json").write_text(json.dumps(result))
        return result

    monkeypatch.setattr(run_mod, "run_probe", fake_run_probe)
    base = ["probe", "--model", "tiny-qwen2", "--out", str(tmp_path / "probe"), "--no-progress"]
    assert gp_main(base + ["--rewards", "outcome,mc_value", "--calibration", str(tmp_path / "cal.json")]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "probe" / "probe.json").read_text())
    by = {r["name"]: r for r in saved["rewards"]}
    point, lo, hi = cal.predict(np.array([[1e6 / 60000 * 0.10 - 1e6 / 6400 * 0.04]]))
    assert by["mc_value"]["calibrated_gain"] == pytest.approx(point[0])
    assert by["mc_value"]["calibrated_interval"] == pytest.approx([lo[0], hi[0]])
    assert saved["calibration"]["source"] == str(tmp_path / "cal.json")
    assert "calibrated gain vs GRPO" in printed and f"{point[0]:+.3f}" in printed
    assert not list((tmp_path / "probe").glob("*.tmp"))
    # refused before any compute: no outcome reward; a missing or unshipped default calibration
    n = len(calls)
    assert gp_main(base + ["--rewards", "mc_value", "--calibration", str(tmp_path / "cal.json")]) == 2
    assert "needs the 'outcome' reward too" in capsys.readouterr().err
    monkeypatch.setattr("calib.model.default_path", lambda: tmp_path / "none" / "calibration.json")
    assert gp_main(base + ["--calibration", "default"]) == 2
    assert "no default calibration is shipped yet" in capsys.readouterr().err
    assert len(calls) == n
