"""A reference curve that records no model or task (a CSV, a TRL ``trainer_state.json``, a ``metrics.jsonl`` without
its run's ``config.json``) gets one caution among the forecast's notes, not one per reward: gradprobe cannot check
that it is of the probe's model and task, and a curve of another one makes the forecast wrong (trial finding: such a
curve from another task gave verdicts with no caution, where a study folder's curve of another task names it in each
verdict). The verdicts stand; a curve that records both, and the shipped default curve, get no caution."""

from __future__ import annotations

import json

import numpy as np
import pytest
from forecast_helpers import metrics_log, probe_result, synthetic_curve, trl_state

from gradprobe.forecast import forecast_rewards, forecast_section, format_forecast, load_reference_curve

PROBE_TASK = "chain_sum:max_digits=1,max_terms=4"
BOTH = ("records no model or task, so gradprobe cannot check that they match the probe's (model 'tiny', task "
        f"{PROBE_TASK}): a curve of another model or task makes this forecast wrong")
ADVICE = ("worth its", "not worth", "no detectable difference")


def _probe() -> dict:
    rng = np.random.default_rng(0)
    return probe_result({"outcome": rng.normal(1.0, 0.3, 16), "hybrid": rng.normal(2.0, 0.3, 16),
                         "mc": rng.normal(2.5, 0.3, 16)}, {"outcome": 4480.0, "hybrid": 15029.0, "mc": 15029.0},
                        task=PROBE_TASK)


def _csv(tmp_path):
    path = tmp_path / "curve.csv"
    n, y, s = synthetic_curve().points[["update", "accuracy", "seed"]].to_numpy().T
    path.write_text("update,accuracy,seed\n" + "".join(f"{a:g},{b / 100:.5f},{int(c)}\n" for a, b, c in zip(n, y, s)))
    return path


def _cautions(notes) -> list[str]:
    return [n for n in notes if "gradprobe cannot check" in n]


@pytest.mark.parametrize("kind", ["csv", "trl", "metrics"])
def test_a_curve_file_without_model_or_task_gets_one_caution_and_keeps_its_verdicts(tmp_path, kind):
    path = {"csv": _csv, "trl": lambda p: trl_state(p / "trainer_state.json"),
            "metrics": lambda p: metrics_log(p / "metrics.jsonl")}[kind](tmp_path)
    curve = load_reference_curve(path)
    sec = forecast_section(_probe(), curve=curve, curve_spec=str(path), method="cost_only")
    assert _cautions(sec["notes"]) == [f"the reference curve ({curve.source}) {BOTH}"]
    text = format_forecast(sec)
    assert text.count("gradprobe cannot check") == 1  # once per probe, not per reward
    verdicts = [r["verdict"] for r in sec["rows"] if r["arm"] != "outcome"]
    assert len(verdicts) == 2 and all(v.startswith(ADVICE) for v in verdicts)  # not refused
    assert all(r.get("no_verdict_reason") is None for r in sec["rows"])


def test_a_metrics_log_whose_run_config_records_model_and_task_gets_no_caution(tmp_path):
    metrics_log(tmp_path / "metrics.jsonl")
    (tmp_path / "config.json").write_text(json.dumps({"run": {
        "seed": 0, "model": {"name": "tiny"}, "train": {"prompts_per_update": 16, "group": 8, "lr": 1e-4},
        "task": {"name": "chain_sum", "config": {"max_digits": 1, "max_terms": 4}}}}))
    curve = load_reference_curve(tmp_path / "metrics.jsonl")
    assert curve.metadata["task"] == PROBE_TASK
    assert _cautions(forecast_rewards(curve, _probe(), n_draws=300).notes) == []


def test_only_what_the_curve_leaves_out_is_named():
    curve = synthetic_curve(seeds=3, metadata={"model": "tiny"})
    assert _cautions(forecast_rewards(curve, _probe(), n_draws=300).notes) == [
        f"the reference curve (synthetic) records no task, so gradprobe cannot check that it matches the probe's "
        f"(task {PROBE_TASK}): a curve of another task makes this forecast wrong"]
    both = synthetic_curve(seeds=3, metadata={"model": "tiny", "task": PROBE_TASK})
    assert _cautions(forecast_rewards(both, _probe(), n_draws=300).notes) == []


def test_the_shipped_default_curve_gets_no_caution():
    sec = forecast_section(_probe(), method="cost_only")  # model tiny: the shipped curve, which records both
    assert sec["curve_is_default"] and _cautions(sec["notes"]) == []
