"""A hybrid whose one part overflows float64 group statistics still trains those groups with its other part.

``hybrid = lam * A(part) + (1 - lam) * A(outcome)``: where one part's group statistics overflow,
:func:`gradprobe.grpo.advantages.group_normalize` sets that part's advantages to 0, and the other part's advantages
are added unchanged. The hybrid reported only ``nonfinite_groups`` (the larger part's count), and every reader (the
probe's notes, the training warning and stop, the never-trained report, the forecast's no-signal reason) said that
those groups got advantage 0 and did not train, and told the user to rescale the whole reward. Now the hybrid records
``nonfinite_part_groups`` (part -> groups) and the readers name the part that overflowed; a plain reward and a record
without the key read as before.
"""

from __future__ import annotations

import json
import types
import warnings

import pytest
import torch

from gradprobe.forecast.overflow_parts import part_overflow_text, part_rescale_text
from gradprobe.forecast.result import no_signal_reason
from gradprobe.grpo.advantages import group_normalize
from gradprobe.ledger import Ledger
from gradprobe.probe.result import diagnose
from gradprobe.rewards import REWARDS, dense, process
from gradprobe.rewards.base import RewardOutput
from gradprobe.rewards.steps import StepValues
from gradprobe.training import update as update_module
from gradprobe.training.errors import RewardOverflowError
from gradprobe.training.specs import BudgetSpec
from gradprobe.training.untrained import advice, describe, never_trained, overflowed_parts

MASK = torch.ones(4, 3, dtype=torch.bool)
# one group of 4 rows whose step values differ, +-1e308: their group statistics overflow float64 (inf - -inf)
HUGE = StepValues(boundaries=[[1, 3]] * 4, values=[[1e308, -1e308], [-1e308, 1e308], [0.0, 1e308], [1e308, 0.0]],
                  v0=[0.0] * 4, rewards=[1.0, 0.0, 1.0, 0.0], group_size=4)
PART_NOTE = ("in 1 of 1 group(s) the part 'mc_value' overflowed float64 group statistics (its values differ there but "
             "are too large, |value| up to 1e+308): that part's advantage is 0 in those groups; the other part "
             "('outcome') still trains those where its own values differ; rescale the part 'mc_value' (e.g. divide "
             "its values by their largest magnitude)")


def _outcome(rewards: list[float]):
    """An outcome part: ``rewards`` (one group of 4) group-normalised, each row's advantage on all its tokens."""
    def outcome(batch, ctx):
        adv, stats = group_normalize(torch.tensor([rewards], dtype=torch.float64))
        return RewardOutput(name="outcome", advantages=adv.view(4, 1).expand(4, 3).clone(),
                            valid=torch.ones(4, dtype=torch.bool), stats=stats)
    return outcome


def _hybrid(monkeypatch, outcome_rewards: list[float]) -> RewardOutput:
    """``hybrid`` (lam 0.5) whose mc_value part overflows (:data:`HUGE`) and whose outcome part is ordinary."""
    monkeypatch.setattr(dense, "mc_step_values", lambda batch, ctx: HUGE)
    monkeypatch.setattr(dense, "outcome_reward", _outcome(outcome_rewards))
    return REWARDS["hybrid"](types.SimpleNamespace(completion_mask=MASK), None)


def _batch():
    return types.SimpleNamespace(num_prompts=1, num_rows=4, truncated=torch.zeros(4, dtype=torch.bool),
                                 completion_mask=MASK, metadata={})


def _warned(stats: dict) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        update_module._warn_overflow("hybrid", 1, stats)
    return [str(w.message) for w in caught]


def test_the_hybrid_trains_the_group_and_records_which_part_overflowed(monkeypatch):
    out = _hybrid(monkeypatch, [1.0, 0.0, 1.0, 0.0])
    a = 0.5 * (1.0 - 0.5) / ((1.0 / 3.0) ** 0.5 + 1e-4)  # lam * the outcome part alone (sample std sqrt(1/3))
    assert out.advantages[:, 0].tolist() == pytest.approx([a, -a, a, -a], rel=1e-12)
    assert (out.stats["nonfinite_groups"], out.stats["overflow_max_abs_reward"]) == (1, 1e308)
    assert out.stats["nonfinite_part_groups"] == {"mc_value": 1, "outcome": 0}


def test_the_probe_note_and_the_training_warning_name_the_part_and_say_the_other_trains(monkeypatch):
    stats = _hybrid(monkeypatch, [1.0, 0.0, 1.0, 0.0]).stats
    assert diagnose(_batch(), {}, {"hybrid": {"stats": stats}}) == [f"reward 'hybrid': {PART_NOTE}"]
    assert _warned(stats) == [f"update 1: reward 'hybrid': {PART_NOTE}"]
    # a record without the per-part counts (a plain reward, an older hybrid) keeps the plain wording
    old = {k: v for k, v in stats.items() if k != "nonfinite_part_groups"}
    assert diagnose(_batch(), {}, {"hybrid": {"stats": old}}) == [
        "reward 'hybrid': in 1 of 1 groups its rewards differ but are too large for float64 group statistics "
        "(|reward| up to 1e+308): their mean or std overflows, so their advantages were set to 0 (the rewards are "
        "not equal); rescale the reward (e.g. divide it by its largest magnitude)"]
    assert _warned(old) == [
        "update 1: reward 'hybrid': in 1 of 1 group(s) the rewards differ but are too large for float64 group "
        "statistics (|reward| up to 1e+308); those groups got advantage 0 and did not train: rescale the reward"]


def test_a_process_hybrid_names_its_part_process(monkeypatch):
    def advantages(ps, mask, g):
        stats = {"missing": 0, "zero_variance_groups": 0, "groups": 2, "nonfinite_groups": 0,
                 "overflow_max_abs_reward": 0.0}
        return torch.full((4, 3), 0.25, dtype=torch.float64), torch.ones(4, dtype=torch.bool), stats

    def outcome(batch, ctx):
        return RewardOutput(name="outcome", advantages=torch.zeros(4, 3, dtype=torch.float64),
                            valid=torch.ones(4, dtype=torch.bool), stats={"zero_variance_groups": 0, "groups": 2,
                                                                          "nonfinite_groups": 2,
                                                                          "overflow_max_abs_reward": 1e200})
    monkeypatch.setattr(process, "process_steps", lambda batch, ctx, verifier: None)
    monkeypatch.setattr(process, "process_advantages", advantages)
    monkeypatch.setattr(process, "outcome_reward", outcome)
    out = process.make_process_reward(lam=0.5)(types.SimpleNamespace(completion_mask=MASK, group_size=2), None)
    assert out.stats["nonfinite_part_groups"] == {"process": 0, "outcome": 2}
    assert _warned(out.stats) == [
        "update 1: reward 'hybrid': in 2 of 2 group(s) the part 'outcome' overflowed float64 group statistics (its "
        "values differ there but are too large, |value| up to 1e+200): that part's advantage is 0 in those groups; "
        "the other part ('process') still trains those where its own values differ; rescale the part 'outcome' (e.g. "
        "divide its values by their largest magnitude)"]


def test_both_parts_overflowing_are_both_named():
    parts = {"mc_value": 2, "outcome": 1}
    assert part_overflow_text(parts, 4, 1e200) == (
        "in 2 of 4 group(s) the part 'mc_value' and in 1 the part 'outcome' overflowed float64 group statistics (their "
        "values differ there but are too large, |value| up to 1e+200): in each such group that part's advantage is "
        "0; the other part still trains the group where its own values differ and did not overflow")
    assert part_rescale_text(parts) == ("rescale the parts 'mc_value' and 'outcome' (e.g. divide their values by "
                                        "their largest magnitude)")
    line = _line(1, {"groups": 4, "nonfinite_groups": 2, "overflow_max_abs_reward": 1e200,
                     "nonfinite_part_groups": parts})
    assert describe([line]).endswith("(|reward| up to 1e+200; of the hybrid's parts, 'mc_value' and 'outcome' "
                                     "overflowed, each with advantage 0 in the groups where it overflowed, and no "
                                     "part trained any group)")


def test_the_forecast_reason_of_a_hybrid_without_signal_names_the_part(monkeypatch):
    out = _hybrid(monkeypatch, [1.0, 1.0, 1.0, 1.0])  # the outcome part is flat: every advantage is 0
    assert bool((out.advantages == 0).all())
    entry = {"per_group": [0.0], "signal_proxy_per_group": [0.0], "valid_completions": 4, "reward_stats": out.stats}
    assert no_signal_reason([entry]) == (
        "on this batch, in 1 group(s) the part 'mc_value' overflowed float64 group statistics (its values differ there "
        "but are too large, |value| up to 1e+308): that part's advantage is 0 in those groups, and the other part "
        "('outcome') trained none of them either (its advantage there is 0 too); every other group's usable rewards "
        "are equal, so every advantage is 0; rescale the part 'mc_value' (e.g. divide its values by their largest "
        "magnitude)")
    assert no_signal_reason([entry, entry]).startswith("on all 2 probe batches, in 2 group(s) the part 'mc_value' ")
    old = {**entry, "reward_stats": {k: v for k, v in out.stats.items() if k != "nonfinite_part_groups"}}
    assert no_signal_reason([old]).startswith("its rewards are too large for float64 group statistics on this batch")


def _line(update: int, stats: dict) -> dict:
    return {"update": update, "advantage_abs_mean": 0.0, "reward_valid": 4, "truncation_rate": 0.0,
            "grad_norm": 0.0, "reward_stats": stats}


def test_a_never_trained_hybrid_run_names_the_part_to_rescale(monkeypatch, tmp_path):
    stats = json.loads(json.dumps(_hybrid(monkeypatch, [1.0, 1.0, 1.0, 1.0]).stats))  # as metrics.jsonl holds it
    lines = [_line(u, stats) for u in (1, 2, 3)]
    assert overflowed_parts(lines) == ["mc_value"]
    why = ("the rewards of every group whose rewards differ overflowed float64 group statistics (|reward| up to "
           "1e+308; of the hybrid's parts, 'mc_value' overflowed, so its advantage was 0 in those groups, and the "
           "other part gave them advantage 0 too)")
    assert describe(lines) == why
    fix = "rescale the part 'mc_value' of the reward 'hybrid' (keep |reward| far below 1e150, e.g. in [0, 1])"
    assert advice("overflowed", "hybrid", lines=lines) == fix
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert never_trained(tmp_path / "metrics.jsonl")["why"] == why
    run = types.SimpleNamespace(budget=BudgetSpec(updates=10), reward="hybrid", arm="hyb")
    s = types.SimpleNamespace(out=tmp_path, run=run, state=types.SimpleNamespace(update=3, ledger=Ledger()))
    monkeypatch.setattr(update_module, "finish", lambda s, reason, extra: None)
    with pytest.raises(RewardOverflowError) as err:
        update_module.check_untrained_stop(s, lines[-1])
    assert str(err.value).endswith(f"; {fix} and rerun with a new --out")
    # lines without the per-part counts (a plain reward, an older run) keep the plain wording
    plain = [_line(1, {k: v for k, v in stats.items() if k != "nonfinite_part_groups"})]
    assert overflowed_parts(plain) == [] and advice("overflowed", "hybrid", lines=plain) == (
        "rescale the reward 'hybrid' (keep |reward| far below 1e150, e.g. in [0, 1])")


def test_a_count_beyond_a_float_is_read_as_a_count_not_an_overflow_error(tmp_path):
    huge = 10 ** 400  # a hand-edited or damaged metrics.jsonl: json reads it as an int past float's range
    line = _line(1, {"groups": 4, "nonfinite_groups": 2, "overflow_max_abs_reward": 1e308,
                     "nonfinite_part_groups": {"mc_value": huge, "outcome": 0}})
    assert overflowed_parts([line]) == ["mc_value"]  # was OverflowError: int too large to convert to float
    assert "of the hybrid's parts, 'mc_value' overflowed" in describe([line])
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert never_trained(path) is not None  # the analysis of a never-trained arm reads it without raising


def test_the_other_part_is_said_to_train_only_where_its_values_differ():
    # process part equal in the group, outcome part overflowing: the hybrid's advantages there are all 0
    process_adv, p_stats = group_normalize(torch.tensor([[0.5, 0.5, 0.5, 0.5]], dtype=torch.float64))
    outcome_adv, o_stats = group_normalize(torch.tensor([[1e308, -1e308, 1e308, -1e308]], dtype=torch.float64))
    assert (0.5 * process_adv + 0.5 * outcome_adv).abs().max().item() == 0.0
    stats = dense.hybrid_overflow_stats(p_stats, o_stats, 0.5)
    assert stats["nonfinite_part_groups"] == {"process": 0, "outcome": 1}
    text = part_overflow_text({"process": 0, "outcome": 1}, 1, 1e308)
    assert text.endswith("the other part ('process') still trains those where its own values differ")
