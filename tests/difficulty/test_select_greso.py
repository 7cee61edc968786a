"""The ``greso`` selection rule (GRESO pre-rollout filtering) and the flat-group AUC of the estimator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gradprobe.difficulty.config import SelectionConfig, parse_selection
from gradprobe.difficulty.evaluate import binary_auc, evaluate_estimator, flat_group_auc
from gradprobe.difficulty.select import GresoFilter, group_kind
from gradprobe.training.plan import PlanError, parse_plan
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_selection import Killed, kill_at, selection_plan, selection_records
from helpers_tasks import ScoredTask

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def _greso(**kw) -> GresoFilter:
    return GresoFilter(SelectionConfig(rule="greso", **kw))


def _history(f: GresoFilter) -> None:
    """a: 2 all-correct in a row; b: 1 all-wrong; c: mixed; d: all-correct then mixed (reset);
    e: all-wrong then all-correct (z_easy = 1, z_hard reset); f: never rolled out."""
    f.observe(["a", "b", "c", "d", "e"], ["all_correct", "all_wrong", "mixed", "all_correct", "all_wrong"])
    f.observe(["a", "d", "e"], ["all_correct", "mixed", "all_correct"])


IDS = ["a", "b", "c", "d", "e", "f"]


def test_group_kind():
    assert group_kind([1.0, 1.0, 1.0]) == "all_correct"
    assert group_kind([0.0, 0.0]) == "all_wrong"
    assert group_kind([1.0, 0.0]) == "mixed"
    assert group_kind([1.0, float("nan")]) == "all_correct"  # one finite score: flat
    assert group_kind([float("nan")] * 3) == "all_wrong"  # no reward at all: flat, no success
    assert group_kind([0.5, 0.5]) == "all_wrong"  # flat without a success


def test_streaks_and_skip_probability_by_hand():
    f = _greso(greso_explore_easy=0.5, greso_explore_hard=0.4, greso_explore_floor=0.0)
    _history(f)
    ze, zh = f.streaks(IDS)
    assert ze.tolist() == [2, 0, 0, 0, 1, 0] and zh.tolist() == [0, 1, 0, 0, 0, 0]
    p, kind = f.skip_probability(IDS)
    # a: 1 - 0.5^2; b: 1 - 0.4^1; e: 1 - 0.5^1; c, d, f: no streak
    assert p.tolist() == pytest.approx([0.75, 0.6, 0.0, 0.0, 0.5, 0.0])
    assert kind == ["all_correct", "all_wrong", None, None, "all_correct", None]
    skip, _ = f.decide(IDS, [0.74, 0.61, 0.0, 0.0, 0.49, 0.0])
    assert skip.tolist() == [True, False, False, False, True, False]
    # the floor keeps a long streak's retain probability at >= floor
    g = _greso(greso_explore_easy=0.5, greso_explore_floor=0.3)
    _history(g)
    assert g.skip_probability(["a"])[0][0] == pytest.approx(0.7)


def test_exploration_limits_skip_exactly_the_streaks_or_nothing():
    never = _greso(greso_explore_easy=0.0, greso_explore_hard=0.0, greso_explore_floor=0.0)
    _history(never)
    # exploration 0: every prompt whose last group was flat is skipped, whatever the draw
    skip, kind = never.decide(IDS, [0.999999] * 6)
    assert [i for i, s in zip(IDS, skip) if s] == ["a", "b", "e"]
    always = _greso(greso_explore_easy=1.0, greso_explore_hard=1.0, greso_explore_floor=0.0)
    _history(always)
    skip, _ = always.decide(IDS, [0.0] * 6)  # exploration 1: nothing is skipped, even at u = 0
    assert not skip.any()
    with pytest.raises(ValueError, match="6 ids but 2 uniforms"):
        never.decide(IDS, [0.1, 0.2])


def test_adapt_moves_p_toward_the_target_flat_share():
    f = _greso(greso_explore_easy=0.5, greso_explore_hard=0.5, greso_target_flat=0.75, greso_step=0.1,
               greso_explore_min=0.35, greso_explore_max=0.65)
    # targets: all-correct 0.75 / 3 = 0.25, all-wrong 0.75 * 2 / 3 = 0.5 (exact in binary)
    f.adapt(0.25, 0.49)  # easy at its target: skip more (p down); hard below: skip less (p up)
    assert (f.p_easy, f.p_hard) == pytest.approx((0.4, 0.6))
    f.adapt(0.5, 0.0)
    assert (f.p_easy, f.p_hard) == pytest.approx((0.35, 0.65))  # clamped to [min, max]
    f.adapt(0.5, 0.0)
    assert (f.p_easy, f.p_hard) == pytest.approx((0.35, 0.65))


def test_state_round_trip_gives_identical_choices():
    a = _greso(greso_explore_easy=0.6, greso_explore_hard=0.3, greso_step=0.05)
    _history(a)
    a.adapt(0.9, 0.0)
    b = _greso(greso_explore_easy=0.6, greso_explore_hard=0.3, greso_step=0.05)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))  # plain containers
    u = np.random.default_rng(3).random((20, len(IDS)))
    for row in u:
        sa, sb = a.decide(IDS, row)[0], b.decide(IDS, row)[0]
        assert sa.tolist() == sb.tolist()
        kinds = ["all_correct" if s else "mixed" for s in sa]
        a.observe(IDS, kinds), b.observe(IDS, kinds)
        a.adapt(0.2, 0.3), b.adapt(0.2, 0.3)
    assert a.state_dict() == b.state_dict() and a.p_easy != 0.6


def test_prediction_auc_by_hand():
    f = _greso()
    for pid, kind in [("a", "all_correct"), ("a", "all_correct"), ("b", "mixed"), ("a", "mixed"), ("b", "all_correct")]:
        f.observe([pid], [kind])
    # recorded (z_easy before the group, kind): (0, AC) (1, AC) (0, mixed) (2, mixed) (0, AC)
    # all-correct: positives {0, 1, 0} vs negatives {0, 2}: pairs .5 + 0 + 1 + 0 + .5 + 0 = 2 of 6
    auc = f.prediction_auc()
    assert auc["all_correct"]["auc"] == pytest.approx(1 / 3)
    assert (auc["all_correct"]["positives"], auc["all_correct"]["negatives"]) == (3, 2)
    assert auc["all_wrong"]["auc"] is None and "one class only" in auc["all_wrong"]["reason"]
    last = f.prediction_auc(last=2)  # (2, mixed), (0, AC): the positive scores below the negative
    assert last["all_correct"]["auc"] == pytest.approx(0.0)


def test_flat_group_auc_by_hand():
    p = np.array([0.9, 0.2, 0.5])
    nan = np.nan
    y = np.array([[1, 1, 1, 0], [0, 0, 0, 0], [1, 0, nan, nan]], dtype=float)
    r = flat_group_auc(p, y, group_size=2)
    # groups: (p0, all-correct) (p0, mixed) (p1, all-wrong) (p1, all-wrong) (p2, mixed); (p2, no outcome) left out
    assert r["groups"] == 5 and r["group_size"] == 2
    # all-correct, score p^2: .81 vs {.81 (tie), .04, .04, .25} -> 3.5 / 4
    assert r["all_correct"]["auc"] == pytest.approx(0.875)
    # all-wrong, score (1 - p)^2: .64, .64 vs {.01, .01, .25} -> 1
    assert r["all_wrong"]["auc"] == pytest.approx(1.0)
    # flat, score p^2 + (1 - p)^2: {.82, .68, .68} vs {.82, .5}: .5 + 1 + 0 + 1 + 0 + 1 = 3.5 / 6
    assert r["flat"]["auc"] == pytest.approx(3.5 / 6)
    none = flat_group_auc(p, np.zeros((3, 4)), group_size=2)  # every group all-wrong
    assert none["all_correct"]["auc"] is None and none["all_wrong"]["auc"] is None
    assert "negative" in none["all_correct"]["reason"] and "positive" in none["all_wrong"]["reason"]
    with pytest.raises(ValueError, match="group_size"):
        flat_group_auc(p, y, group_size=5)
    assert binary_auc([], [])["reason"] == "no groups"


def test_evaluate_estimator_reports_the_flat_auc():
    rng = np.random.default_rng(0)
    m, s = 200, 12
    x = rng.normal(size=(m, 2))
    p = 1 / (1 + np.exp(-3 * x[:, 0]))
    y = (rng.random((m, s)) < p[:, None]).astype(float)
    ids = [f"q{i}" for i in range(m)]
    res = evaluate_estimator(ids, x, y, observed=4, seed=0)
    assert res["flat_group_size"] == 8  # min(8, 12 - 4)
    fa = res["estimators"]["model"]["flat_auc"]
    assert fa["groups"] == 100 and fa["all_correct"]["auc"] > 0.8 and fa["all_wrong"]["auc"] > 0.8
    assert res["baselines"]["pool_mean"]["flat_auc"]["flat"]["auc"] == pytest.approx(0.5)  # constant p
    assert evaluate_estimator(ids, x, y, observed=4, seed=0, group_size=4)["estimators"]["model"]["flat_auc"]["groups"] == 200
    with pytest.raises(ValueError, match=r"group_size must lie in \[1, S - observed\] = \[1, 8\]"):
        evaluate_estimator(ids, x, y, observed=4, group_size=9)
    never = evaluate_estimator(ids[:6], np.zeros((6, 2)), np.zeros((6, 4)), observed=1)  # degenerate: no crash
    assert never["estimators"]["posterior"]["flat_auc"]["all_correct"]["auc"] is None
    assert any("flat-group AUC (all-correct" in n for n in never["notes"])


def _greso_plan(updates: int, **keys) -> str:
    """Arm ``greso`` on a pool of 6 = m x B candidates: every update's candidates are the whole pool (a
    fresh permutation)."""
    return selection_plan("greso", updates=updates, pool=6, arm="greso", **keys)


@pytest.mark.parametrize("explore", [0.0, 1.0])
def test_greso_in_a_run_skips_solved_prompts_and_charges_dropped_groups(tmp_path, explore):
    run = parse_plan(_greso_plan(2, greso_explore_easy=explore, greso_explore_floor=0.0, greso_step=0.0)).arm("greso")
    summary = run_training(run, tmp_path / "r", task=ScoredTask("always", train_size=16))
    sel = selection_records(tmp_path / "r")
    # update 0: no history; all 6 candidates rolled out, all flat: 2 filled in, 4 dropped
    assert (sel[0]["skipped"], sel[0]["drawn_groups"], sel[0]["filled"], sel[0]["dropped_groups"]) == (0, 6, 2, 4)
    assert sel[0]["realized_flat_share"] == 1.0 and sel[0]["realized_all_correct_share"] == 1.0
    if explore == 0.0:  # every prompt solved last time: all 6 skipped, 2 rolled out anyway to make B groups
        assert (sel[1]["skipped"], sel[1]["skipped_all_correct"], sel[1]["skipped_all_wrong"]) == (6, 6, 0)
        assert (sel[1]["drawn_groups"], sel[1]["unskipped"], sel[1]["dropped_groups"]) == (2, 2, 0)
        assert sel[1]["selection_tokens"] == 0 and sel[1]["selection_seconds"] > 0
    else:  # exploration 1: nothing skipped, the same as dynamic sampling
        assert (sel[1]["skipped"], sel[1]["drawn_groups"], sel[1]["dropped_groups"]) == (0, 6, 4)
        assert sel[1]["selection_tokens"] > 0
    assert sel[1]["predicted_flat"] == 6
    assert sel[1]["prediction_auc"]["all_correct"]["auc"] is None  # one class only: said, not crashed
    led = summary["ledger"]
    assert led["generated_tokens"]["selection"] == sum(s["selection_tokens"] for s in sel) > 0
    assert led["flops"]["selection"] == pytest.approx(sum(s["selection_flops"] for s in sel))
    assert led["device_seconds"]["selection"] == pytest.approx(sum(s["selection_seconds"] for s in sel))


def test_greso_resumes_exactly(tmp_path):
    run = parse_plan(_greso_plan(4, greso_explore_easy=0.3, greso_explore_hard=0.3, greso_step=0.05)).arm("greso")
    with pytest.raises(Killed):
        run_training(run, tmp_path / "killed", task=ScoredTask(train_size=16), after_update=kill_at(2))
    resumed = run_training(run, tmp_path / "killed", task=ScoredTask(train_size=16))
    straight = run_training(run, tmp_path / "straight", task=ScoredTask(train_size=16))
    drop = ("selection_seconds",)
    a = [{k: v for k, v in x.items() if k not in drop} for x in selection_records(tmp_path / "killed")]
    b = [{k: v for k, v in x.items() if k not in drop} for x in selection_records(tmp_path / "straight")]
    assert len(a) == 4 and a == b
    assert any(x["skipped"] for x in b) and b[-1]["explore_easy_next"] != 0.3  # the filter and the p update acted
    assert resumed["ledger"]["generated_tokens"] == straight["ledger"]["generated_tokens"]


def test_bad_greso_keys_are_refused():
    cfg = parse_selection({"selection": "greso", "greso_step": 0, "greso_explore_easy": 1})
    assert cfg["greso_step"] == 0.0 and cfg["greso_explore_easy"] == 1.0 and cfg["greso_target_flat"] == 0.25
    assert "greso_step" not in parse_selection({"selection": "dynamic"})  # other rules' settings unchanged
    with pytest.raises(ValueError, match='greso_step applies to selection = "greso" only, not \'half\'; remove it'):
        parse_selection({"selection": "half", "greso_step": 0.1})
    with pytest.raises(ValueError, match=r"greso_explore_easy must be a probability in \[0, 1\], got 1.5"):
        parse_selection({"selection": "greso", "greso_explore_easy": 1.5})
    with pytest.raises(ValueError, match="greso_explore_min .* must not exceed greso_explore_max"):
        parse_selection({"selection": "greso", "greso_explore_min": 0.9, "greso_explore_max": 0.2})
    with pytest.raises(ValueError, match="greso_step must be a number"):
        parse_selection({"selection": "greso", "greso_step": "fast"})
    with pytest.raises(ValueError, match=r"greso_step must lie in \[0, 1\]"):
        parse_selection({"selection": "greso", "greso_step": -0.1})
    with pytest.raises(ValueError, match="greso_target_flat"):
        SelectionConfig(rule="dynamic", greso_target_flat=0.5)
    with pytest.raises(PlanError, match=r"\[arms.greso\] selection: greso_explore_hard must be a probability"):
        parse_plan(_greso_plan(1, greso_explore_hard=2.0))
    with pytest.raises(PlanError, match="greso_explore_flor"):
        parse_plan(_greso_plan(1, greso_explore_flor=0.0))
