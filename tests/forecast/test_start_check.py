"""The forecast checks that the reference curve starts where the probe's own held-out measurement puts the policy
(gradprobe.forecast.start_check): a curve on another scale, of another task, or a batch of truncated completions
gets a note saying the forecast reads off a curve that does not describe this policy."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from forecast_helpers import probe_result, synthetic_curve

from gradprobe import cli
from gradprobe.forecast import ReferenceCurve, forecast_rewards
from gradprobe.forecast.start_check import (GAP_SE, MIN_GAP_POINTS, heldout_measurement, standard_error_bound,
                                            start_notes)
from gradprobe.integrations.trl_config import apply_trl_config
from gradprobe.probe.direction import _group_means

ROOT = Path(__file__).resolve().parents[2]
CHECK = "CHECK THE CURVE"


def _probe(h=None, groups=None, truncation=0.0, reused=False, prompts=None):
    o = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    p = probe_result({"outcome": o, "mc": 2.0 * o}, {"outcome": 1000.0, "mc": 1500.0})
    if prompts is not None:
        p["reference"]["prompts"] = prompts
    if h is not None:
        p["reference"]["heldout_accuracy"] = h
    if groups is not None:
        p["reference"]["heldout_group_accuracy"] = groups
    if reused:
        p["reference"]["reused"] = True
    p["batch"] = {"truncation_rate": truncation}
    return p


def test_heldout_measurement_is_the_group_mean_with_its_prompt_clustered_standard_error():
    g = [0.25, 0.5, 0.75, 1.0, 0.0, 0.5]
    acc, se, n = heldout_measurement([_probe(h=0.5, groups=g)])
    y = np.asarray(g, dtype=np.float64)
    assert n == 6 and acc == pytest.approx(100 * y.mean(), abs=1e-12)
    own = 100 * math.sqrt(((y - y.mean()) ** 2).sum() / 5) / math.sqrt(6)  # 14.4: below the bound, which is used
    bound = 100 * math.sqrt(0.5 * 0.5 / 6)  # p = (6 x 0.5 + 1) / 8 = 0.5
    assert own == pytest.approx(14.43, abs=0.01) and se == pytest.approx(bound, abs=1e-12)
    assert standard_error_bound(50, 6) == pytest.approx(bound, abs=1e-12)
    # spread groups: their own standard error, above the bound
    acc3, se3, _ = heldout_measurement([_probe(h=0.5, groups=[0.0] * 4 + [1.0] * 4)])
    assert se3 == pytest.approx(100 * math.sqrt(8 * 0.25 / 7) / math.sqrt(8), abs=1e-12)
    assert se3 > standard_error_bound(50, 8)
    # two batches with their own held-out draws pool their groups; a reused reference is counted once
    acc2, se2, n2 = heldout_measurement([_probe(h=0.5, groups=g), _probe(h=0.0, groups=[0.0, 0.0])])
    assert n2 == 8 and acc2 == pytest.approx(100 * 3.0 / 8, abs=1e-12)
    assert heldout_measurement([_probe(h=0.5, groups=g), _probe(h=0.5, groups=g, reused=True)])[:3] == (acc, se, n)
    # a probe written before per-group accuracies were kept: the bound over its reference's prompts, else none
    assert heldout_measurement([_probe(h=0.625, prompts=16)]) == (62.5, standard_error_bound(62.5, 16), 16)
    assert heldout_measurement([_probe(h=0.625)]) == (62.5, None, 0)
    # a direction reference (no held-out rollouts) or a NaN accuracy: nothing measured
    assert heldout_measurement([_probe()]) is None and heldout_measurement([_probe(h=math.nan)]) is None


def test_a_curve_that_starts_where_the_probe_measured_says_nothing():
    curve = synthetic_curve()  # R0 = 60 points
    for h in (0.60, 0.45, 0.35):  # gaps 0, 15, 25 points: under MIN_GAP_POINTS
        assert start_notes(curve, [_probe(h=h, groups=[h] * 8)]) == []
    assert MIN_GAP_POINTS == 30.0 and GAP_SE == 3.0


def test_a_curve_on_another_scale_is_noted():
    """Accuracies logged as fractions x 1.4 (0.95-1.10), read as ~1 point (stated as points: under auto a largest
    value in (1, 5] is refused); the probe measured 62.5."""
    s0 = [(0, 0.676), (2, 0.71), (5, 0.737), (10, 0.739), (14, 0.762), (20, 0.775), (29, 0.754), (42, 0.783),
          (57, 0.788)]
    curve = ReferenceCurve(updates=[u for u, _ in s0], accuracy=[1.4 * a for u, a in s0], source="wrong.csv",
                           accuracy_scale="points")
    assert curve.params["R0"] == pytest.approx(1.4 * 0.676)
    res = forecast_rewards(curve, _probe(h=0.625, groups=[0.5, 0.75] * 4), n_draws=300)
    note = res.notes[0]
    assert note.startswith(f"{CHECK}: the reference curve wrong.csv starts at R0 = 0.9 points")
    assert "score 62.5 points (se 17.3, 8 groups): a gap of -61.6 points, beyond 52" in note
    assert "another scale (fractions read as points)" in note


def test_a_task_the_policy_cannot_solve_is_noted_and_the_bar_widens_with_the_spread():
    curve = synthetic_curve()  # R0 = 60
    [note] = start_notes(curve, [_probe(h=0.0, groups=[0.0] * 8)])  # se: the bound, 10.6 (p = 1/10)
    assert "score 0.0 points (se 10.6, 8 groups): a gap of +60.0 points, beyond 32" in note
    # a gap of 35 points on 4 groups of 0 and 1 (se 28.9 points): within 3 se, not noted
    assert start_notes(curve, [_probe(h=0.25, groups=[0.0, 0.0, 0.0, 1.0])]) == []
    # the same gap measured tightly is noted; with no per-group accuracies the gap alone decides
    assert len(start_notes(curve, [_probe(h=0.25, groups=[0.25] * 16)])) == 1
    assert len(start_notes(curve, [_probe(h=0.25)])) == 1


def test_a_few_held_out_prompts_cannot_raise_the_alarm():
    """The false alarms a tester saw on the shipped curve (R0 67.6, nothing wrong): one held-out prompt scoring
    0 or 1, two prompts scoring 100, four prompts scoring 31.2 (gap +36.4 with the groups' own se 12.0)."""
    curve = ReferenceCurve.load(ROOT / "gradprobe" / "data" / "curves" / "tiny_frontier_grpo.json")
    for groups in ([0.0], [1.0], [1.0, 1.0], [0.25, 0.5, 0.25, 0.25], [0.25, 0.25, 0.0, 0.0]):
        assert start_notes(curve, [_probe(h=float(np.mean(groups)), groups=groups)]) == [], groups
    assert standard_error_bound(0.0, 1) * GAP_SE > 100  # one prompt can never
    # eight prompts all wrong (another task) still can: bar 31.8 < 67.6
    assert start_notes(curve, [_probe(h=0.0, groups=[0.0] * 8)])[0].startswith(CHECK)


def test_a_curve_without_an_eval_at_update_0_says_its_r0_is_extrapolated():
    ups = [5, 10, 20, 40, 80]
    curve = ReferenceCurve(updates=ups, accuracy=[62.0, 66.0, 70.0, 73.0, 75.0], source="trl")
    notes = start_notes(curve, [_probe(h=0.55, groups=[0.5, 0.6] * 4)])
    assert notes == [f"the reference curve trl has no eval at update 0, so its R0 ({curve.params['R0']:.1f} points) "
                     "is the fit's extrapolation and every gain is read relative to it; evaluate the initial policy "
                     "(TRL: eval_on_start=True; another source: an eval at update 0 in its file) or, for a TRL "
                     "trainer_state.json, give its accuracy (gradprobe probe --initial-accuracy X; Python: "
                     "load_reference_curve(..., initial_accuracy=X))"]
    # with a far gap the CHECK note names the missing eval among the causes
    notes = start_notes(curve, [_probe(h=0.0, groups=[0.0] * 16)])
    assert notes[0].startswith(CHECK) and "no eval at update 0 (R0 extrapolated)" in notes[0]


def test_an_all_truncated_batch_is_noted():
    curve = synthetic_curve()
    notes = start_notes(curve, [_probe(h=0.6, groups=[0.6] * 4, truncation=1.0)])
    assert len(notes) == 1 and "truncation 100%" in notes[0] and "raise --max-new-tokens" in notes[0]
    assert start_notes(curve, [_probe(h=0.6, groups=[0.6] * 4, truncation=0.97)]) == []


def test_the_shipped_studies_pass_the_check():
    """Every shipped study's grpo curve against its own probe (written before per-group accuracies: the gap
    alone): gaps of 2.0-23.2 points (the largest the Llama replicate's, 16 held-out prompts), no note; all under
    the check's 30-point bar. The same probe read against another study's curve is also in range,
    so the check is no task detector; it catches gross mismatches only."""
    seen = []
    for study in sorted((ROOT / "data").glob("study_tiny*")):
        probe = json.loads((study / "probe" / "probe.json").read_text())
        curve = ReferenceCurve.from_study(study)
        acc, _, _ = heldout_measurement(probe.get("batches") or [probe])
        seen.append(curve.params["R0"] - acc)
        assert [n for n in start_notes(curve, probe.get("batches") or [probe]) if n.startswith(CHECK)] == []
    assert len(seen) >= 10 and 0 < min(seen) and max(seen) < 24.0


def test_group_means_leave_out_groups_without_a_finite_score():
    grouped = torch.tensor([[1.0, 0.0, 1.0, 1.0], [float("nan")] * 4, [0.0, float("nan"), 1.0, 1.0]])
    assert _group_means(grouped) == [0.75, pytest.approx(2 / 3)]


def test_a_curve_without_its_update_batch_says_the_probes_is_assumed():
    """A CSV or TRL curve does not know its update batch: the probe's is assumed, and said (it was silent)."""
    res = forecast_rewards(synthetic_curve(), _probe(h=0.6, groups=[0.6] * 8), n_draws=300)
    [note] = [n for n in res.notes if "does not record its update batch" in n]
    assert "its updates are taken to be the probe's 16x8 completions" in note
    assert "pass --update-prompts/--update-group equal to that run's" in note
    # a curve that records its batch: rescaled when it differs, nothing said when it is the probe's
    for batch, said in (((16, 8), []), ((32, 8), ["rescaled by 2"])):
        curve = synthetic_curve(metadata={"update_prompts": batch[0], "update_group": batch[1]})
        notes = forecast_rewards(curve, _probe(h=0.6, groups=[0.6] * 8), n_draws=300).notes
        assert not [n for n in notes if "does not record its update batch" in n]
        assert [s for s in said if any(s in n for n in notes)] == said


def test_an_update_batch_from_trl_config_is_said_to_come_from_it(tmp_path):
    """With --trl-config the probe's update batch is the TRL run's: the note said to pass --update-prompts and
    --update-group as if the user had not given the run's batch; it now names the file (the flags: for another run)."""
    config = tmp_path / "grpo_config.yaml"
    config.write_text("num_generations: 8\nper_device_train_batch_size: 32\ngradient_accumulation_steps: 4\n")
    parser = argparse.ArgumentParser()
    cli._add_probe(parser.add_subparsers(dest="command"))
    def note_of(argv, explicit=frozenset()):
        args = parser.parse_args(["probe", "--trl-config", str(config), *argv])
        probe = _probe(h=0.6, groups=[0.6] * 8)
        probe["trl_config"] = apply_trl_config(args, explicit=set(explicit)).record()  # as probe.json holds it
        probe["config"].update(prompts=args.prompts, group=args.group, update_prompts=args.update_prompts,
                               update_group=args.update_group)  # as the probe records its parsed options
        [note] = [n for n in forecast_rewards(synthetic_curve(), probe, n_draws=300).notes if "update batch" in n]
        return note

    note = note_of([])  # 32 x 4 / 8 = 16 prompts of 8: the TRL run's update
    assert note.endswith(f"its updates are taken to be the probe's 16x8 completions, which --trl-config {config} "
                         "gave: right when the curve is that run's log; if it comes from another run, "
                         "pass --update-prompts/--update-group equal to that run's"), note
    for argv, explicit, batch in ((["--update-prompts", "16", "--group", "8"], {"update_prompts", "group"}, "16x8"),
                                  (["--update-group", "4"], {"update_group"}, "16x4"),
                                  (["--update-prompts", "5"], {"update_prompts"}, "5x8")):
        note = note_of(argv, explicit)  # a flag gave (part of) the batch: the user's, not the file's
        assert f"the probe's {batch} completions;" in note and "--trl-config" not in note, (argv, note)
        assert "(a TRL GRPOTrainer's: per-device batch" in note
    config.write_text("num_generations: 8\n")  # the file gives the group only; the prompts are --prompts' default
    assert "--trl-config" not in note_of([])


def test_a_curve_of_several_seeds_without_replicates_is_not_called_one_seed():
    res = forecast_rewards(synthetic_curve(n_replicates=0), _probe(h=0.6, groups=[0.6] * 8), n_draws=300)
    assert "the reference curve has 3 seeds but no seed-bootstrap replicates (n_replicates=0): intervals leave out " \
           "its uncertainty" in res.notes
    one = forecast_rewards(synthetic_curve(seeds=1), _probe(h=0.6, groups=[0.6] * 8), n_draws=300)
    assert ("the reference curve has one seed: intervals carry its eval noise (residual sd 0.00 points of its fit, "
            "4 degree(s) of freedom; a parametric bootstrap of the fit) but not the run-to-run spread a second seed "
            "would show, so they are too narrow by that; a curve of 2 or more seeds carries it") in one.notes
