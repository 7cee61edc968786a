"""Power before compute: seeds and held-out size from a pilot's variance (gradprobe.study.power),
checked against the noncentral t distribution directly; the detectable effect of a study; the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from gradprobe.cli import main as cli_main
from gradprobe.study.analysis import analyze
from gradprobe.study.power import (PowerError, detectable_effect, format_power, power_analysis, resolve_pilot,
                                   seeds_for_power, seeds_needed, t_power, variance_components)
from gradprobe.training.plan import parse_plan

from study_helpers import ITEMS, PLAN, item_string, make_study


def _power_nct(effect: float, n: int, alpha: float = 0.05) -> float:
    """Power of a two-sided one-sample t-test: the noncentral t (Cohen 1988, sec. 2.3), by scipy directly."""
    df, nc = n - 1, effect * math.sqrt(n)
    crit = sps.t.ppf(1 - alpha / 2, df)
    return float(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))


def test_seeds_for_power_is_the_smallest_n_with_80_percent_power():
    for sd, effect in ((1.14, 1.5), (2.0, 1.5), (0.5, 1.0)):
        n = seeds_for_power(sd, min_effect=effect)
        assert _power_nct(effect / sd, n) >= 0.8 > _power_nct(effect / sd, n - 1)
    assert seeds_for_power(0.0, min_effect=1.0) == 2


def test_detectable_effect_has_80_percent_power():
    d = detectable_effect(1.143, seeds=4)
    assert _power_nct(d / 1.143, 4) == pytest.approx(0.8, abs=1e-6)
    assert 2.3 < d < 2.6  # the figure for the tiny study: about 2.3 points with 4 seeds
    assert detectable_effect(1.0, seeds=1) is None


def test_a_study_states_its_detectable_effect(tmp_path):
    res = analyze(make_study(tmp_path), write=False, figures=False, n_resamples=2000)
    de = res["detectable_effect"]
    mc = res["arms"]["mc_value"]["generated_tokens"]
    assert de["per_arm"]["mc_value"]["sd"] == pytest.approx(mc["gain_sd"]) and de["seeds"] == 8
    assert _power_nct(de["per_arm"]["mc_value"]["effect"] / mc["gain_sd"], 8) == pytest.approx(0.8, abs=1e-6)
    assert de["largest"] == max(v["effect"] for v in de["per_arm"].values()) and "grpo" not in de["per_arm"]


POWER_PLAN = PLAN.replace("seeds = SEEDS", "seeds = [0, 1]") + '\n[power]\nmin_effect = 1.5\npilot = "pilot"\n'


def test_variance_components_recover_a_simulated_two_way_model():
    rng = np.random.default_rng(0)
    n, N = 40, 3000
    D = 1.0 + rng.normal(0, 2.0, (n, 1)) + rng.normal(0, 30.0, (1, N)) + rng.normal(0, 40.0, (n, N))
    comp = variance_components(D)
    assert comp["seed"] == pytest.approx(4.0, rel=0.5) and comp["item"] == pytest.approx(900.0, rel=0.1)
    assert comp["interaction"] == pytest.approx(1600.0, rel=0.02)
    # the moment identities by hand: V1 = item + interaction, V2 = item + interaction / n
    v1, v2 = D.var(axis=1, ddof=1).mean(), D.mean(axis=0).var(ddof=1)
    assert comp["item"] + comp["interaction"] == pytest.approx(v1)
    assert comp["item"] + comp["interaction"] / n == pytest.approx(v2)


def test_seeds_needed_reduces_to_the_t_test_without_item_error():
    for sd in (0.8, 1.14, 2.5):
        comp = {"seed": sd ** 2, "item": 0.0, "interaction": 0.0}
        kw = {"min_effect": 1.5, "alpha": 0.05, "power": 0.8, "alternative": "two-sided"}
        assert seeds_needed(comp, n_items=1000, **kw) == seeds_for_power(sd, min_effect=1.5)
    # scipy's noncentral t gives NaN here (statsmodels passes it on): the normal approximation, ~1
    assert t_power(1.875, 50, alpha=0.05, alternative="two-sided") == pytest.approx(1.0)
    assert t_power(1.875, 5, alpha=0.05, alternative="two-sided") == pytest.approx(_power_nct(1.875, 5))
    # an item error shared by every seed larger than the effect: no number of seeds helps
    assert seeds_needed({"seed": 1.0, "item": 1e4, "interaction": 0.0}, n_items=100, min_effect=1.5, alpha=0.05,
                        power=0.8, alternative="two-sided") is None


def test_power_analysis_from_a_pilot(tmp_path):
    make_study(tmp_path / "pilot")
    (tmp_path / "plan.toml").write_text(POWER_PLAN)
    plan = parse_plan(POWER_PLAN, path=str(tmp_path / "plan.toml"))
    res = power_analysis(plan, workers=2, heldout_sizes=[ITEMS, 64 * ITEMS])
    assert res["pilot"] == str(tmp_path / "pilot") and res["pilot_items"] == ITEMS
    rows = {(r["treatment"], r["control"], r["heldout"]): r for r in res["rows"]}
    r = rows[("grpo", "mc_value", ITEMS)]
    t = np.array([[float(c) for c in item_string(s, 16 + s % 3)] for s in range(8)])
    c = np.array([[float(c) for c in item_string(s, 14 + s % 2)] for s in range(8)])
    D = 100 * (t - c)
    comp = variance_components(D)
    assert r["components"] == pytest.approx(comp) and r["pilot_sd"] == pytest.approx(D.mean(axis=1).std(ddof=1))
    assert r["disagreement"] == pytest.approx(np.abs(t - c).mean())
    assert r["sd"] == pytest.approx(math.sqrt(comp["seed"] + comp["interaction"] / ITEMS)) == r["pilot_sd"]
    assert r["item_sd"] == pytest.approx(math.sqrt(comp["item"] / ITEMS))
    # the seeds: the smallest n whose power (noncentral t, per-seed SD sqrt(n * variance)) reaches 0.8, and >= 6
    # (the two-sided sign-flip floor); checked against scipy directly
    def ok(n, items):
        sd = math.sqrt(comp["seed"] + comp["interaction"] / items + n * comp["item"] / items)
        return _power_nct(1.5 / sd, n) >= 0.8
    for items in (ITEMS, 64 * ITEMS):
        row = rows[("grpo", "mc_value", items)]
        k = next((n for n in range(2, 501) if ok(n, items)), None)
        assert row["seeds_t"] == k and row["seeds"] == (None if k is None else max(k, 6))
    assert rows[("grpo", "mc_value", 64 * ITEMS)]["item_sd"] == pytest.approx(r["item_sd"] / 8)
    # wall time: 60 s per run x 3 arms x seeds / 2 workers (no eval seconds in the pilot: not rescaled)
    big = rows[("grpo", "mc_value", 64 * ITEMS)]
    assert big["seeds"] is not None and big["wall_seconds"] == pytest.approx(60.0 * 3 * big["seeds"] / 2)
    text = format_power(res)
    assert "grpo vs mc_value" in text and "needed:" in text and "80% power against 1.5 points" in text


def test_power_cli_and_its_bad_input(tmp_path, capsys):
    make_study(tmp_path / "pilot")
    plan = tmp_path / "plan.toml"
    plan.write_text(POWER_PLAN)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert cli_main(["study", "--power", str(plan)]) == 0
    assert "needed:" in capsys.readouterr().out
    no_section = tmp_path / "none.toml"
    no_section.write_text(POWER_PLAN.split("\n[power]")[0])
    assert cli_main(["study", "--power", str(no_section)]) == 2
    assert "has no [power] section" in capsys.readouterr().err
    empty = tmp_path / "empty.toml"
    empty.write_text(POWER_PLAN.replace('pilot = "pilot"', ""))
    assert cli_main(["study", "--power", str(empty)]) == 2
    assert "power.pilot is empty and no --pilot was given" in capsys.readouterr().err
    assert cli_main(["study", "--power", str(plan), "--pilot", str(tmp_path / "nowhere")]) == 2
    assert "--pilot" in capsys.readouterr().err
    unfinished = make_study(tmp_path / "unfinished", finished=False)
    assert cli_main(["study", "--power", str(plan), "--pilot", str(unfinished)]) == 2
    assert "is not a finished study (study.json has no 'finished'" in capsys.readouterr().err
    assert cli_main(["study", "--power"]) == 2 and "--power needs the plan" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(before + ["none.toml", "empty.toml"] + [
        p.name for p in unfinished.rglob("*")] + ["unfinished"])  # nothing written by the refused requests
    with pytest.raises(PowerError, match="power.pilot: .* is not a finished study"):
        resolve_pilot(parse_plan(POWER_PLAN.replace('"pilot"', '"unfinished"'), path=str(plan)))
