"""A probe folder keeps non-finite numbers: :func:`gradprobe.probe.output.write_probe_files` writes probe.json
and tokens.jsonl as strict JSON in gradprobe's one encoding (NaN -> null, +inf -> "inf", -inf -> "-inf";
:func:`gradprobe.outputs.json_safe`), and :func:`gradprobe.load_probe` reads them back as NaN and +-inf."""

from __future__ import annotations

import json
import math

import pytest
import torch

import gradprobe
import probe_helpers as h
from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.probe.output import write_probe_files


def _entry(name, inner_product, snr, gain_at_budget):
    return {"name": name, "reward": name, "inner_product": inner_product, "interval": [-1.0, math.inf], "snr": snr,
            "predicted_gain_per_update": 100 * 1e-4 * inner_product, "tokens_per_update": 1000,
            "predicted_gain_at_budget": gain_at_budget, "per_group": [inner_product / 2, inner_product / 2]}


def _strict(text: str):
    """JSON without the non-standard NaN / Infinity tokens (json.loads accepts them by default)."""
    def refuse(token):
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_probe_json_with_inf_and_nan_reads_back_as_inf_and_nan(tmp_path):
    batch = h.make_batch(num_prompts=2, group_size=2, scores=[1.0, float("nan"), 0.0, 1.0])
    advantages = {"outcome": h.random_advantages(batch, seed=1), "mc_value": h.random_advantages(batch, seed=2)}
    alignment = torch.randn(batch.completion_mask.shape, generator=torch.Generator().manual_seed(0),
                            dtype=torch.float64) * batch.completion_mask
    result = {"config": {"model": "tiny", "loss_type": "grpo"},
              "rewards": [_entry("outcome", 0.25, math.inf, -math.inf), _entry("mc_value", 0.5, float("nan"), 7.5)],
              "batch": {"mean_reward": float("nan")}}

    write_probe_files(tmp_path, result, batch, alignment, advantages, char_tokenizer())

    assert sorted(p.name for p in tmp_path.iterdir()) == ["alignment.safetensors", "probe.json", "tokens.jsonl"]
    raw = _strict((tmp_path / "probe.json").read_text())
    assert raw["rewards"][0]["snr"] == "inf" and raw["rewards"][0]["predicted_gain_at_budget"] == "-inf"
    assert raw["rewards"][1]["snr"] is None and raw["batch"]["mean_reward"] is None  # (null inner_product: refused)
    rows = [_strict(line) for line in (tmp_path / "tokens.jsonl").read_text().splitlines()]
    assert [r["score"] for r in rows] == [1.0, None, 0.0, 1.0]

    probe = gradprobe.load_probe(tmp_path)
    table = probe.table
    assert table.loc["outcome", "snr"] == math.inf and table.loc["outcome", "gain_at_budget"] == -math.inf
    assert table.loc["outcome", "inner_product"] == 0.25 and table.loc["outcome", "inner_product_high"] == math.inf
    assert math.isnan(table.loc["mc_value", "snr"]) and table.loc["mc_value", "gain_at_budget"] == 7.5
    scores = probe.tokens().groupby("completion")["score"].first()
    assert scores[0] == 1.0 and math.isnan(scores[1]) and scores[2] == 0.0 and scores[3] == 1.0
    assert torch.equal(probe.alignment, alignment)
    assert torch.equal(probe.advantages("mc_value"), advantages["mc_value"])


def test_json_float_refuses_a_string_that_is_no_number():
    from gradprobe.outputs import json_float

    assert json_float("inf") == math.inf and json_float("-inf") == -math.inf and math.isnan(json_float(None))
    with pytest.raises(ValueError, match="not a number of gradprobe's JSON encoding"):
        json_float("n/a")
