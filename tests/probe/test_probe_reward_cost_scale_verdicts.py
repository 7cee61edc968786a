"""Fresh-user mends of the probe: a reward's own seconds are in its seconds_per_update and --budget-seconds is
printed; rewards too large for float64 group statistics are named (never called equal); the masking warning
names what is masked (None, NaN, inf); under cost only, an arm of grpo's cost is not a measured +0.0 [+0.0, +0.0]."""

from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from forecast_helpers import probe_result, synthetic_curve

from gradprobe.cli import main
from gradprobe.forecast import forecast_rewards
from gradprobe.grpo.advantages import group_normalize
from gradprobe.probe.result import diagnose
from gradprobe.rewards import REWARDS, get_reward, sequence_reward

SLOW = 0.4  # seconds the slow reward sleeps per call


def _slow(prompts, completions, **kw):
    time.sleep(SLOW)
    return [float(i % 2) for i, _ in enumerate(completions)]


def _huge(prompts, completions, **kw):  # group 0 (rows 0-3) is 0 / -1e300, group 1 all 0
    return [-1e300 if i < 4 and i % 2 else 0.0 for i, _ in enumerate(completions)]


def _with_inf(prompts, completions, **kw):  # rows 0 and 5 inf / -inf, the others 0/1
    return [math.inf if i == 0 else (-math.inf if i == 5 else float(i % 2)) for i, _ in enumerate(completions)]


#: the tiny model on its default task, where 4 x 4 completions give outcome a gradient (the forecast compares)
SIGNAL = ("--model", "tiny", "--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4")
#: the quickest probe (outcome may have no gradient on it)
QUICK = ("--model", "tiny", "--task", "chain_sum", "--prompts", "2", "--group", "4", "--heldout-prompts", "2",
         "--heldout-group", "2", "--max-new-tokens", "8")


def _probe(tmp_path, monkeypatch, rewards: dict, *extra, size=QUICK):
    get_reward("outcome")  # the built-in rewards are registered before ours
    for name, fn in rewards.items():
        monkeypatch.setitem(REWARDS, name, sequence_reward(fn, name=name))
    out = tmp_path / "o"
    rc = main(["probe", *size, "--rewards", ",".join(["outcome", *rewards]), "--bootstrap", "50", "--out", str(out),
               "--no-progress", *extra])
    assert rc == 0
    return json.loads((out / "probe.json").read_text())


def test_budget_seconds_charges_the_rewards_own_time_and_is_printed(tmp_path, capsys, monkeypatch):
    saved = _probe(tmp_path, monkeypatch, {"slow": _slow}, "--budget-seconds", "100", "--forecaster", "cost_only",
                   size=SIGNAL)
    printed = capsys.readouterr().out
    e = {r["name"]: r for r in saved["rewards"]}
    scale = saved["batch"]["update_scale"]
    assert e["slow"]["seconds_per_update"] - e["outcome"]["seconds_per_update"] >= 0.9 * SLOW * scale
    assert e["slow"]["reward_own_seconds"] >= SLOW and e["slow"]["reward_own_seconds"] == e["slow"]["reward_seconds"]
    gain = e["slow"]["predicted_gain_per_update"]
    assert e["slow"]["predicted_gain_at_time_budget"] == pytest.approx(100 / e["slow"]["seconds_per_update"] * gain)
    assert "budget 250,000 tokens (gain@budget and the forecast), 100 device-seconds (gain@100s" in printed
    assert "gain@100s" in printed.splitlines()[3]  # the table's header has the time budget's column
    assert "--budget-seconds 100 is not forecast here" in printed
    budget = saved["forecast"]["budget"]
    assert budget["kind"] == "tokens" and budget["seconds"] == 100.0 and "token" in budget["seconds_note"]
    # item 4 end to end: the same cost as grpo under cost only is no measured "no detectable difference"
    verdict = next(line for line in printed.splitlines() if line.startswith("slow: "))
    assert "cost only cannot tell rewards of equal cost apart" in verdict and "no detectable difference" not in verdict
    assert "the probe's forecast, not validated better than cost only" in verdict
    row = next(r for r in saved["forecast"]["rows"] if r["arm"] == "slow")
    assert row["gain_interval"] == [None, None] and row["forecast_gain"] == 0.0


def test_huge_rewards_are_named_not_called_equal(tmp_path, capsys, monkeypatch):
    saved = _probe(tmp_path, monkeypatch, {"huge": _huge}, "--forecaster", "cost_only")
    printed = capsys.readouterr().out
    e = {r["name"]: r for r in saved["rewards"]}["huge"]
    assert e["reward_stats"]["nonfinite_groups"] == 1 and e["reward_stats"]["zero_variance_groups"] == 1
    assert e["no_signal"] and "too large for float64" in e["no_signal_reason"]
    assert "rewards are equal on this batch" not in e["no_signal_reason"]
    assert any(w.startswith("reward 'huge': in 1 of 2 groups its rewards differ but are too large") and
               "rescale the reward" in w for w in saved["warnings"])
    verdict = next(line for line in printed.splitlines() if line.startswith("huge: "))
    assert "too large for float64" in verdict and "every group's rewards are equal" not in verdict


def test_masking_warning_names_inf_and_not_a_raise(tmp_path, capsys, monkeypatch):
    saved = _probe(tmp_path, monkeypatch, {"with_inf": _with_inf})
    printed = capsys.readouterr().out
    line = ("warning: reward 'with_inf': 2 of 8 completions got no reward (its value was None, NaN or +-inf); they "
            "are masked (advantage 0, left out of their group's mean and std), not scored 0")
    assert printed.count(line) == 1
    assert "raised" not in next(w for w in saved["warnings"] if w.startswith("reward 'with_inf'"))


def test_group_normalize_counts_overflow_apart_from_equal_groups():
    r = torch.tensor([[0.0, -1e300, 0.0, -1e300], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0],
                      [1e308, 1e308, 1e308, 1e308]], dtype=torch.float64)
    adv, stats = group_normalize(r)
    assert stats["nonfinite_groups"] == 1 and stats["zero_variance_groups"] == 2 and stats["overflow_max_abs_reward"] == 1e300
    assert torch.isfinite(adv).all() and (adv[0] == 0).all() and (adv[2].abs() > 0.8).all()
    _, plain = group_normalize(r[1:3])
    assert plain["nonfinite_groups"] == 0 and plain["overflow_max_abs_reward"] == 0.0


def test_scorer_errors_are_named_once_and_masked_values_listed():
    batch = SimpleNamespace(num_rows=8, num_prompts=2, truncated=torch.zeros(8, dtype=torch.bool),
                            completion_mask=torch.ones(8, 3), metadata={"score_errors": 3})
    outputs = {"outcome": {"stats": {"missing": 3, "zero_variance_groups": 0, "groups": 2}, "missing_groups": 0}}
    notes = diagnose(batch, {}, outputs)
    assert notes[0].startswith("reward 'outcome': 3 of 8 completions got no reward (its value was None, NaN or +-inf)")
    assert sum("the task's scorer raised on 3 of 8 completions" in n for n in notes) == 1


def test_cost_only_verdict_of_an_arm_of_grpos_cost_quotes_the_probe(capsys):
    curve = synthetic_curve(noise=0.3, seeds=4, metadata={"update_prompts": 16, "update_group": 8, "lr": 1e-4})
    rng = np.random.default_rng(0)
    o = rng.normal(2.0, 1.0, size=16)
    probe = probe_result({"outcome": o, "same": -0.5 * o + rng.normal(0.0, 0.3, size=16), "mc": 2.0 * o},
                         {"outcome": 4_000, "same": 4_000, "mc": 20_000})
    t = forecast_rewards(curve, probe, method="cost_only").table.set_index("arm")
    same, mc = t.loc["same"], t.loc["mc"]
    assert same["forecast_gain"] == 0.0 and all(math.isnan(x) for x in same["gain_interval"])
    assert same["verdict"].startswith("cost only cannot tell rewards of equal cost apart: at 250k its forecast is "
                                      "+0.0 by construction (the same tokens per update as grpo)")
    lo, hi = same["gain_probe_interval"]
    assert f"{same['gain_probe']:+.1f} [{lo:+.1f}, {hi:+.1f}] (95% interval) vs grpo, SNR of rho-1 {same['snr']:.2f}" \
        in same["verdict"] and same["gain_probe"] < 0
    assert mc["verdict"].startswith("not worth its tokens at 250k") and hi < 0  # other costs keep their verdicts
