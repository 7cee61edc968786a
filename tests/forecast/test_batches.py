"""Several probe batches (gradprobe.probe.batches) on a real tiny model: disjoint prompts, ONE reference
direction computed once, pooled estimates; the signal proxy's token statistics match the loss's."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.forecast import forecast_rewards
from gradprobe.forecast.curves import default_curve_path, ReferenceCurve
from gradprobe.probe.batches import run_probe_batches
from gradprobe.probe.estimate import token_probability_stats
from gradprobe.probe.run import ProbeConfig

from helpers_tasks import ScoredTask
import probe_helpers as ph

single_thread = ph.single_thread


def _config(**kw):
    base = dict(model="tiny-qwen2", task="digit3", rewards=("outcome", "mc_value"), prompts=3, group=4,
                heldout_prompts=3, heldout_group=4, sampling=SamplingConfig(max_new_tokens=24, temperature=1.0),
                mc=MCConfig(continuations=2, max_steps=2), n_bootstrap=100, lr=1e-4, budget_tokens=50_000,
                progress=False, second_moment_minibatches=2)
    base.update(kw)
    return ProbeConfig.from_dict(base)


def test_token_statistics_are_the_losss_probabilities_in_float64():
    from gradprobe.logprobs import position_ids_from_mask, token_logprobs

    model = ph.tiny_model()
    batch = ph.make_batch(num_prompts=3, group_size=2, temperature=0.7, vocab_size=int(model.config.vocab_size))
    pi, sq = token_probability_stats(model, batch, micro_batch_size=2)
    with torch.no_grad():
        logp = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.prompt_length, temperature=0.7)
        t = batch.completion_mask.shape[1]
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=position_ids_from_mask(batch.attention_mask), use_cache=False).logits
        probs = (logits[:, -t - 1:-1].double() / 0.7).softmax(-1)
    m = batch.completion_mask
    torch.testing.assert_close(pi[m], logp.double().exp()[m], rtol=1e-12, atol=0)
    torch.testing.assert_close(sq[m], (probs ** 2).sum(-1)[m], rtol=1e-12, atol=0)
    pi1, sq1 = token_probability_stats(model, batch, micro_batch_size=6)  # micro-batching changes nothing
    torch.testing.assert_close(pi1[m], pi[m], rtol=1e-12, atol=0)


@pytest.fixture(scope="module")
def two_batches(tmp_path_factory):
    import gradprobe.probe.direction as probe_pkg  # where the probe looks heldout_reference up

    calls = []
    real = probe_pkg.heldout_reference

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    probe_pkg.heldout_reference = counting
    try:
        out = tmp_path_factory.mktemp("batches")
        result = run_probe_batches(_config(), batches=2, out=out, task=ScoredTask())
    finally:
        probe_pkg.heldout_reference = real
    return result, out, len(calls)


def test_batches_use_disjoint_prompts_and_one_reference(two_batches):
    result, out, reference_calls = two_batches
    assert reference_calls == 1  # computed by batch 0, reused by batch 1
    b0, b1 = result["batches"]
    assert set(b0["prompt_ids"]).isdisjoint(b1["prompt_ids"]) and len(b0["prompt_ids"]) == 3
    assert (b0["reference"], b1["reference"]) == ({"draw": 0, "reused": False}, {"draw": 0, "reused": True})
    saved = [json.loads((out / f"batch_{k}" / "probe.json").read_text()) for k in (0, 1)]
    assert saved[0]["reference"]["norm"] == saved[1]["reference"]["norm"] == result["reference"]["norm"]
    assert saved[1]["reference"]["ledger"]["generated_tokens"]["eval"] == 0  # no second held-out generation
    assert json.loads((out / "probe.json").read_text())["config"]["probe_batches"] == 2
    assert (out / "batch_1" / "alignment.safetensors").is_file()


def test_pooled_entries_are_the_batch_means(two_batches):
    result, _, _ = two_batches
    for k, entry in enumerate(result["rewards"]):
        per = [np.array(b["rewards"][k]["per_group"]) for b in result["batches"]]
        assert entry["inner_product"] == pytest.approx(np.mean([p.sum() for p in per]), rel=1e-12, abs=1e-300)
        assert sum(entry["per_group"]) == pytest.approx(entry["inner_product"], rel=1e-9, abs=1e-12)
        assert entry["predicted_gain_per_update"] == pytest.approx(100 * 1e-4 * entry["inner_product"], rel=1e-12,
                                                                   abs=1e-300)
        toks = [b["rewards"][k]["tokens_per_update"] for b in result["batches"]]
        assert entry["tokens_per_update"] == round(np.mean(toks))
        sp = [b["rewards"][k]["signal_proxy"] for b in result["batches"]]
        assert entry["signal_proxy"] == pytest.approx(np.mean(sp), rel=1e-12, abs=1e-300) and min(sp) >= 0
    per = [b["batch"] for b in result["batches"]]  # the table's batch line describes every batch, not batch 0
    w = np.array([s["completions"] for s in per], dtype=float)
    for key in ("mean_reward", "truncation_rate", "mean_completion_tokens", "format_rate"):
        assert result["batch"][key] == pytest.approx(float(np.dot(w, [s[key] for s in per]) / w.sum()), rel=1e-12)
    assert result["batch"]["completions"] == sum(s["completions"] for s in per) == 2 * 3 * 4
    assert result["batch"]["generated_tokens"] == sum(s["generated_tokens"] for s in per)
    assert (result["batch"]["prompts"], result["batch"]["prompts_total"], result["batch"]["probe_batches"]) == (3, 6, 2)
    gen = [b["ledger"]["generated_tokens"]["rollout"] for b in result["batches"]]
    assert result["ledger"]["generated_tokens"]["rollout"] == sum(gen)
    mc = result["rewards"][1]
    assert mc["name"] == "mc_value" and mc["tokens_per_update"] > result["rewards"][0]["tokens_per_update"]


def test_the_forecaster_reads_every_batch(two_batches):
    result, _, _ = two_batches
    curve = ReferenceCurve.load(default_curve_path())
    res = forecast_rewards(curve, result, budget_tokens=50_000)
    t = res.table.set_index("arm")
    b = result["batches"]
    num = sum(sum(x["rewards"][1]["per_group"]) for x in b)
    den = sum(sum(x["rewards"][0]["per_group"]) for x in b)
    assert result["reference"]["norm"] > 0 and num != 0 and den != 0  # a real signal, whatever its sign
    if den > 0:
        assert t.loc["mc_value", "rho_raw"] == pytest.approx(num / den, rel=1e-12)
    else:
        assert np.isnan(t.loc["mc_value", "rho_raw"]) and t.loc["mc_value", "rho"] == 1.0
    assert np.isfinite(t.loc["mc_value", "rho_signal_proxy"])
    assert any("one reference draw shared" in n or "undefined" in n for n in res.notes + [t.loc["mc_value", "note"]])


def test_one_batch_is_run_probe_and_bad_counts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="--probe-batches"):
        run_probe_batches(_config(), batches=0)
    res = run_probe_batches(_config(rewards=("outcome",), prompts=2, heldout_prompts=2), batches=1, out=tmp_path / "one",
                            task=ScoredTask())
    assert "batches" not in res and res["reference"]["draw"] == 0 and (tmp_path / "one" / "probe.json").is_file()
    assert res["rewards"][0]["signal_proxy_per_group"] and len(res["rewards"][0]["signal_proxy_per_group"]) == 2


def test_cli_refuses_a_bad_curve_before_any_compute(tmp_path, capsys, monkeypatch):
    from gradprobe.cli import main
    from gradprobe.rollout import collect

    def no_generation(*a, **k):
        raise AssertionError("generation started")

    monkeypatch.setattr(collect, "collect_rollouts", no_generation)
    rc = main(["probe", "--model", "tiny-qwen2", "--no-progress", "--reference-curve", str(tmp_path / "none.json"),
               "--out", str(tmp_path / "o")])
    assert rc == 2 and "none.json" in capsys.readouterr().err and not (tmp_path / "o").exists()
    rc = main(["probe", "--model", "tiny-qwen2", "--no-progress", "--probe-batches", "0", "--out", str(tmp_path / "o")])
    assert rc == 2 and "--probe-batches" in capsys.readouterr().err
