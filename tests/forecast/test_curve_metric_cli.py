"""--reference-curve-metric: a TRL GRPOTrainer's trainer_state.json (eval_rewards/<fn>/mean, no eval_accuracy) and a
metrics.jsonl's other accuracy are usable from the command line, and the key is refused where it means nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.forecast import CurveError, load_reference_curve

S0 = [(0, 0.676), (2, 0.71), (5, 0.737), (10, 0.739), (14, 0.762), (20, 0.775), (29, 0.754), (42, 0.783), (57, 0.788)]
KEY = "eval_rewards/accuracy_reward/mean"
SMALL = ["--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4", "--no-progress",
         "--bootstrap", "100", "--rewards", "outcome"]


def _grpo_trainer_state(tmp_path):
    """A GRPOTrainer's log: a format reward beside the accuracy one, and the summed eval_reward."""
    hist = [{"step": u, KEY: a, "eval_rewards/format_reward/mean": 0.9, "eval_reward": a + 0.9} for u, a in S0]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": hist}))
    return path


def test_a_grpo_trainer_state_needs_its_key_and_the_error_names_the_option(tmp_path):
    path = _grpo_trainer_state(tmp_path)
    with pytest.raises(CurveError) as e:
        load_reference_curve(path)
    msg = str(e.value)
    assert "no log_history entry has 'eval_accuracy'" in msg
    assert f"a GRPOTrainer's per-reward means: {KEY}, eval_rewards/format_reward/mean" in msg
    assert "--reference-curve-metric KEY (gradprobe probe)" in msg and "metric=KEY" in msg
    curve = load_reference_curve(path, metric=KEY)
    assert curve.params["R0"] == pytest.approx(67.6)
    assert curve.points["accuracy"].tolist() == pytest.approx([100 * a for _, a in S0])


def test_the_metric_of_a_metrics_jsonl_is_read(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"eval": True, "update": u, "greedy_accuracy": a, "sampled_accuracy": a - 0.2})
                            + "\n" for u, a in S0))
    greedy, sampled = load_reference_curve(path), load_reference_curve(path, metric="sampled_accuracy")
    assert greedy.params["R0"] == pytest.approx(67.6) and sampled.params["R0"] == pytest.approx(47.6)


@pytest.mark.parametrize("spec", ["default", "curve.csv", "curve.json"])
def test_a_metric_for_a_source_without_eval_keys_is_refused(tmp_path, spec):
    (tmp_path / "curve.csv").write_text("update,accuracy\n" + "".join(f"{u},{a}\n" for u, a in S0))
    load_reference_curve("default").save(tmp_path / "curve.json")
    where = spec if spec == "default" else str(tmp_path / spec)
    with pytest.raises(CurveError, match=r"--reference-curve-metric 'x' picks an eval key of a TRL trainer_state.json "
                                         r"or a metrics.jsonl, but --reference-curve .* which has none; leave it out"):
        load_reference_curve(where, metric="x")
    with pytest.raises(CurveError, match="--reference-curve-metric ' ' is empty"):
        load_reference_curve(where, metric=" ")


def test_cli_reads_a_grpo_trainer_state_with_the_metric(tmp_path, capsys):
    path = _grpo_trainer_state(tmp_path)
    out = tmp_path / "p"
    assert main(["probe", *SMALL, "--reference-curve", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--reference-curve-metric KEY" in err and not out.exists()
    assert main(["probe", *SMALL, "--reference-curve", str(path), "--reference-curve-metric", KEY,
                 "--out", str(out)]) == 0
    forecast = json.loads((out / "probe.json").read_text())["forecast"]
    assert forecast["available"] and "R0 67.6" in forecast["curve"]


def test_cli_refuses_a_metric_without_a_curve(tmp_path, capsys):
    assert main(["probe", *SMALL, "--reference-curve-metric", KEY, "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "--reference-curve-metric says how --reference-curve is read, which is not given" in err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("key", ["rewards/accuracy_reward/mean", "epoch", "loss"])
def test_a_trl_key_that_is_no_eval_metric_is_refused(tmp_path, key):
    """A GRPOTrainer's training-batch reward (all a run without an eval set logs), the epoch or the loss is not
    held-out accuracy; they were read as a curve without a word."""
    path = _grpo_trainer_state(tmp_path)
    with pytest.raises(CurveError, match=rf"--reference-curve-metric '{key}' is not an eval metric of the TRL "
                                         r"trainer state .* \(TRL names those eval_\.\.\.\)"):
        load_reference_curve(path, metric=key)
    with pytest.raises(CurveError, match="is not an eval metric"):
        load_reference_curve(tmp_path, metric=key)  # the checkpoint folder holding it


def test_a_metric_that_is_no_string_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match=r"metric must be a string .*, got 5 \(int\)"):
        load_reference_curve(_grpo_trainer_state(tmp_path), metric=5)


def test_a_trl_log_without_evals_or_with_a_negative_step_says_what_to_do(tmp_path):
    empty, train_only, neg = tmp_path / "empty.json", tmp_path / "train.json", tmp_path / "neg.json"
    empty.write_text(json.dumps({"log_history": []}))
    train_only.write_text(json.dumps({"log_history": [{"step": s, "loss": 0.1, "rewards/accuracy_reward/mean": 0.5}
                                                      for s in (1, 2, 3)]}))
    for path in (empty, train_only):
        with pytest.raises(CurveError, match=r"no log_history entry has .*, nor any eval metric \(eval_\.\.\.\): the "
                                             r"run was not evaluated; give GRPOTrainer an eval_dataset and evaluate"):
            load_reference_curve(path, metric=KEY)
    neg.write_text(json.dumps({"log_history": [{"step": -5, KEY: 0.6}] + [{"step": u, KEY: a} for u, a in S0]}))
    with pytest.raises(CurveError, match=r"neg.json: log_history\[0\] field 'step' = -5 must be an optimizer step "
                                         r"count >= 0; fix or delete that entry"):
        load_reference_curve(neg, metric=KEY)


def test_a_metrics_jsonl_without_the_key_lists_what_its_evals_hold(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"update": 1, "loss": 0.3}) + "\n" + "".join(
        json.dumps({"eval": True, "update": u, "greedy_accuracy": a, "sampled_accuracy": a - 0.2}) + "\n"
        for u, a in S0))
    with pytest.raises(CurveError, match=r"no eval line has 'eval_accuracy'; its eval lines hold "
                                         r"\['greedy_accuracy', 'sampled_accuracy'\]: name the held-out accuracy "
                                         r".* --reference-curve-metric"):
        load_reference_curve(path, metric="eval_accuracy")
    path.write_text(json.dumps({"update": 1, "loss": 0.3}) + "\n")
    with pytest.raises(CurveError, match=r"has no eval lines .*: the run was not evaluated; evaluate more often"):
        load_reference_curve(path)


def _low_points_csv(tmp_path):
    """A curve in points that stays under 1 point: auto reads it as fractions (20-90 points)."""
    path = tmp_path / "low.csv"
    path.write_text("update,accuracy\n" + "".join(f"{u},{0.2 + 0.7 * i / 8:.4f}\n" for i, (u, _) in enumerate(S0)))
    return path


def test_the_accuracy_scale_of_a_csv_can_be_given(tmp_path):
    path = _low_points_csv(tmp_path)
    auto = load_reference_curve(path)
    assert auto.params["R0"] == pytest.approx(20.0) and any("accuracy read as fractions" in n for n in auto.notes)
    points = load_reference_curve(path, accuracy_scale="points")
    assert points.params["R0"] == pytest.approx(0.2)
    assert load_reference_curve(path, accuracy_scale="fraction").params["R0"] == pytest.approx(20.0)
    with pytest.raises(CurveError, match=r"--reference-curve-scale 'percent' must be auto, fraction .* or points"):
        load_reference_curve(path, accuracy_scale="percent")
    trl = load_reference_curve(_grpo_trainer_state(tmp_path), metric=KEY, accuracy_scale="fraction")
    assert trl.params["R0"] == pytest.approx(67.6)


@pytest.mark.parametrize("spec", ["default", "curve.json", "study"])
def test_a_scale_for_a_source_whose_scale_is_fixed_is_refused(tmp_path, spec):
    load_reference_curve("default").save(tmp_path / "curve.json")
    where = {"default": "default", "curve.json": str(tmp_path / "curve.json"),
             "study": str(Path(__file__).resolve().parents[2] / "data" / "study_tiny")}[spec]
    with pytest.raises(CurveError, match=r"--reference-curve-scale points says how a CSV's, a metrics.jsonl's or a "
                                         r"TRL trainer state's accuracies are read, but .* whose scale is fixed"):
        load_reference_curve(where, accuracy_scale="points")


def test_cli_scale_and_the_scale_note_of_a_users_curve(tmp_path, capsys):
    path = _low_points_csv(tmp_path)
    assert main(["probe", *SMALL, "--reference-curve-scale", "points", "--out", str(tmp_path / "x")]) == 2
    assert "--reference-curve-scale says how --reference-curve is read, which is not given" in capsys.readouterr().err
    assert main(["probe", *SMALL, "--reference-curve", str(path), "--out", str(tmp_path / "auto")]) == 0
    notes = json.loads((tmp_path / "auto" / "probe.json").read_text())["forecast"]["notes"]
    assert [n for n in notes if "accuracy read as fractions in [0, 1] (range 0.2-0.9)" in n
            and "(--reference-curve-scale points)" in n]
    assert main(["probe", *SMALL, "--reference-curve", str(path), "--reference-curve-scale", "points",
                 "--out", str(tmp_path / "points")]) == 0
    section = json.loads((tmp_path / "points" / "probe.json").read_text())["forecast"]
    assert "R0 0.20" in section["curve"]
    assert [n for n in section["notes"] if "accuracy read as points (accuracy_scale='points')" in n]
