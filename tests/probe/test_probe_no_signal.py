"""A reward without signal on the probe batch (constant within every group, or None for every completion) gets a
verdict saying it gives no gradient and cannot train, no forecast numbers, and ``no_signal`` in probe.json: its
exact zeros are never shown as a measured "no detectable difference +0.0 [+0.0, +0.0]"."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import forecast_helpers as fh
from gradprobe.cli import main
from gradprobe.config import SamplingConfig
from gradprobe.forecast import default_curve_path, forecast_rewards
from gradprobe.forecast.result import no_signal_reason
from gradprobe.probe.output import format_table, no_signal_entries
from gradprobe.probe.result import diagnose
from gradprobe.probe.run import ProbeConfig, run_probe
from gradprobe.rewards import REWARDS, get_reward, sequence_reward

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

EQUAL = "every group's rewards are equal on this batch, so every advantage is 0"
MISSING = "no usable reward: it returned None or NaN for every completion, or marked none valid"


def _verdict(reason: str) -> str:
    return f"no gradient: {reason}; it cannot train (no forecast)"


def _probe(const_signal=(0.0, 0.0, 0.0, 0.0)):
    """outcome and x with signal, const with every advantage 0 (per-group sums and signal proxy 0)."""
    per_group = {"outcome": np.array([0.1, 0.2, -0.05, 0.3]), "const": np.zeros(4), "x": np.array([0.2, 0.1, 0.0, 0.1])}
    signal = {"outcome": [1.0, 2.0, 1.0, 1.0], "const": list(const_signal), "x": [1.0, 1.0, 1.0, 1.0]}
    return fh.probe_result(per_group, {"outcome": 1000, "const": 1000, "x": 1200}, signal=signal)


def test_constant_reward_row_says_no_gradient_and_has_no_forecast_numbers():
    table = forecast_rewards(fh.synthetic_curve(), _probe(), n_draws=200).table.set_index("arm")
    const = table.loc["const"]
    assert const["verdict"] == _verdict(EQUAL)
    assert bool(const["no_signal"]) is True and const["method"] == "no_signal"
    for key in ("forecast_gain", "gain_probe", "gain_cost_only", "gain_signal_proxy", "effective_updates", "rho",
                "forecast_accuracy"):
        assert math.isnan(const[key]), key
    assert all(math.isnan(v) for v in const["gain_interval"])
    assert const["rho_raw"] == 0.0  # the raw ratio's exact 0 stays
    # the rewards with signal are forecast as before
    assert bool(table.loc["x", "no_signal"]) is False and bool(table.loc["outcome", "no_signal"]) is False
    assert table.loc["outcome", "verdict"] == "reference (grpo)"
    assert not table.loc["x", "verdict"].startswith("no gradient") and math.isfinite(table.loc["x", "forecast_gain"])


def test_zero_inner_products_with_signal_proxy_power_are_not_no_signal():
    """Per-group sums of exactly 0 with A != 0 (e.g. a zero reference direction) are a measurement: A^2 W > 0."""
    table = forecast_rewards(fh.synthetic_curve(), _probe(const_signal=(0.5, 0.0, 0.0, 0.0)), n_draws=200).table
    row = table.set_index("arm").loc["const"]
    assert bool(row["no_signal"]) is False and row["method"] == "probe" and math.isfinite(row["forecast_gain"])
    # rho 0: it is forecast not to train, but on 0 groups that contribute (of 4): no verdict rests on that interval
    assert row["verdict"].startswith("no verdict at 250k: rho rests on too few groups for its interval to carry a "
                                     f"verdict (under 5 groups contribute: see the note): {row['forecast_gain']:+.1f}")


def test_no_signal_reason_cases():
    flat = {"per_group": [0.0, 0.0], "signal_proxy_per_group": [0.0, 0.0], "valid_completions": 8}
    assert no_signal_reason([flat]) == EQUAL
    assert no_signal_reason([dict(flat, valid_completions=0)]) == MISSING
    assert no_signal_reason([dict(flat, reward_stats={"missing": 3})]) == (
        "every group's usable rewards are equal on this batch (the others are None/NaN), so every advantage is 0")
    assert no_signal_reason([flat, flat]) == ("every group's rewards are equal on all 2 probe batches, so every "
                                              "advantage is 0")
    assert no_signal_reason([flat, dict(flat, per_group=[0.0, 1e-9])]) is None  # signal in one batch: it trains
    # an older probe without signal-proxy sums: flat only when the reference's sums on the same alignment are not 0
    old = {"per_group": [0.0, 0.0]}
    assert no_signal_reason([old], [{"per_group": [0.1, 0.0]}]) == EQUAL
    assert no_signal_reason([old], [{"per_group": [0.0, 0.0]}]) is None
    assert no_signal_reason([old]) is None
    assert no_signal_reason([{"per_group": [None, 0.0], "signal_proxy_per_group": [0.0, 0.0]}]) is None


def test_probe_table_warns_once_per_silent_reward():
    result = _probe()
    result["config"].update(reference="heldout", precondition="adam", group=4)
    for r in result["rewards"]:
        r.update(interval=[0.0, 0.0], snr=0.0, predicted_gain_at_budget=0.0)
    result.update(batch={"mean_reward": 0.0, "truncation_rate": 0.0}, ledger={"generated_tokens": 10},
                  costs={"alignment_to_update_ratio": None}, warnings=[])
    assert no_signal_entries(result) == {"const": EQUAL}
    text = format_table(result)
    assert text.count(f"warning: reward 'const' gives no gradient ({EQUAL})") == 1
    assert "reward 'x' gives no gradient" not in text and "reward 'outcome' gives no gradient" not in text


def _table_result(rewards: list[dict], warnings: list[str]) -> dict:
    """A probe.json-like dict that format_table can print, with the given entries and warnings."""
    for r in rewards:
        r.update(inner_product=0.0, interval=[0.0, 0.0], snr=0.0, predicted_gain_per_update=0.0,
                 tokens_per_update=1000, predicted_gain_at_budget=0.0)
    return {"config": {"model": "tiny", "task": "chain_sum", "prompts": 4, "group": 4, "reference": "heldout",
                       "precondition": "adam", "lr": 1e-4, "budget_tokens": 1000, "loss_type": "grpo"},
            "rewards": rewards, "batch": {"mean_reward": 0.0, "truncation_rate": 0.0},
            "ledger": {"generated_tokens": 10}, "costs": {"alignment_to_update_ratio": None}, "warnings": warnings}


def test_probe_table_warns_once_for_a_reward_that_diagnose_already_named():
    """diagnose's line names the reward; the entries of its other loss types (REWARD@LOSS) add no second line."""
    batch = type("Batch", (), {"num_prompts": 4, "num_rows": 16, "truncated": torch.zeros(16, dtype=torch.bool),
                               "completion_mask": torch.ones(16, 3, dtype=torch.bool)})()
    warnings = diagnose(batch, {"norm": 1.0}, {"outcome": {"stats": {"zero_variance_groups": 4, "groups": 4}}})
    assert len(warnings) == 1 and warnings[0].startswith("reward 'outcome': every group")
    flat = {"per_group": [0.0] * 4, "signal_proxy_per_group": [0.0] * 4, "valid_completions": 16,
            "no_signal": True, "no_signal_reason": EQUAL}
    rewards = [dict(flat, name="outcome", reward="outcome"), dict(flat, name="outcome@dr_grpo", reward="outcome"),
               {"name": "x", "reward": "x", "per_group": [0.1] * 4, "no_signal": False, "no_signal_reason": None}]
    lines = [line for line in format_table(_table_result(rewards, warnings)).splitlines() if "'outcome" in line]
    assert lines == [f"warning: {warnings[0]}"]


def test_probe_table_reads_the_recorded_reason_and_falls_back_for_an_older_probe():
    recorded = {"name": "c", "reward": "c", "per_group": [0.0] * 4, "signal_proxy_per_group": [0.0] * 4,
                "no_signal": True, "no_signal_reason": MISSING}  # recorded: not recomputed from the numbers
    text = format_table(_table_result([recorded], []))
    assert text.count("warning: reward 'c' gives no gradient") == 1 and f"({MISSING})" in text
    older = {"name": "c", "per_group": [0.0] * 4, "signal_proxy_per_group": [0.0] * 4}  # no no_signal_reason
    text = format_table(_table_result([older], []))
    assert text.count(f"warning: reward 'c' gives no gradient ({EQUAL})") == 1


def test_run_probe_records_no_signal_in_probe_json(tmp_path):
    """run_probe, as gradprobe study's worker calls it (no CLI around it), writes no_signal into every entry."""
    config = ProbeConfig.from_dict(dict(model="tiny-qwen2", task="chain_sum", rewards=("outcome",), prompts=2, group=4,
                                        heldout_prompts=2, heldout_group=2, n_bootstrap=20,
                                        sampling=SamplingConfig(max_new_tokens=8),
                                        progress=False))
    run_probe(config, out=tmp_path, extra_rewards={"const": sequence_reward(_const, name="const")})
    entries = {r["name"]: r for r in json.loads((tmp_path / "probe.json").read_text())["rewards"]}
    assert entries["const"]["no_signal"] is True and entries["const"]["no_signal_reason"] == EQUAL
    outcome = entries["outcome"]
    assert outcome["no_signal"] is (outcome["no_signal_reason"] is not None)
    assert outcome["no_signal_reason"] == no_signal_reason([outcome])


def _const(prompts, completions, **kw):
    return [0.5] * len(completions)


def _nothing(prompts, completions, **kw):
    return [None] * len(completions)


def _alternating(prompts, completions, **kw):  # 0, 1, 0, 1 within every group: advantages +-1
    return [float(i % 2) for i in range(len(completions))]


def test_cli_probe_of_constant_and_none_rewards(tmp_path, capsys, monkeypatch):
    get_reward("outcome")  # the built-in rewards are registered before ours
    for name, fn in (("const", _const), ("nothing", _nothing), ("alternating", _alternating)):
        monkeypatch.setitem(REWARDS, name, sequence_reward(fn, name=name))
    out = tmp_path / "p"
    rc = main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum",
               "--rewards", "outcome,const,nothing,alternating",
               "--prompts", "2", "--group", "4", "--heldout-prompts", "2", "--heldout-group", "2",
               "--max-new-tokens", "8", "--bootstrap", "50", "--out", str(out), "--no-progress",
               "--reference-curve", str(default_curve_path())])
    printed = capsys.readouterr().out
    assert rc == 0
    lines = printed.splitlines()
    const = next(line for line in lines if line.startswith("const: "))
    nothing = next(line for line in lines if line.startswith("nothing: "))
    assert const.startswith(f"const: {_verdict(EQUAL)}") and "no detectable difference" not in const
    assert nothing.startswith(f"nothing: {_verdict(MISSING)}") and "no detectable difference" not in nothing
    assert "check the reward function" in nothing
    assert printed.count("warning: reward 'nothing' gives no gradient") == 1
    saved = json.loads((out / "probe.json").read_text())
    rows = {r["arm"]: r for r in saved["forecast"]["rows"]}
    for arm, reason in (("const", EQUAL), ("nothing", MISSING)):
        assert rows[arm]["no_signal"] is True and rows[arm]["verdict"] == _verdict(reason)
        assert rows[arm]["forecast_gain"] is None and rows[arm]["gain_interval"] == [None, None]
    assert rows["alternating"]["no_signal"] is False and not rows["alternating"]["verdict"].startswith("no gradient")
    entries = {r["name"]: r for r in saved["rewards"]}
    assert entries["const"]["no_signal"] is True and entries["const"]["no_signal_reason"] == EQUAL
    assert entries["nothing"]["no_signal"] is True and entries["nothing"]["no_signal_reason"] == MISSING
    assert entries["alternating"]["no_signal"] is False and entries["alternating"]["no_signal_reason"] is None
