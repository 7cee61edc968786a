"""The probe of a guided arm (``--guidance``, gradprobe.probe.guided): its estimate is the first-order gain of
the guided update (importance-weighted, sampled with hints), its costs and records, and its refusals."""

from __future__ import annotations

import json
from collections import defaultdict, deque

import pytest
import torch

import probe_helpers as h
from gradprobe.cli import main
from gradprobe.config import SamplingConfig
from gradprobe.grpo.step import UpdateConfig, loss_and_backward
from gradprobe.models import load_policy
from gradprobe.probe import batches as batches_mod
from gradprobe.probe import run as probe_run
from gradprobe.probe import save_direction
from gradprobe.probe_settings import ProbeConfig
from gradprobe.rollout import HFSampler
from gradprobe.rollout.guided import GuidanceError, guided_logprobs
from gradprobe.tasks import encode_prompt
from gradprobe.study.probe_plan import probe_settings
from gradprobe.training.plan import PlanError, parse_plan

from helpers_tasks import ScoredTask

single_thread = h.single_thread
LOSS_TYPES = ("grpo", "gspo", "dapo", "dr_grpo")


@pytest.fixture(scope="module")
def policy64():
    """tiny-qwen2 (its chat template keeps the whole prompt, hint included) in float64, RMSNorm exact."""
    policy = load_policy("tiny-qwen2", dtype="float64")
    h.patch_rms_norm(policy.model)
    return policy


@pytest.fixture(scope="module")
def direction(policy64, tmp_path_factory):
    """u: a saved random direction (``reference = direction:PATH``, no preconditioner: u = v)."""
    v = h.random_direction(policy64.model, seed=3)
    path = tmp_path_factory.mktemp("dir") / "u.safetensors"
    save_direction(v, path)
    return path, v


def _config(path, guidance=None, **kw):
    return ProbeConfig.from_dict(dict(
        model="tiny-qwen2", task="chain_sum", rewards=["outcome"], prompts=3, group=4, reference=f"direction:{path}",
        precondition="none", max_new_tokens=10, temperature=1.5, n_bootstrap=20, progress=False, dtype="float64",
        loss_types=LOSS_TYPES[1:], micro_batch_size=4, guidance=guidance, **kw))


def _spy(monkeypatch):
    """Capture the probe batch on the model's device and every reward's (unweighted) advantages."""
    seen = {}
    real = probe_run.reward_advantages

    def spy(*args, **kwargs):
        run, adv, outputs = real(*args, **kwargs)
        seen.update(batch=run.batch, advantages=adv)
        return run, adv, outputs

    monkeypatch.setattr(probe_run, "reward_advantages", spy)
    return seen


def _by_name(result):
    return {e["name"]: e for e in result["rewards"]}


# ----------------------------------------------------------------------------- (a) the estimate is the guided update's

@pytest.mark.parametrize("cap", [2.0, 1.002])
def test_guided_estimate_is_the_directional_derivative_of_the_guided_loss(policy64, direction, monkeypatch, cap):
    path, u = direction
    seen = _spy(monkeypatch)
    cfg = _config(path, {"fraction": 0.5, "prefix": 1.0, "cap": cap})
    result = probe_run.run_probe(cfg, policy=policy64, task=ScoredTask("digit3"))
    batch, adv = seen["batch"], seen["advantages"]["outcome"]
    model = policy64.model
    assert batch.metadata["guidance"]["guided_rows"] == [2, 3, 6, 7, 10, 11]
    assert adv.abs().sum() > 0  # mixed groups: the advantages are not all zero
    # the update's "sampler" log-probabilities: the guided rows scored under the hint, as training does
    sampler_logp = guided_logprobs(model, batch, attention=None)
    entries = _by_name(result)
    g = entries["outcome"]["guidance"]
    assert g["guided_rows"] == 6 and g["hint_tokens"] > 0 and g["guided_tokens"] > 0
    assert g["config"] == {"fraction": 0.5, "prefix": 1.0, "cap": cap}
    assert g["guided_weight_mean"] != 1.0 and g["is_weight"]["cap"] == cap
    if cap < 2:
        assert 0 < g["guided_capped_fraction"] < 1  # some weights truncated at C, some not
    for lt in LOSS_TYPES:
        model.zero_grad(set_to_none=True)
        config = UpdateConfig(loss_type=lt, micro_batch_size=4, importance_sampling="tis", is_cap=cap, attention=None,
                              max_completion_length=10)
        loss_and_backward(model, batch, adv, config, sampler_logp=sampler_logp)
        # d/d eps loss(theta + eps u) = <grad loss, u>; the probe's <g_R, u> is the ascent direction's: minus it
        derivative = sum(float((p.grad.double() * u[name].double()).sum()) for name, p in model.named_parameters()
                         if p.grad is not None)
        model.zero_grad(set_to_none=True)
        got = entries["outcome" if lt == "grpo" else f"outcome@{lt}"]["inner_product"]
        assert got == pytest.approx(-derivative, rel=1e-10, abs=0), lt
        # without the weights the estimate would be another number (the test can fail)
        model.zero_grad(set_to_none=True)
        loss_and_backward(model, batch, adv, UpdateConfig(loss_type=lt, micro_batch_size=4, attention=None,
                                                          max_completion_length=10))
        plain = sum(float((p.grad.double() * u[name].double()).sum()) for name, p in model.named_parameters()
                    if p.grad is not None)
        model.zero_grad(set_to_none=True)
        assert abs(plain - derivative) > 1e-6 * abs(derivative), lt


def test_guided_costs_and_records(policy64, direction, tmp_path):
    path, _ = direction
    out = tmp_path / "probe"
    result = probe_run.run_probe(_config(path, {"fraction": 0.5, "prefix": 1.0}), policy=policy64,
                                 task=ScoredTask("digit3"), out=out)
    e = _by_name(result)["outcome"]
    g = e["guidance"]
    # completions are the update's rollout tokens; hint tokens are charged as training charges them (FLOPs)
    assert e["tokens_per_update"] == result["batch"]["generated_tokens"] == result["ledger"]["generated_tokens"]["rollout"]
    assert g["hint_tokens"] > 0 and result["ledger"]["flops"]["training"] > 0  # the hinted forward: training work
    costs = result["costs"]
    assert costs["guided_scoring_seconds"] > 0
    want = (costs["rollout_seconds"] + costs["update_forward_backward_seconds"] + costs["guided_scoring_seconds"]
            + e["reward_own_seconds"])  # the reward's own compute, charged as training charges it
    assert e["seconds_per_update"] == pytest.approx(want, rel=1e-12)
    assert result["config"]["guidance"] == {"fraction": 0.5, "prefix": 1.0, "cap": 2.0}
    assert f"guided arm (fraction 0.5, prefix 1, cap 2): 6 guided completions, {g['hint_tokens']:,} hint tokens" \
        in probe_run.format_table(result)
    saved = json.loads((out / "probe.json").read_text())
    assert ProbeConfig.from_dict(saved["config"]).guidance.fraction == 0.5
    from safetensors.torch import load_file

    w = load_file(str(out / "alignment.safetensors"))["importance_weights"]
    mask = w.new_zeros(w.shape, dtype=torch.bool)
    mask[:] = load_file(str(out / "alignment.safetensors"))["completion_mask"].bool()
    assert float(w[mask].mean()) == pytest.approx(g["is_weight"]["mean"], rel=1e-12)
    assert float(w.max()) <= 2.0 and torch.equal(w[[0, 1, 4, 5, 8, 9]], torch.ones_like(w[[0, 1, 4, 5, 8, 9]]))


# ----------------------------------------------------------------------------- (b) no guided row, empty hints

def test_fraction_zero_gives_the_unguided_probe(policy64, direction):
    path, _ = direction
    plain = probe_run.run_probe(_config(path), policy=policy64, task=ScoredTask("digit3"))
    guided = probe_run.run_probe(_config(path, {"fraction": 0.1, "prefix": 1.0}), policy=policy64,
                                 task=ScoredTask("digit3"))  # k = floor(0.1 * 4 + 1/2) = 0
    assert "guidance" not in plain["rewards"][0] and plain["config"]["guidance"] is None
    for a, b in zip(plain["rewards"], guided["rewards"]):
        assert b["guidance"]["guided_rows"] == 0 and b["guidance"]["is_weight"]["mean"] == 1.0
        for key in ("name", "inner_product", "per_group", "interval", "snr", "tokens_per_update", "signal_proxy"):
            assert a[key] == b[key], key


class ReplaySampler:
    """Returns the same completions of a prompt however they are asked for: sample j of a prompt is its j-th
    pre-drawn one, whether G come in one call (unguided) or G - k then k in two (guided, empty hints)."""

    def __init__(self, drawn: dict):
        self.queues = defaultdict(deque, {k: deque(v) for k, v in drawn.items()})

    def sample(self, prompts, *, num_samples, sampling, max_new_tokens=None, desc=None, greedy=False):
        return [self.queues[tuple(p)].popleft() for p in prompts for _ in range(num_samples)]


def test_empty_hints_give_the_unguided_probe(policy64, direction):
    path, _ = direction
    cfg = _config(path)
    task = ScoredTask("digit3")
    prompts = [encode_prompt(policy64.tokenizer, p.question) for p in task.problems("train", 3, seed=0)]
    samples = HFSampler(policy64, seed=0).sample(prompts, num_samples=4, sampling=SamplingConfig(
        max_new_tokens=10, temperature=1.5))
    drawn = {tuple(p): samples[i * 4:(i + 1) * 4] for i, p in enumerate(prompts)}
    plain = probe_run.run_probe(cfg, policy=policy64, task=task, sampler=ReplaySampler(drawn))
    guided = probe_run.run_probe(_config(path, {"fraction": 0.5, "prefix": 0.0}), policy=policy64, task=task,
                                 sampler=ReplaySampler(drawn))
    for a, b in zip(plain["rewards"], guided["rewards"]):
        g = b["guidance"]
        assert g["guided_rows"] == 6 and g["empty_hint_rows"] == 6 and g["hint_tokens"] == 0
        assert g["is_weight"]["mean"] == 1.0 and g["guided_weight_mean"] is None  # no hinted context: weight 1
        assert a["inner_product"] != 0
        for key in ("name", "inner_product", "per_group", "interval", "snr", "tokens_per_update", "signal_proxy"):
            assert a[key] == b[key], key


# ----------------------------------------------------------------------------- (c) refusals

class NoSampler:
    def sample(self, *args, **kwargs):
        raise AssertionError("the probe sampled before refusing")


def test_a_template_that_drops_the_hint_is_refused_before_any_rollout(policy64, direction, tmp_path):
    import copy

    from helpers_templates import hint_dropping_tokenizer

    path, _ = direction
    policy = copy.copy(policy64)
    policy.tokenizer = hint_dropping_tokenizer()  # renders only the first paragraph's arithmetic expression
    out = tmp_path / "refused"
    with pytest.raises(GuidanceError, match=r"drops the hint.*remove --guidance"):
        probe_run.run_probe(_config(path, {"fraction": 0.5, "prefix": 0.5}), policy=policy,
                            task=ScoredTask("digit3"), sampler=NoSampler(), out=out)
    assert not out.exists()  # nothing half-written
    # fraction 0: nothing is sampled with a hint, nothing to refuse (as training's collection)
    with pytest.raises(AssertionError, match="sampled"):
        probe_run.run_probe(_config(path, {"fraction": 0.0, "prefix": 0.5}), policy=policy,
                            task=ScoredTask("digit3"), sampler=NoSampler())


def test_a_task_without_reference_solutions_is_refused_naming_it(tmp_path):
    cfg = ProbeConfig.from_dict(dict(task="basic_arithmetic", guidance={"fraction": 0.5, "prefix": 0.5}))
    out = tmp_path / "refused"
    with pytest.raises(GuidanceError, match=r"task 'basic_arithmetic' has no reference solution.*chain_sum.*"
                                            r"remove --guidance"):
        probe_run.run_probe(cfg, out=out, sampler=NoSampler())
    assert not out.exists()


@pytest.mark.parametrize("value,match", [
    ({"fraction": 1.5, "prefix": 0.5}, r"guidance\.fraction must lie in \[0, 1\].*got 1\.5.*--guidance"),
    ({"fraction": 0.5, "prefix": -0.1}, r"guidance\.prefix must lie in \[0, 1\].*--guidance"),
    ({"cap": 0}, r"guidance\.cap .* must be > 0.*--guidance"),
    ({"share": 0.5}, r"unknown key guidance\.'share'; valid keys: fraction, prefix, cap.*--guidance"),
    ("fraction=0.5,prefix", r"'prefix' is not KEY=NUMBER.*--guidance"),
])
def test_bad_guidance_values_are_refused_naming_key_and_flag(value, match):
    with pytest.raises(GuidanceError, match=match):
        ProbeConfig.from_dict({"guidance": value})


def test_the_command_line_refuses_bad_guidance_before_any_compute(capsys, tmp_path):
    out = tmp_path / "cli"
    assert main(["probe", "--guidance", "fraction=2,prefix=0.5", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "guidance.fraction must lie in [0, 1]" in err and "--guidance" in err and not out.exists()
    assert main(["probe", "--guidance", "fraction=0.5,prefix=0.5", "--task", "basic_arithmetic", "--out", str(out),
                 "--no-progress"]) == 2
    assert "task 'basic_arithmetic' has no reference solution" in capsys.readouterr().err and not out.exists()


def test_a_study_probe_table_refuses_guidance():
    plan = parse_plan('seeds = [0]\n[model]\nname = "tiny-qwen2"\n[task]\nname = "chain_sum"\n[budget]\nupdates = 1\n'
                      '[arms.grpo]\nreward = "outcome"\n[arms.guided]\nreward = "outcome"\n'
                      'guidance = {fraction = 0.5, prefix = 0.5}\n')
    assert "guidance" not in probe_settings(plan)
    with pytest.raises(PlanError, match=r"\[probe\] guidance: the study's probe is shared by every arm.*--guidance"):
        probe_settings(plan, {"guidance": {"fraction": 0.5, "prefix": 0.5}})


# ----------------------------------------------------------------------------- (d) old configs

def test_an_old_probe_json_config_loads_without_guidance():
    from pathlib import Path

    saved = json.loads((Path(__file__).resolve().parents[2] / "data/study_tiny_losses/probe/probe.json").read_text())
    old = saved["config"]
    assert "guidance" not in old
    config = ProbeConfig.from_dict(old)
    assert config.guidance is None
    new = config.to_dict()
    assert list(new)[-1] == "guidance" and new["guidance"] is None
    assert {k: v for k, v in new.items() if k != "guidance"} == {k: v for k, v in old.items() if k != "probe_batches"}
    guided = config.with_settings(guidance="fraction=0.25,prefix=0.5,cap=3")
    assert guided.to_dict()["guidance"] == {"fraction": 0.25, "prefix": 0.5, "cap": 3.0}
    assert ProbeConfig.from_dict(guided.to_dict()) == guided == ProbeConfig.from_dict(guided.to_nested())


# ----------------------------------------------------------------------------- (e) several probe batches

def _weighted(records, key, weight, sub=None):
    """sum_k n_k m_k / sum_k n_k over the batches whose mean m_k is not None (None when none is)."""
    vals = [(r[weight], r[key] if sub is None else r[key][sub]) for r in records]
    vals = [(n, m) for n, m in vals if m is not None]
    total = sum(n for n, _ in vals)
    return sum(n * m for n, m in vals) / total if total else None


def test_two_guided_batches_pool_their_records_and_estimates(policy64, direction, tmp_path):
    path, _ = direction
    # 16 tokens: the batches' completions differ in length (token weights matter); cap 1.02: some weights truncated
    cfg = _config(path, {"fraction": 0.5, "prefix": 1.0, "cap": 1.02}).with_settings(max_new_tokens=16)
    task = ScoredTask("digit3")
    out = tmp_path / "two"
    pooled = batches_mod.run_probe_batches(cfg, batches=2, out=out, policy=policy64, task=task)
    # each batch is the single-batch guided probe of its prompt slice with seed + k (run here on its own)
    pool = batches_mod._distinct_train_prompts(task, 6, 0)
    singles = [probe_run.run_probe(cfg.with_settings(seed=k), policy=policy64,
                                   task=batches_mod._TrainSlice(task, pool[3 * k: 3 * k + 3])) for k in range(2)]
    files = [json.loads((out / f"batch_{k}" / "probe.json").read_text()) for k in range(2)]
    for saved, single in zip(files, singles):
        assert _by_name(saved)["outcome"]["guidance"] == _by_name(single)["outcome"]["guidance"]
        assert [e["inner_product"] for e in saved["rewards"]] == [e["inner_product"] for e in single["rewards"]]
    recs = [_by_name(s)["outcome"]["guidance"] for s in singles]
    # the two batches differ (pooling is not a copy of batch 0)
    for key in ("guided_weight_mean", "guided_reward_mean", "unguided_reward_mean", "completion_tokens",
                "guided_tokens", "guided_capped_fraction"):
        assert recs[0][key] != recs[1][key], key
    for key, sub in (("is_weight", "min"), ("is_weight", "max"), ("is_weight", "mean"), ("is_weight", "capped_fraction"),
                     ("logp_shift", "max_abs_diff"), ("logp_shift", "mean_abs_diff"), ("logp_shift", "kl_k1"),
                     ("logp_shift", "kl_k3")):
        assert recs[0][key][sub] != recs[1][key][sub], (key, sub)
    rows = 3 * 4  # prompts x group per batch
    want = {"config": {"fraction": 0.5, "prefix": 1.0, "cap": 1.02}}
    for key in ("guided_rows", "empty_hint_rows", "hint_tokens", "completion_tokens", "guided_tokens"):
        want[key] = recs[0][key] + recs[1][key]
    for r in recs:
        r["unguided_rows"] = rows - r["guided_rows"]
    want["guided_reward_mean"] = _weighted(recs, "guided_reward_mean", "guided_rows")
    want["unguided_reward_mean"] = _weighted(recs, "unguided_reward_mean", "unguided_rows")
    want["is_weight"] = {"mean": _weighted(recs, "is_weight", "completion_tokens", "mean"),
                         "min": min(r["is_weight"]["min"] for r in recs),
                         "max": max(r["is_weight"]["max"] for r in recs),
                         "capped_fraction": _weighted(recs, "is_weight", "completion_tokens", "capped_fraction"),
                         "cap": 1.02}
    shifts = [r["logp_shift"] for r in recs]
    want["logp_shift"] = {"max_abs_diff": max(s["max_abs_diff"] for s in shifts),
                          **{key: _weighted(shifts, key, "tokens") for key in ("mean_abs_diff", "kl_k1", "kl_k3")},
                          "tokens": shifts[0]["tokens"] + shifts[1]["tokens"]}
    want["guided_weight_mean"] = _weighted(recs, "guided_weight_mean", "guided_tokens")
    want["guided_capped_fraction"] = _weighted(recs, "guided_capped_fraction", "guided_tokens")
    assert want["guided_rows"] == 12 and want["logp_shift"]["tokens"] == want["guided_tokens"] > 0
    assert 0 < want["is_weight"]["capped_fraction"] < want["guided_capped_fraction"] < 1
    for entry in pooled["rewards"]:
        g = entry["guidance"]
        assert set(g) == set(want), entry["name"]
        for key, value in want.items():
            if isinstance(value, dict):
                assert set(g[key]) == set(value), key
                for sub, v in value.items():
                    assert g[key][sub] == pytest.approx(v, rel=1e-12, abs=0), (key, sub)
            else:
                assert g[key] == pytest.approx(value, rel=1e-12, abs=0), key
    # each reward's pooled estimate: the unguided multi-batch combination of the batches' guided estimates
    assert [b["seed"] for b in pooled["batches"]] == [0, 1]
    for j, entry in enumerate(pooled["rewards"]):
        per = [s["rewards"][j] for s in singles]
        assert [b["rewards"][j]["inner_product"] for b in pooled["batches"]] == [e["inner_product"] for e in per]
        assert entry["inner_product"] == pytest.approx(sum(sum(e["per_group"]) for e in per) / 2, rel=1e-12)
        assert entry["per_group"] == pytest.approx([x / 2 for e in per for x in e["per_group"]], rel=1e-12)
        assert entry["tokens_per_update"] == round((per[0]["tokens_per_update"] + per[1]["tokens_per_update"]) / 2)
        assert entry["predicted_gain_per_update"] == pytest.approx(100 * cfg.update.lr * entry["inner_product"],
                                                                   rel=1e-12)
        secs = [f["rewards"][j]["seconds_per_update"] for f in files]  # wall-clock: the batches' own
        assert secs[0] > 0 and entry["seconds_per_update"] == pytest.approx((secs[0] + secs[1]) / 2, rel=1e-12)
    saved = json.loads((out / "probe.json").read_text())
    assert saved["config"]["guidance"] == want["config"] and saved["config"]["probe_batches"] == 2
    assert _by_name(saved)["outcome"]["guidance"]["guided_rows"] == 12


def test_two_batches_with_empty_hints_give_the_two_batch_unguided_probe(policy64, direction):
    path, _ = direction
    task = ScoredTask("digit3")
    pool = batches_mod._distinct_train_prompts(task, 6, 0)
    prompts = [encode_prompt(policy64.tokenizer, p.question) for p in pool]
    samples = HFSampler(policy64, seed=0).sample(prompts, num_samples=4, sampling=SamplingConfig(
        max_new_tokens=10, temperature=1.5))
    drawn = {tuple(p): samples[i * 4:(i + 1) * 4] for i, p in enumerate(prompts)}
    plain = batches_mod.run_probe_batches(_config(path), batches=2, policy=policy64, task=task,
                                          sampler=ReplaySampler(drawn))
    guided = batches_mod.run_probe_batches(_config(path, {"fraction": 0.5, "prefix": 0.0}), batches=2,
                                           policy=policy64, task=task, sampler=ReplaySampler(drawn))
    keys = ("name", "inner_product", "per_group", "interval", "snr", "tokens_per_update", "signal_proxy",
            "signal_proxy_per_group", "predicted_gain_per_update", "valid_completions", "num_groups")
    for a, b in zip(plain["rewards"], guided["rewards"]):
        assert a["inner_product"] != 0 and a["probe_batches"] == b["probe_batches"] == 2
        for key in keys:
            assert a[key] == b[key], key
        g = b["guidance"]
        assert g["guided_rows"] == 12 and g["empty_hint_rows"] == 12 and g["hint_tokens"] == 0
        assert g["guided_tokens"] == 0 and g["guided_weight_mean"] is None and g["guided_capped_fraction"] is None
        assert g["is_weight"]["mean"] == 1.0 and g["is_weight"]["min"] == g["is_weight"]["max"] == 1.0
        assert g["is_weight"]["capped_fraction"] == 0.0 and g["logp_shift"]["tokens"] == 0
        assert g["completion_tokens"] == sum(pb["rewards"][0]["tokens_per_update"] for pb in guided["batches"])
    for pa, pb in zip(plain["batches"], guided["batches"]):
        assert pa["prompt_ids"] == pb["prompt_ids"] and pa["rewards"][0]["per_group"] == pb["rewards"][0]["per_group"]
    assert plain["batches"][0]["rewards"][0]["inner_product"] != plain["batches"][1]["rewards"][0]["inner_product"]


def test_pool_guidance_weights_each_mean_by_what_it_averages_over():
    """Batches of unequal size (the probe's batches are equal, so row weights are checked here): each mean
    weighted by its own rows or tokens; a batch without guided tokens leaves its None means out."""
    from gradprobe.probe.guided import pool_guidance

    def record(guided_rows, guided, unguided, tokens, guided_tokens, wmean, gwmean, shift_tokens, kl):
        return {"config": {"fraction": 0.5, "prefix": 1.0, "cap": 2.0}, "guided_rows": guided_rows,
                "empty_hint_rows": 1, "hint_tokens": 10, "guided_reward_mean": guided, "unguided_reward_mean": unguided,
                "is_weight": {"mean": wmean, "min": wmean - 0.1, "max": wmean + 0.1, "capped_fraction": 0.0, "cap": 2.0},
                "logp_shift": {"max_abs_diff": kl * 2, "mean_abs_diff": kl, "kl_k1": kl, "kl_k3": kl,
                               "tokens": shift_tokens},
                "completion_tokens": tokens, "guided_tokens": guided_tokens, "guided_weight_mean": gwmean,
                "guided_capped_fraction": None if gwmean is None else 0.0}

    a = record(2, 1.0, 0.5, 30, 10, 1.1, 1.3, 10, 0.2)   # 8 rows: 2 guided, 6 not
    b = record(1, 0.0, None, 10, 0, 1.0, None, 0, 0.0)   # 1 row, guided (empty hint): no unguided mean
    c = record(3, 0.5, 0.25, 60, 20, 1.2, 1.6, 20, 0.5)  # 4 rows: 3 guided, 1 not
    g = pool_guidance([a, b, c], rows=[8, 1, 4])
    assert g["guided_rows"] == 6 and g["empty_hint_rows"] == 3 and g["hint_tokens"] == 30
    assert g["completion_tokens"] == 100 and g["guided_tokens"] == 30
    assert g["guided_reward_mean"] == pytest.approx((2 * 1.0 + 0 + 3 * 0.5) / 6, rel=1e-12)
    assert g["unguided_reward_mean"] == pytest.approx((6 * 0.5 + 1 * 0.25) / 7, rel=1e-12)
    assert g["is_weight"] == pytest.approx({"mean": (30 * 1.1 + 10 * 1.0 + 60 * 1.2) / 100, "min": 0.9, "max": 1.3,
                                            "capped_fraction": 0.0, "cap": 2.0}, rel=1e-12)
    assert g["guided_weight_mean"] == pytest.approx((10 * 1.3 + 20 * 1.6) / 30, rel=1e-12)
    assert g["logp_shift"] == pytest.approx({"max_abs_diff": 1.0, "mean_abs_diff": 0.4, "kl_k1": 0.4, "kl_k3": 0.4,
                                             "tokens": 30}, rel=1e-12)
    with pytest.raises(ValueError, match="3 guidance records but 2 row counts"):
        pool_guidance([a, b, c], rows=[8, 1])
