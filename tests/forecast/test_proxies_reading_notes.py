"""rho's SNR and interval come with a note where they cannot be read at face value: a heavy-tailed bootstrap whose
interval includes 1 while its SNR (from the central 68% of the replicates) says > 1.96, and a ratio resting on fewer
than 5 groups with a nonzero contribution (a trial user's reward, nearly constant within groups, was forecast at
-11.0 [-11.1, -7.5] with SNR 9.43 from 1 informative group of 16). The numbers themselves are unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from gradprobe.forecast import probe_efficiency
from gradprobe.forecast.proxies import MIN_INFORMATIVE_GROUPS, _reading_notes, stratified_counts


def _few_groups(n_informative: int, b: int = 16):
    """A reward whose contribution is nonzero in ``n_informative`` of ``b`` groups; grpo's in all of them."""
    rng = np.random.default_rng(0)
    ref = rng.normal(1.0, 0.3, size=b)
    r = np.zeros(b)
    r[:n_informative] = -0.5
    return r, ref


def test_one_informative_group_is_noted_and_its_numbers_are_unchanged():
    r, ref = _few_groups(1)
    counts = stratified_counts([16], 2000, 0)
    eff = probe_efficiency("r", [r], [ref], counts=counts)
    said = [n for n in eff.notes if n.startswith("rho rests on few groups")]
    assert said == ["rho rests on few groups: 1 of 16 contribute to this reward's alignment and 16 to grpo's (the "
                    "others contribute 0: groups whose rewards are all equal); a bootstrap over under 5 groups does "
                    "not measure its uncertainty, so its SNR of rho-1 and its interval are not to be trusted: use "
                    "more --prompts or --probe-batches"]
    assert eff.rho_raw == pytest.approx(-0.5 / ref.sum(), rel=1e-14)
    assert eff.snr > 1.96  # the overconfidence the note warns of


@pytest.mark.parametrize("n", [MIN_INFORMATIVE_GROUPS, 16])
def test_enough_informative_groups_give_no_such_note(n):
    r, ref = _few_groups(n)
    eff = probe_efficiency("r", [r], [ref], counts=stratified_counts([16], 500, 0))
    assert not [x for x in eff.notes if x.startswith("rho rests on few groups")]


def test_grpos_own_few_groups_count_too():
    rng = np.random.default_rng(1)
    ref = np.zeros(16)
    ref[:3] = rng.normal(1.0, 0.1, size=3)
    notes = _reading_notes([rng.normal(size=16)], [ref], (0.5, 0.9), 3.0, 0.95)
    assert any("16 of 16 contribute to this reward's alignment and 3 to grpo's" in n for n in notes)


def test_a_heavy_tailed_interval_that_includes_one_is_noted():
    assert _reading_notes([np.ones(16)], [np.ones(16)], (-0.22, 4.04), 4.6, 0.95) == [
        "rho's bootstrap is heavy-tailed: its 95% interval [-0.22, 4.04] includes 1 (grpo's per-update efficiency) "
        "although its SNR of rho-1 (|rho-1|/se) is 4.60 (se read from the central 68% of the replicates): read the "
        "interval, not the SNR"]
    assert _reading_notes([np.ones(16)], [np.ones(16)], (1.2, 4.04), 4.6, 0.95) == []  # agree: 1 outside
    assert _reading_notes([np.ones(16)], [np.ones(16)], (-0.22, 4.04), 1.5, 0.95) == []  # agree: SNR low


def test_a_heavy_tailed_bootstrap_gets_the_note_through_probe_efficiency():
    rng = np.random.default_rng(12)
    ref = rng.normal(0.3, 1.0, size=16)  # grpo's alignment near 0 across groups: the ratio's tails are Cauchy-like
    r = ref * 2.0 + rng.normal(0.0, 0.6, size=16)
    eff = probe_efficiency("r", [r], [ref], counts=stratified_counts([16], 4000, 0))
    lo, hi = eff.interval
    assert eff.snr > 1.96 and lo <= 1.0 <= hi  # the disagreement: SNR 2.70, interval [0.21, 3.33]
    assert sum(n.startswith("rho's bootstrap is heavy-tailed") for n in eff.notes) == 1
    steady = probe_efficiency("r", [2.0 * ref], [ref], counts=stratified_counts([16], 4000, 0))
    assert not any(n.startswith("rho's bootstrap is heavy-tailed") for n in steady.notes)


def test_the_forecast_shows_the_note_where_it_reads_the_probes_rho_and_not_under_cost_only():
    """A reward whose contribution is nonzero in 1 group of 16: under ``method="probe"`` its row's note says rho
    rests on few groups; under cost only (rho not read) it does not."""
    from forecast_helpers import probe_result, synthetic_curve
    from gradprobe.forecast import forecast_rewards

    r, ref = _few_groups(1)
    result = probe_result({"outcome": ref, "few": r}, {"outcome": 4000, "few": 4000})
    curve = synthetic_curve()
    probe = forecast_rewards(curve, result, method="probe", n_draws=300).table.set_index("reward")
    cost = forecast_rewards(curve, result, method="cost_only", n_draws=300).table.set_index("reward")
    assert "rho rests on few groups: 1 of 16 contribute to this reward's alignment" in probe.loc["few", "note"]
    assert "rho rests on few groups" not in cost.loc["few", "note"]
