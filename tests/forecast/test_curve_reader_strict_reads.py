"""What the reference-curve readers used to read silently, or fail on without naming the file: a damaged run
``config.json`` beside a ``metrics.jsonl`` (the run's update batch, model and task dropped), values whose scale
cannot be told under ``auto`` (a sum of 0/1 rewards read as accuracy points), JSON nested too deep (a bare
RecursionError), a key given twice in one JSON object (the last value read), and update counts that are no whole
number. Each is now a CurveError naming the file, what is wrong and the fix."""

from __future__ import annotations

import codecs
import json

import pytest

from forecast_helpers import EVALS, eval_fraction, metrics_log, trl_state
from gradprobe.forecast.curves import CurveError, ReferenceCurve, default_curve_path, load_reference_curve

#: A run's config.json as `gradprobe train` writes it (the fields the curve's metadata reads).
CONFIG = {"run": {"seed": 0, "model": {"name": "tiny"},
                  "task": {"name": "chain_sum", "config": {"max_terms": 4, "min_terms": 3}},
                  "train": {"prompts_per_update": 64, "group": 8, "lr": 1e-4, "loss_type": "grpo"}}}


def _run(tmp_path, config_text: str | bytes | None, name="run"):
    """A `gradprobe train` run folder: its metrics.jsonl and, unless None, its config.json holding ``config_text``."""
    run = tmp_path / name
    run.mkdir()
    metrics_log(run / "metrics.jsonl")
    if isinstance(config_text, bytes):
        (run / "config.json").write_bytes(config_text)
    elif config_text is not None:
        (run / "config.json").write_text(config_text)
    return run


def test_a_good_or_absent_config_is_read_and_a_damaged_one_refused(tmp_path):
    good = ReferenceCurve.from_metrics(_run(tmp_path, json.dumps(CONFIG), "good"))
    assert (good.metadata["update_prompts"], good.metadata["update_group"]) == (64, 8)
    assert good.metadata["model"] == "tiny" and good.metadata["task"] == "chain_sum:max_terms=4,min_terms=3"
    absent = ReferenceCurve.from_metrics(_run(tmp_path, None, "absent"))  # no config.json: no metadata, no error
    assert absent.metadata.get("update_prompts") is None
    cut = _run(tmp_path, json.dumps(CONFIG, indent=1)[:-3], "cut")  # a copy cut 3 characters short
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(cut))
    msg = str(info.value)
    assert msg.startswith(f"{cut / 'config.json'} (the run's config, read for the curve's model, task and update "
                          "batch) is not valid JSON (")
    assert "the file is truncated (it ends mid-value); `gradprobe train` writes it at the start of the run: put back " \
           "the run's own config.json" in msg and "--update-prompts/--update-group" in msg


@pytest.mark.parametrize("config, field, shown", [
    ({"run": {"model": "tiny"}}, "field 'run.model'", '"tiny"'),
    ({"run": "grpo"}, "field 'run'", '"grpo"'),
    ({"run": {"train": [64, 8]}}, "field 'run.train'", "[64, 8]"),
    ({"run": {"task": {"name": "chain_sum", "config": "max_terms=4"}}}, "field 'run.task.config'", '"max_terms=4"'),
    ([CONFIG], "the document", '[{"run": {"seed": 0, "model": {"name"...'),
])
def test_a_config_whose_table_is_no_object_is_refused(tmp_path, config, field, shown):
    run = _run(tmp_path, json.dumps(config))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_metrics(run)
    assert str(info.value).startswith(
        f"{run / 'config.json'} (the run's config, read for the curve's model, task and update batch): {field} is "
        f"{shown}, not the JSON object `gradprobe train` writes there, so the run's model, task and update batch "
        "cannot be read; `gradprobe train` writes it at the start of the run")


def test_a_utf16_config_is_named_with_its_fix(tmp_path):
    run = _run(tmp_path, codecs.BOM_UTF16_LE + json.dumps(CONFIG).encode("utf-16-le"))
    cfg = run / "config.json"
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(run))
    assert str(info.value) == (
        f"{cfg} (the run's config, read for the curve's model, task and update batch) cannot be read as JSON: it is "
        f"UTF-16 text; convert it (`iconv -f utf-16 -t utf-8 {cfg} > {run / 'config_utf8.json'}`), then put the "
        "converted file in its place (config.json)")


def _reward_state(path, values):
    path.write_text(json.dumps({"log_history": [{"step": s, "eval_reward": v} for s, v in zip(EVALS, values)]}))
    return path


def test_values_between_1_and_5_are_refused_under_auto_and_read_when_the_scale_is_given(tmp_path):
    """A sum of three 0/1 rewards (1.2-2.31) was read as accuracy points and gave a confident verdict."""
    rewards = [1.2, 1.45, 1.65, 1.89, 2.1, 2.25, 2.29, 2.31]
    state = _reward_state(tmp_path / "trainer_state.json", rewards)
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(state), metric="eval_reward")
    assert str(info.value).startswith(
        f"trainer_state eval_reward: accuracy values range 1.2-2.31 (the largest at {state} log_history[7] (step "
        "160)), above 1 (so no fractions) but no higher than 5, so their scale cannot be told")
    assert "pass accuracy_scale='points' (on the command line, --reference-curve-scale points)" in str(info.value)
    points = load_reference_curve(str(state), metric="eval_reward", accuracy_scale="points")
    assert points.points["accuracy"].tolist() == rewards
    csv = tmp_path / "low.csv"
    csv.write_text("update,accuracy\n" + "".join(f"{u},{v}\n" for u, v in zip(EVALS, rewards)))
    with pytest.raises(CurveError, match=r"low.csv accuracy: accuracy values range 1\.2-2\.31 \(the largest at line "
                                         r"9\)"):
        ReferenceCurve.from_csv(csv)
    assert ReferenceCurve.from_csv(csv, accuracy_scale="points").points["accuracy"].max() == 2.31
    hard = tmp_path / "hard.csv"  # a hard task's points passing 5: read as points, as before
    hard.write_text("update,accuracy\n0,0.4\n2,0.6\n5,1.2\n10,2.5\n20,4.0\n40,6.0\n")
    assert ReferenceCurve.from_csv(hard).points["accuracy"].max() == 6.0


def test_json_nested_too_deep_is_a_curve_error_naming_the_file(tmp_path):
    deep = tmp_path / "ts_deep.json"
    deep.write_text('{"log_history": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(deep))
    assert str(info.value).startswith(f"reference curve file {str(deep)!r}: its arrays or objects nest deeper than "
                                      "Python's JSON parser reads (its recursion limit, ")
    assert str(info.value).endswith("the file is damaged; re-copy trainer_state.json from the TRL run's output_dir "
                                    "(its last checkpoint-N/), or pass that output_dir itself to --reference-curve")
    with pytest.raises(CurveError, match=rf"^{deep} is not a trainer state as TRL writes it: its arrays or objects"):
        ReferenceCurve.from_trl_state(deep)
    saved = tmp_path / "saved.json"
    saved.write_text('{"format": "gradprobe.reference_curve", "notes": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(CurveError, match=r"its arrays or objects nest deeper.*rebuild it from its source"):
        ReferenceCurve.load(saved)
    log = tmp_path / "metrics.jsonl"
    log.write_text(json.dumps({"eval": True, "update": 0, "greedy_accuracy": 0.5}) + "\n"
                   + '{"update": 1, "x": ' + "[" * 5000 + "]" * 5000 + "}\n")
    with pytest.raises(CurveError, match=rf"^{log}:2: its arrays or objects nest deeper"):
        ReferenceCurve.from_metrics(log)


def test_a_key_given_twice_is_refused_naming_the_key_and_the_file(tmp_path):
    entry = tmp_path / "trainer_state.json"
    entry.write_text('{"log_history": [{"eval_accuracy": 0.4, "step": 0}, {"eval_accuracy": 0.55, "step": 5}, '
                     '{"eval_accuracy": 0.63, "step": 10}, {"eval_accuracy": 0.7, "step": 20, "eval_accuracy": 0.1}, '
                     '{"eval_accuracy": 0.75, "step": 40}]}')
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(entry))
    assert str(info.value) == (f"{entry} is not a trainer state as TRL writes it: an object names the key "
                               '"eval_accuracy" twice (0.7, then 0.1): JSON readers keep one of the two (Python\'s '
                               "json the last, silently), so which value was meant cannot be told; re-copy "
                               "trainer_state.json from the TRL run's output_dir (its last checkpoint-N/), or pass "
                               "that output_dir itself to --reference-curve")
    two = tmp_path / "two.json"  # a second log_history replaced the first
    two.write_text('{"log_history": [], "log_history": [{"eval_accuracy": 0.4, "step": 0}]}')
    with pytest.raises(CurveError, match=rf"reference curve file '{two}': an object names the key \"log_history\" "
                                         r"twice \(\[\], then \[\{\"eval_accuracy\": 0\.4, \"step\": 0\}\]\)"):
        load_reference_curve(str(two))
    log = tmp_path / "metrics.jsonl"
    log.write_text(json.dumps({"eval": True, "update": 0, "greedy_accuracy": 0.5}) + "\n"
                   + '{"eval": true, "update": 5, "greedy_accuracy": 0.7, "greedy_accuracy": 0.1}\n')
    with pytest.raises(CurveError, match=rf'^{log}:2: an object names the key "greedy_accuracy" twice \(0\.7, then '
                                         r"0\.1\).*; fix or delete that line$"):
        ReferenceCurve.from_metrics(log)
    saved = tmp_path / "curve.json"
    text = default_curve_path().read_text()
    saved.write_text(text.replace('"rmse": ', '"rmse": 0.5, "rmse": ', 1))
    with pytest.raises(CurveError, match=rf"^reference curve file '{saved}': an object names the key \"rmse\" twice "
                                         r"\(0\.5, then .*the file was edited or damaged: rebuild it"):
        load_reference_curve(str(saved))


def test_update_counts_that_are_no_whole_number_are_refused(tmp_path):
    csv = tmp_path / "frac.csv"
    csv.write_text("update,accuracy\n0,0.40\n2.5,0.55\n10,0.63\n20,0.70\n40,0.75\n60,0.77\n")
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(csv))
    assert str(info.value) == (
        f"{csv}, line 3, column 'update': 2.5 is not a whole number of updates (1 such cell(s) in that column): the "
        "column counts the optimizer updates each eval was made after, the curve's x axis; write that update count "
        "(1.0 reads as 1; an epoch or a share of training is no update count: convert it), or delete that line")
    whole = tmp_path / "whole.csv"  # 2.0 reads as 2
    whole.write_text(csv.read_text().replace("2.5,", "2.0,"))
    assert ReferenceCurve.from_csv(whole).points["update"].tolist() == [0, 2, 10, 20, 40, 60]
    state = trl_state(tmp_path / "trainer_state.json",
                      extra=[{"step": 20.5, "eval_accuracy": eval_fraction(20)}])
    with pytest.raises(CurveError, match=rf"^{state}: log_history\[16\] field 'step' = 20\.5 is not a whole number "
                                         r"of optimizer steps: .*write the step that eval was made at \(20\.0 reads as "
                                         r"20\), or delete that entry$"):
        ReferenceCurve.from_trl_state(state)
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"eval": True, "update": u, "greedy_accuracy": eval_fraction(u)}) + "\n"
                           for u in (0, 2, 5.5, 10, 20)))
    with pytest.raises(CurveError, match=rf"^{log}:3: field 'update' = 5\.5 is not a whole number of updates"):
        ReferenceCurve.from_metrics(log)
