"""Evals that exist but hold no value lead the refusal with their own fix, in a ``metrics.jsonl`` and in a TRL
``trainer_state.json`` alike: NaN evals (a diverged or failed eval) that leave too few evals for the fit lead with
rerunning them, not with "evaluate more often" (before, only null evals did); a NaN and a null that only together
leave too few lead with both fixes, said once; a ``metrics.jsonl`` whose evals of the metric are all null says they
are null and names their fix (before: a bare "no eval ... with a value"), as the TRL reader does, and both readers say
which kinds the evals hold (a TRL log's all-NaN evals also name another eval key, as its all-null ones do). The fix in
the lead is not repeated by the skipped evals' note after it."""

from __future__ import annotations

import pytest

from forecast_helpers import metrics_log, trl_state
from gradprobe.forecast.curves import CurveError, ReferenceCurve

TOO_FEW = ("the curve has evals at 1 distinct update count(s) > 0 in {src} and the fit has 3 free parameters (A, "
           "n_mid, B): it needs evals at at least 3 distinct update counts > 0; ")
NAN_FIX = "rerun those evals (if the run diverged there, look at why first)"
NAN_WHY = "a NaN is no eval (a diverged or failed eval)"
TRAIN_NULL_WHY = ("`gradprobe train` writes null for an accuracy it did not measure at that eval (e.g. "
                  "sampled_accuracy between the first and the last eval under [eval] sampled_at = \"ends\"; a failed "
                  "eval may log one too)")
TRL_NULL_WHY = "a null is no eval (a failed or skipped eval, logged without a value)"
GREEDY_ELSE = "or give the curve of a run that measured 'greedy_accuracy' at every eval"
TRL_ELSE = "or name another eval key (--reference-curve-metric KEY)"
SAMPLED_FIX = ("read greedy_accuracy instead (--reference-curve-metric greedy_accuracy; metric='greedy_accuracy'), or "
               "the curve of a run with sampled accuracy at every eval ([eval] sampled_at = \"all\")")


def _lead(k, metric, held, fix):
    return (f"evals at {k} other update count(s) are in the file(s) but hold no value for {metric!r} ({held}), so "
            f"evaluating more often would not help: {fix}")


def _too_few(path) -> str:
    """:data:`TOO_FEW` naming the file ``path`` (a metrics.jsonl or a TRL log) as its first sentence does."""
    kind = "metrics.jsonl" if path.name == "metrics.jsonl" else "TRL trainer_state.json"
    return TOO_FEW.format(src=f"{kind} of 1 run(s) ({path})")


def _refusal(fmt, tmp_path, updates, metric=None, **skipped) -> tuple[str, object]:
    """(the refusal, the file) of a metrics.jsonl (``fmt="metrics"``) or TRL log with values at ``updates`` except
    the NaN and null ones in ``skipped`` (``nan_at=``, ``null_at=``)."""
    if fmt == "metrics":
        path = metrics_log(tmp_path / "metrics.jsonl", updates, metric=metric or "greedy_accuracy", **skipped)
        read, kw = ReferenceCurve.from_metrics, {"metric": metric} if metric else {}
    else:
        path = trl_state(tmp_path / "trainer_state.json", updates, **skipped)
        read, kw = ReferenceCurve.from_trl_state, {}
    with pytest.raises(CurveError) as info:
        read(path, **kw)
    return str(info.value), path


def test_nan_evals_that_leave_too_few_lead_with_rerunning_them_in_a_metrics_jsonl(tmp_path):
    """Values at 0 and 10, NaN at 20 and 30: with their values the evals would pin the fit. A single NaN, with too
    few evals even with its value, keeps "evaluate more often" first and the note its own fix."""
    msg, path = _refusal("metrics", tmp_path, (0, 10, 20, 30), nan_at=(20, 30))
    assert msg == (_too_few(path) + _lead(2, "greedy_accuracy", "NaN in 2 eval(s)", NAN_FIX)
                   + f"; 2 eval line(s) skipped for a NaN 'greedy_accuracy' ({path}:6, {path}:8): {NAN_WHY}")
    msg, path = _refusal("metrics", tmp_path, (0, 10, 20), nan_at=(20,))
    assert msg == (_too_few(path) + "evaluate more often (e.g. `[eval] "
                   f"every_tokens` smaller than the budget); 1 eval line(s) skipped for a NaN 'greedy_accuracy' "
                   f"({path}:6): {NAN_WHY}; rerun those evals to use them")


def test_nan_evals_that_leave_too_few_lead_with_rerunning_them_in_a_trl_log(tmp_path):
    msg, path = _refusal("trl", tmp_path, (0, 10, 20, 30), nan_at=(20, 30))
    assert msg == (_too_few(path) + _lead(2, "eval_accuracy", "NaN in 2 eval(s)", NAN_FIX)
                   + f"; 2 eval(s) of {path} skipped for a NaN 'eval_accuracy' (step(s) 20, 30): {NAN_WHY}")
    assert "eval_steps" not in msg and "rerun those evals to use them" not in msg


def test_nan_evals_lead_while_a_null_one_that_would_not_pin_the_fit_keeps_its_fix_in_the_note(tmp_path):
    """NaN at 5, 10, 20 would pin the fit alone; the null at 40 would not: the lead is the NaN evals', the note keeps
    the null line's fix."""
    msg, path = _refusal("metrics", tmp_path, (0, 5, 10, 20, 40), nan_at=(5, 10, 20), null_at=(40,))
    assert msg == (
        _too_few(path).replace("at 1 distinct", "at 0 distinct")
        + _lead(3, "greedy_accuracy", "NaN in 3 eval(s)", NAN_FIX)
        + f"; 3 eval line(s) skipped for a NaN 'greedy_accuracy' ({path}:4, {path}:6, {path}:8); 1 eval line(s) "
        f"skipped for a null 'greedy_accuracy' ({path}:10): {NAN_WHY}; {TRAIN_NULL_WHY}; to use the null ones, rerun "
        f"those evals, {GREEDY_ELSE}")


@pytest.mark.parametrize("fmt", ["metrics", "trl"])
def test_a_nan_and_a_null_that_only_together_leave_too_few_lead_with_both_fixes_said_once(tmp_path, fmt):
    msg, path = _refusal(fmt, tmp_path, (0, 10, 20, 30), nan_at=(20,), null_at=(30,))
    if fmt == "metrics":
        assert msg == (
            _too_few(path) + _lead(2, "greedy_accuracy", "NaN in 1 eval(s), null in 1", f"{NAN_FIX}, {GREEDY_ELSE}")
            + f"; 1 eval line(s) skipped for a NaN 'greedy_accuracy' ({path}:6); 1 eval line(s) skipped for a null "
            f"'greedy_accuracy' ({path}:8): {NAN_WHY}; {TRAIN_NULL_WHY}")
    else:
        assert msg == (
            _too_few(path) + _lead(2, "eval_accuracy", "NaN in 1 eval(s), null in 1", f"{NAN_FIX}, {TRL_ELSE}")
            + f"; 1 eval(s) of {path} skipped for a NaN 'eval_accuracy' (step(s) 20); 1 eval(s) of {path} skipped "
            f"for a null 'eval_accuracy' (step(s) 30): {NAN_WHY}; {TRL_NULL_WHY}")
    assert msg.count("rerun") == 1


def test_a_sampled_accuracy_nan_and_null_lead_with_each_ones_fix(tmp_path):
    """The null sampled_accuracy's fix is another metric, not a rerun: each kind's fix is named apart."""
    msg, path = _refusal("metrics", tmp_path, (0, 10, 20, 30), metric="sampled_accuracy", nan_at=(20,),
                         null_at=(30,))
    assert msg == (
        _too_few(path) + _lead(2, "sampled_accuracy", "NaN in 1 eval(s), null in 1",
                        f"for the NaN ones, {NAN_FIX}; for the null ones, {SAMPLED_FIX}")
        + f"; 1 eval line(s) skipped for a NaN 'sampled_accuracy' ({path}:6); 1 eval line(s) skipped for a null "
        f"'sampled_accuracy' ({path}:8): {NAN_WHY}; {TRAIN_NULL_WHY}")


@pytest.mark.parametrize("metric, fix", [("greedy_accuracy", f"rerun those evals, {GREEDY_ELSE}"),
                                         ("sampled_accuracy", SAMPLED_FIX)])
def test_a_metrics_jsonl_whose_evals_are_all_null_says_so_and_names_the_fix(tmp_path, metric, fix):
    msg, path = _refusal("metrics", tmp_path, (0, 10), metric=metric, null_at=(0, 10))
    assert msg == (
        f"no eval of {metric!r} with a value in metrics.jsonl of 1 run(s) ({path}): its evals of {metric!r} hold no "
        f"value (null), so more frequent evals would not help; {fix}; 2 eval line(s) skipped for a null {metric!r} "
        f"({path}:2, {path}:4): {TRAIN_NULL_WHY}")


@pytest.mark.parametrize("fmt", ["metrics", "trl"])
def test_evals_all_null_all_nan_or_both_are_refused_alike_by_the_two_readers(tmp_path, fmt):
    """Each reader says which kinds its evals hold and the fix once (the note after it gives the why only). A TRL
    key that is NaN at every eval is often the wrong key (a TRL log's eval keys are the user's): its fix names
    another key too, as the null one does; a metrics.jsonl's keys are gradprobe's own, its NaN fix is the rerun."""
    metric, other = ("greedy_accuracy", GREEDY_ELSE) if fmt == "metrics" else ("eval_accuracy", TRL_ELSE)
    all_nan_fix = NAN_FIX if fmt == "metrics" else f"{NAN_FIX}, {TRL_ELSE}"
    src = (f"metrics.jsonl of 1 run(s) ({tmp_path / 'metrics.jsonl'})" if fmt == "metrics"
           else f"TRL trainer_state.json of 1 run(s) ({tmp_path / 'trainer_state.json'})")
    head = f"no eval of {metric!r} with a value in {src}: its evals of {metric!r} hold no value "
    for skipped, held, fix in [({"null_at": (0, 10)}, "null", f"rerun those evals, {other}"),
                               ({"nan_at": (0, 10)}, "NaN", all_nan_fix),
                               ({"nan_at": (0,), "null_at": (10,)}, "NaN or null", f"{NAN_FIX}, {other}")]:
        msg, path = _refusal(fmt, tmp_path, (0, 10), **skipped)
        assert msg.startswith(f"{head}({held}), so more frequent evals would not help; {fix}; ")
        assert msg.count("rerun") == 1 and "to use them" not in msg
    why = TRAIN_NULL_WHY if fmt == "metrics" else TRL_NULL_WHY
    assert msg.endswith(f"{NAN_WHY}; {why}")
