"""Three refusals a trial user met, mended (reference curves for ``gradprobe probe --reference-curve FILE``; the
fourth, a replicate's source study, is in tests/study/test_replicate_source_checks.py).

Before:
1. a ``metrics.jsonl`` or TRL log with skipped (NaN/null) evals and too few evals left named the file only in the note
   after the refusal's main sentence (without skipped evals the first sentence names it);
2. a CSV's and a study's too-few-evals refusals named neither the file nor the study, and gave a gradprobe plan's
   fix (``[eval] every_tokens``) for a CSV, with no arm or folder for a study; they now read as metrics.jsonl's;
3. a TRL log whose step-0 eval is NaN or null was told to set ``eval_on_start=True``, which it had.
"""

from __future__ import annotations

import json
import re

import pytest

from gradprobe.forecast import load_reference_curve
from gradprobe.forecast.curve_fit import TooFewEvalsError
from gradprobe.forecast.curves import ReferenceCurve

#: The one shape of every reader's too-few-evals refusal: count, source, free parameters, minimum, fix.
SHAPE = re.compile(r"the curve has evals at (\d+) distinct update count\(s\) > 0 in (?P<src>.+?) and the fit has "
                   r"(\d+) free parameters \([A-Za-z0-9_, ]+\): it needs evals at at least \3 distinct update counts "
                   r"> 0(, or an eval at update 0 \(R0\))?; (?P<fix>evaluate .*)")
PLAN_FIX = "evaluate more often (e.g. `[eval] every_tokens` smaller than the budget)"
CSV_FIX = "evaluate more often (evals at more update counts, one row of the CSV per eval)"
TRL_MORE = ("evaluate more often: in TRL's TrainingArguments (GRPOConfig) set eval_strategy=\"steps\" with a smaller "
            "eval_steps")
NAN_WHY = "a NaN is no eval (a diverged or failed eval)"


def _refusal(read, *args, **kw) -> TooFewEvalsError:
    with pytest.raises(TooFewEvalsError) as info:
        read(*args, **kw)
    assert "\n" not in str(info.value)
    return info.value


def _metrics(path, rows):
    """A metrics.jsonl of eval lines (update, greedy_accuracy), a value of None written as null."""
    path.write_text("".join(json.dumps({"eval": True, "update": u, "greedy_accuracy": v}) + "\n" for u, v in rows)
                    .replace('"greedy_accuracy": "nan"', '"greedy_accuracy": NaN'))
    return path


def _trl(path, entries):
    """A TRL trainer_state.json of eval entries (step, eval_accuracy); ``"nan"`` is written as NaN."""
    log = [{"step": s, "eval_accuracy": v} for s, v in entries]
    path.write_text(json.dumps({"log_history": log}).replace('"nan"', "NaN"))
    return path


# 1 -------------------------------------------------------------------------------------------------------------


def test_a_metrics_jsonl_with_skipped_evals_names_the_file_in_the_refusals_first_sentence(tmp_path):
    path = _metrics(tmp_path / "metrics.jsonl", [(0, 0.1), (10, 0.3), (20, "nan")])
    e = _refusal(load_reference_curve, str(path))
    assert str(e) == (  # was: "... > 0 and the fit has ...": the file named only in the note after the fix
        f"the curve has evals at 1 distinct update count(s) > 0 in metrics.jsonl of 1 run(s) ({path}) and the fit has "
        f"3 free parameters (A, n_mid, B): it needs evals at at least 3 distinct update counts > 0; {PLAN_FIX}; 1 eval "
        f"line(s) skipped for a NaN 'greedy_accuracy' ({path}:3): {NAN_WHY}; rerun those evals to use them")
    assert str(path) in str(e).split(";")[0]
    assert e.eval_hint == PLAN_FIX and e.updates.tolist() == [0.0, 10.0]  # still the marker, with what it judged
    (tmp_path / "clean").mkdir()
    clean = _metrics(tmp_path / "clean" / "metrics.jsonl", [(0, 0.1), (10, 0.3)])
    first = str(_refusal(ReferenceCurve.from_metrics, clean)).split(";")[0]  # no skipped evals: as it was
    assert first == str(e).split(";")[0].replace(str(path), str(clean))


@pytest.mark.parametrize("kind, value", [("NaN", "nan"), ("null", None)])
def test_a_trl_log_whose_skipped_evals_lead_the_refusal_names_the_file_first(tmp_path, kind, value):
    path = _trl(tmp_path / "trainer_state.json", [(0, 0.1), (10, 0.3), (20, value), (30, value)])
    msg = str(_refusal(ReferenceCurve.from_trl_state, path))
    held = "NaN in 2 eval(s)" if kind == "NaN" else "null"
    assert msg.startswith(  # was: "... > 0 and the fit has ...; evals at 2 other update count(s) ..."
        f"the curve has evals at 1 distinct update count(s) > 0 in TRL trainer_state.json of 1 run(s) ({path}) and the "
        "fit has 3 free parameters (A, n_mid, B): it needs evals at at least 3 distinct update counts > 0; evals at 2 "
        f"other update count(s) are in the file(s) but hold no value for 'eval_accuracy' ({held}), so evaluating more "
        "often would not help: rerun those evals")
    assert msg.endswith(f"; 2 eval(s) of {path} skipped for a {kind} 'eval_accuracy' (step(s) 20, 30): a {kind} is no "
                        "eval (a " + ("diverged or failed eval)" if kind == "NaN"
                                      else "failed or skipped eval, logged without a value)"))


# 2 -------------------------------------------------------------------------------------------------------------


def test_a_csvs_too_few_evals_refusal_names_the_file_and_the_fix_as_metrics_jsonl_does(tmp_path):
    path = tmp_path / "curve.csv"
    path.write_text("update,accuracy\n0,0.1\n10,0.3\n")
    e = _refusal(load_reference_curve, str(path))
    assert str(e) == (  # was: no file named, and a gradprobe plan's [eval] every_tokens as the fix
        f"the curve has evals at 1 distinct update count(s) > 0 in CSV {path} and the fit has 3 free parameters (A, "
        f"n_mid, B): it needs evals at at least 3 distinct update counts > 0; {CSV_FIX}")
    path.write_text("update,accuracy\n0,0.1\n10,0.3\n20,\n")  # with a blank cell: still named first, still the marker
    assert str(_refusal(ReferenceCurve.from_csv, path)) == (
        f"the curve has evals at 1 distinct update count(s) > 0 in CSV {path} and the fit has 3 free parameters (A, "
        f"n_mid, B): it needs evals at at least 3 distinct update counts > 0; {CSV_FIX}; 1 line(s) of {path} skipped "
        "for an empty or NaN cell (line 4 column 'accuracy'): a line without a value is no eval (fill those cells in "
        "if they are evals)")


def test_a_studys_too_few_evals_refusal_names_the_study_arm_and_folder(tmp_path):
    study = tmp_path / "study_a"
    study.mkdir()
    (study / "runs.csv").write_text("arm,seed,update,accuracy\n" + "".join(
        f"grpo,{s},{u},{0.1 + u / 100}\nsft,{s},{u},0.1\nsft,{s},{u + 5},0.2\n" for s in (1, 2) for u in (0, 10)))
    e = _refusal(load_reference_curve, str(study))
    assert str(e) == (  # was: no study named, and no arm or folder in the fix
        f"the curve has evals at 1 distinct update count(s) > 0 in study study_a arm grpo ({study / 'runs.csv'}, 2 "
        "seeds x 2-2 evals) and the fit has 3 free parameters (A, n_mid, B): it needs evals at at least 3 distinct "
        f"update counts > 0; evaluate arm 'grpo' more often: copy its plan.toml ({study / 'plan.toml'}; the study's "
        "frozen plan, which the study refuses to resume once edited), set `[eval] every_tokens` smaller than the "
        "budget and run it with a new --out, or pass the folder of a study whose 'grpo' arm has evals at more update "
        "counts")
    with open(study / "runs.csv", "a") as f:
        f.write("grpo,1,20,\n")  # a blank accuracy: named after the refusal, which stays the marker
    msg = str(_refusal(ReferenceCurve.from_study, study))
    assert msg.startswith(f"the curve has evals at 1 distinct update count(s) > 0 in study study_a arm grpo ({study}")
    assert msg.endswith(f"; 1 line(s) of {study / 'runs.csv'} skipped for an empty or NaN cell (line 14 column "
                        "'accuracy'): a line without a value is no eval (fill those cells in if they are evals)")


def test_the_three_readers_refusals_read_alike(tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text("update,accuracy\n0,0.1\n10,0.3\n")
    study = tmp_path / "s"
    study.mkdir()
    (study / "runs.csv").write_text("arm,seed,update,accuracy\ngrpo,1,0,0.1\ngrpo,1,10,0.3\n")
    jsonl = _metrics(tmp_path / "metrics.jsonl", [(0, 0.1), (10, 0.3), (20, None)])
    found = {}
    for spec in (csv, study, jsonl):
        m = SHAPE.fullmatch(str(_refusal(load_reference_curve, str(spec))).split("; 1 eval line(s)")[0])
        assert m is not None, spec
        found[spec] = (m["src"], m["fix"].split(" (")[0].split(":")[0])
    assert found == {csv: (f"CSV {csv}", "evaluate more often"),
                     study: (f"study s arm grpo ({study / 'runs.csv'}, 1 seeds x 2-2 evals)",
                             "evaluate arm 'grpo' more often"),
                     jsonl: (f"metrics.jsonl of 1 run(s) ({jsonl})", "evaluate more often")}


# 3 -------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, value", [("NaN", "nan"), ("null", None)])
def test_a_trl_step0_eval_that_is_not_a_number_is_not_told_to_set_eval_on_start(tmp_path, kind, value):
    path = _trl(tmp_path / "trainer_state.json", [(0, value), (10, 0.3), (20, 0.4)])
    msg = str(_refusal(load_reference_curve, str(path)))
    assert "eval_on_start=True for the eval at step 0" not in msg  # was: the advice, for a log that has that eval
    assert msg == (
        f"the curve has evals at 2 distinct update count(s) > 0 in TRL trainer_state.json of 1 run(s) ({path}) and the "
        "fit has 4 free parameters (A, n_mid, B, R0): it needs evals at at least 4 distinct update counts > 0, or an "
        f"eval at update 0 (R0); {TRL_MORE}; the eval at step 0 is in {path} (a step-0 eval is logged) but is not a "
        f"number ({kind} 'eval_accuracy'): rerun that eval, or name another eval key (--reference-curve-metric KEY), "
        "or give the initial policy's accuracy (initial_accuracy=, gradprobe probe --initial-accuracy); 1 eval(s) of "
        f"{path} skipped for a {kind} 'eval_accuracy' (step(s) 0): a {kind} is no eval (a "
        + ("diverged or failed eval)" if kind == "NaN" else "failed or skipped eval, logged without a value)"))


def test_a_trl_step0_hint_names_only_the_files_whose_step0_eval_is_no_number(tmp_path):
    a = _trl(tmp_path / "a.json", [(0, "nan"), (10, 0.3), (20, 0.4), (20, "nan")])
    b = _trl(tmp_path / "b.json", [(10, 0.3), (20, 0.4)])  # no step-0 eval: a's, rerun, gives the curve its R0
    msg = str(_refusal(ReferenceCurve.from_trl_state, [a, b]))
    assert msg.startswith(f"the curve has evals at 2 distinct update count(s) > 0 in TRL trainer_state.json of 2 "
                          f"run(s) ({a}, ...) and the fit")
    assert (f"; {TRL_MORE}; the eval at step 0 is in {a} (a step-0 eval is logged) but is not a number (NaN "
            "'eval_accuracy'): rerun that eval") in msg
    assert "eval_on_start=True for" not in msg
    assert msg.endswith(f"; 2 eval(s) of {a} skipped for a NaN 'eval_accuracy' (step(s) 0, 20): {NAN_WHY}; rerun "
                        "those evals to use them")  # a NaN at step 20 too: the note keeps its fix
    plain = _trl(tmp_path / "c.json", [(10, 0.3), (20, 0.4)])  # no step-0 entry at all: the advice stands
    assert str(_refusal(ReferenceCurve.from_trl_state, plain)).endswith(
        "eval_on_start=True for the eval at step 0 (or give the initial policy's accuracy: initial_accuracy=, "
        "gradprobe probe --initial-accuracy)")
