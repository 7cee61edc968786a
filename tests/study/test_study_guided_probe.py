"""A study's guided arms get a probe of their own update (probe/guided/<arm>, gradprobe.study.worker._probe):
arms.json names its folder (probe_dir), study_forecasts reads the guided entry against grpo's shared one,
a resumed study redoes no probe, and an older arms.json (no probe_dir) still reads the shared probe."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from gradprobe.forecast import study_forecasts
from gradprobe.forecast.proxies import robust_se, shrink_factor, stratified_counts
from gradprobe.forecast.study import merge_guided_entries
from gradprobe.study.runner import run_study
from gradprobe.training.plan import load_plan

from forecast_helpers import synthetic_curve
from helpers_rollout import one_thread
from study_helpers import toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

GUIDE_A = {"fraction": 0.5, "prefix": 0.5, "cap": 2.0}
GUIDE_B = {"fraction": 0.25, "prefix": 1.0, "cap": 2.0}
ARMS = ('[arms.grpo]\nreward = "outcome"\n'
        '[arms.guided]\nreward = "outcome"\nguidance = {fraction = 0.5, prefix = 0.5}\n'
        '[arms.guided_lr]\nreward = "outcome"\nlr_scale = 2.0\nguidance = {fraction = 0.5, prefix = 0.5}\n'
        '[arms.guided_bnpo]\nreward = "outcome"\nloss_type = "bnpo"\nguidance = {fraction = 0.25, prefix = 1.0}\n')
# the shipped tiny tier on its frontier chain sums (as tests/study/test_executor_invariance.py): groups with mixed
# rewards and a non-zero held-out reference update, so the probes' numbers are not all zero
PLAN = (toy_plan("guided_probe", seeds=(0,), generated_tokens=600, every_tokens=300, checkpoint_every=None, arms=ARMS)
        .replace('name = "tiny-qwen2"', 'name = "tiny"').replace("max_new_tokens = 16", "max_new_tokens = 48")
        .replace("pool = 16\n", "pool = 16\n[task.config]\nmin_terms = 3\nmax_terms = 4\nmax_digits = 1\n"))
SMALL = {"prompts": 4, "group": 4, "heldout_prompts": 4, "heldout_group": 4, "n_bootstrap": 50}
CURVE = {"R0": 20.0, "A": 90.0, "n_mid": 30.0, "B": 1.0}
DRAWS = 200


def _json(path):
    return json.loads(path.read_text())


def _entries(probe: dict) -> dict:
    return {r["name"]: r for r in probe["rewards"]}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("guided_study")
    res = run_study(write_plan(tmp, PLAN), tmp / "study", executor="inline", probe_overrides=SMALL, analyze=True)
    assert res.ok and res.probe == "done", res.summary()
    return tmp / "study"


def _forecast(study_dir):
    return study_forecasts(study_dir, curve=synthetic_curve(params=CURVE, seeds=2), n_draws=DRAWS).set_index("arm")


def _copy(study, tmp_path):
    out = tmp_path / "study"
    shutil.copytree(study, out, ignore=shutil.ignore_patterns(".lock"))
    return out


def test_one_guided_probe_per_guidance_config_with_the_arms_guidance(study):
    probe = study / "probe"
    assert sorted(p.name for p in (probe / "guided").iterdir()) == ["guided", "guided_bnpo"]  # guided_lr shares A
    shared = _json(probe / "probe.json")
    a, b = _json(probe / "guided" / "guided" / "probe.json"), _json(probe / "guided" / "guided_bnpo" / "probe.json")
    plan = load_plan(study / "plan.toml")
    assert a["config"]["guidance"] == plan.arm("guided").guidance == plan.arm("guided_lr").guidance == GUIDE_A
    assert b["config"]["guidance"] == plan.arm("guided_bnpo").guidance == GUIDE_B
    assert shared["config"]["guidance"] is None
    # the same settings as the shared probe but the arms' rewards and loss types: one entry per guided arm
    assert list(_entries(a)) == ["outcome"] and list(_entries(b)) == ["outcome", "outcome@bnpo"]
    for key in ("prompts", "group", "heldout_prompts", "heldout_group", "seed", "loss_type", "lr", "model"):
        assert a["config"][key] == b["config"][key] == shared["config"][key], key
    # one reference update v: the guided probes reuse the shared probe's
    assert a["reference"]["reused"] is True and b["reference"]["reused"] is True
    assert a["reference"]["norm"] == b["reference"]["norm"] == shared["reference"]["norm"] > 0
    # a different batch: guided rollouts, so per-group contributions differ from the shared outcome entry's
    assert _entries(a)["outcome"]["per_group"] != _entries(shared)["outcome"]["per_group"]


def test_arms_json_names_the_guided_probe_of_guided_arms_only(study):
    arms = _json(study / "probe" / "arms.json")
    assert {k: v.get("probe_dir") for k, v in arms.items()} == {
        "grpo": None, "guided": "guided/guided", "guided_lr": "guided/guided", "guided_bnpo": "guided/guided_bnpo"}
    assert arms["guided_bnpo"]["probe_entry"] == "outcome@bnpo"
    for arm, spec in arms.items():
        if spec.get("probe_dir"):
            assert spec["probe_entry"] in _entries(_json(study / "probe" / spec["probe_dir"] / "probe.json"))


def _hand_rho(guided_pg, shared_pg) -> float:
    """rho as proxies.probe_efficiency defines it, from the two per-group lists, one batch, one reference draw."""
    g, s = np.asarray(guided_pg, dtype=float), np.asarray(shared_pg, dtype=float)
    raw = g.sum() / s.sum()
    counts = stratified_counts([len(s)], DRAWS, 0)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = (counts @ g) / (counts @ s)  # a draw of flat groups only: 0 / 0, left out by robust_se
    se = robust_se(boot)
    snr = abs(raw - 1) / se
    return 1 + shrink_factor(snr) * (raw - 1)


def test_study_forecasts_reads_the_guided_entry_against_grpos(study):
    t = _forecast(study)
    shared = _entries(_json(study / "probe" / "probe.json"))
    guided = _entries(_json(study / "probe" / "guided" / "guided" / "probe.json"))
    bnpo = _entries(_json(study / "probe" / "guided" / "guided_bnpo" / "probe.json"))
    assert t.loc["guided", "probe_entry"] == t.loc["guided_lr", "probe_entry"] == "outcome~guided/guided"
    assert t.loc["guided_bnpo", "probe_entry"] == "outcome@bnpo~guided/guided_bnpo"
    assert t.loc["grpo", "probe_entry"] == "outcome" and t.loc["grpo", "rho"] == 1.0
    pg_o = shared["outcome"]["per_group"]
    assert t.loc["guided", "rho"] == pytest.approx(_hand_rho(guided["outcome"]["per_group"], pg_o), rel=1e-12)
    assert t.loc["guided_bnpo", "rho"] == pytest.approx(_hand_rho(bnpo["outcome@bnpo"]["per_group"], pg_o),
                                                        rel=1e-12)
    assert t.loc["guided", "rho"] != 1.0  # the unguided outcome entry's rho (grpo's own) is 1 exactly
    c_o = shared["outcome"]["tokens_per_update"]
    assert t.loc["guided", "token_multiplier"] == pytest.approx(guided["outcome"]["tokens_per_update"] / c_o)
    assert t.loc["guided_bnpo", "token_multiplier"] == pytest.approx(bnpo["outcome@bnpo"]["tokens_per_update"] / c_o)
    assert "its entry is its guided probe's (probe/guided/guided" in t.loc["guided", "note"]
    assert "sees only its reward" not in t.loc["guided", "note"] and "guided" not in t.loc["grpo", "note"]


def test_a_resumed_study_redoes_no_probe_and_a_missing_guided_probe_only(study, tmp_path):
    out = _copy(study, tmp_path)
    files = ["probe.json", "guided/guided/probe.json", "guided/guided_bnpo/probe.json"]
    before = {f: (out / "probe" / f).read_bytes() for f in files}
    res = run_study(out / "plan.toml", out, executor="inline", probe_overrides=SMALL, analyze=False)
    assert res.ok and res.probe == "skipped", res.summary()
    assert {f: (out / "probe" / f).read_bytes() for f in files} == before
    # a study killed after the shared probe: only the missing guided probe runs, its v computed again alike
    shutil.rmtree(out / "probe" / "guided" / "guided_bnpo")
    res = run_study(out / "plan.toml", out, executor="inline", probe_overrides=SMALL, analyze=False)
    assert res.ok and res.probe == "done", res.summary()
    for f in files[:2]:
        assert (out / "probe" / f).read_bytes() == before[f], f
    redone = _json(out / "probe" / "guided" / "guided_bnpo" / "probe.json")
    assert redone["config"]["guidance"] == GUIDE_B and not redone["reference"].get("reused")
    assert redone["reference"]["norm"] == pytest.approx(_json(out / "probe" / "probe.json")["reference"]["norm"],
                                                        rel=1e-9)


def test_an_arms_json_without_probe_dir_reads_the_shared_probe(study, tmp_path):
    out = _copy(study, tmp_path)
    arms = _json(out / "probe" / "arms.json")
    for spec in arms.values():
        spec.pop("probe_dir", None)
    (out / "probe" / "arms.json").write_text(json.dumps(arms))
    t = _forecast(out)
    assert t.loc["guided", "probe_entry"] == "outcome" and t.loc["guided", "rho"] == 1.0
    assert t.loc["guided_bnpo", "probe_entry"] == "outcome@bnpo"
    assert t.loc["guided", "token_multiplier"] == 1.0
    assert "guided arm: the probe sees only its reward" in t.loc["guided", "note"]
    assert "(" not in t.loc["guided", "note"].split("guided arm:")[1]  # no probe_dir: no reason given


def test_a_missing_or_mismatched_guided_probe_falls_back_to_the_shared_entry_and_says_why(study, tmp_path):
    out = _copy(study, tmp_path)
    shutil.rmtree(out / "probe" / "guided" / "guided")
    path = out / "probe" / "guided" / "guided_bnpo" / "probe.json"
    bad = _json(path)
    group = bad["batch"]["group"]
    for r in bad["rewards"]:  # a probe of one group fewer, as the probe would write it
        r["per_group"], r["signal_proxy_per_group"] = r["per_group"][:-1], r["signal_proxy_per_group"][:-1]
        r["num_groups"], r["inner_product"] = len(r["per_group"]), math.fsum(r["per_group"])
        r["predicted_gain_per_update"] = 100.0 * r["lr"] * r["inner_product"]
        r["predicted_gain_at_budget"] = r["budget_tokens"] / r["tokens_per_update"] * r["predicted_gain_per_update"]
        r["signal_proxy"] = math.fsum(r["signal_proxy_per_group"]) / (group * r["num_groups"])
    path.write_text(json.dumps(bad))
    t = _forecast(out)
    assert t.loc["guided", "probe_entry"] == "outcome" and t.loc["guided", "rho"] == 1.0
    assert "sees only its reward" in t.loc["guided", "note"]
    assert "its guided probe guided/guided/probe.json is missing" in t.loc["guided", "note"]
    assert t.loc["guided_bnpo", "probe_entry"] == "outcome@bnpo"
    assert "has 3 groups in batch 0, the probe 4" in t.loc["guided_bnpo", "note"]


def test_merge_keeps_the_probe_structure_batch_by_batch():
    def batch(vals):
        return {"rewards": [{"name": "outcome", "per_group": vals, "tokens_per_update": 10}]}

    shared = [batch([1.0, 2.0]), batch([3.0, 4.0])]
    guided = [batch([5.0, 6.0]), batch([7.0, 8.0])]
    merged, key = merge_guided_entries(shared, guided, "outcome", "guided/g")
    assert key == "outcome~guided/g"
    assert [[r["per_group"] for r in b["rewards"]] for b in merged] == [[[1.0, 2.0], [5.0, 6.0]],
                                                                        [[3.0, 4.0], [7.0, 8.0]]]
    assert merged[0]["rewards"][1]["name"] == key and shared[0]["rewards"][-1]["name"] == "outcome"  # a copy
    pooled = {"batches": shared, "rewards": [{"name": "outcome", "per_group": [1.0, 2.0, 3.0, 4.0]}]}
    gpooled = {"batches": guided, "rewards": [{"name": "outcome", "per_group": [9.0]}]}
    m, _ = merge_guided_entries(pooled, gpooled, "outcome", "guided/g")
    assert m["rewards"][1]["per_group"] == [9.0] and m["batches"][1]["rewards"][1]["per_group"] == [7.0, 8.0]
    with pytest.raises(ValueError, match="has 1 batch"):
        merge_guided_entries(shared, guided[:1], "outcome", "guided/g")
    with pytest.raises(ValueError, match="no entry 'mc_value'"):
        merge_guided_entries(shared, guided, "mc_value", "guided/g")
