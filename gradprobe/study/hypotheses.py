"""The plan's ``[[hypotheses]]`` tested at their budgets, Holm-corrected as one family (the rules:
:mod:`gradprobe.study.analysis`, "Hypotheses"; the tests: :mod:`gradprobe.study.hypothesis_tests`, computed
by :mod:`gradprobe.study.stats`). A hypothesis with an arm that has a run that never trained is not tested
(:data:`NOT_TESTED_NEVER_TRAINED`): its difference would measure a broken setup, not the arm."""

from __future__ import annotations

from ..training.plan import INITIAL
from . import stats
from .comparisons import BOOTSTRAP_SEED, N_RESAMPLES, _by_seed, compare
from .hypothesis_tests import hypothesis_test
from .never_trained_arms import never_trained_why
from .reading import ITEM_MODES, initial_reads, read_runs

__all__ = ["NOT_TESTED_NEVER_TRAINED", "evaluate_hypotheses"]

#: ``status`` of a hypothesis with an arm that has a run that never trained (``untestable_reason`` names the arm,
#: its seeds and the cause; ``never_trained``: arm -> its records)
NOT_TESTED_NEVER_TRAINED = "not tested (never trained)"


def evaluate_hypotheses(plan, runs: dict, matched: dict, index=None, *, n_resamples: int = N_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED, never_trained: dict | None = None) -> list[dict]:
    """Test the plan's ``[[hypotheses]]`` (module docstring), Holm-corrected as one family.

    The family is the hypotheses that are testable (>= 2 paired seeds, sign-flip floor <= alpha);
    each adjusted p is compared with its own hypothesis's alpha. ``never_trained`` (arm -> the runs of the arm
    that never trained, ``analysis.json["arms"][ARM]["never_trained"]``; :func:`gradprobe.study.analysis.analyze`
    passes them): a hypothesis with such an arm is not computed and not tested, like an untestable one it is left
    out of the family (``testable`` False, ``untestable_reason`` "ARM never trained (seed S: why (N updates))",
    ``status`` :data:`NOT_TESTED_NEVER_TRAINED`), so it cannot pass, nor raise the other hypotheses' Holm p.

    Returns
    -------
    list[dict]
        Per hypothesis: ``name``, ``statement``, ``status`` ("PASSED", "not passed", "not
        testable (n seeds)", "not testable (n seeds, no spread)" (a paired t over equal differences), "not tested
        (never trained)", "not evaluated"), ``estimate`` (points; None when not computed), ``ci``, ``ci_level``,
        ``ci_two_way``, ``p_value``, ``p_floor``, ``p_text``, ``p_adjusted`` (Holm), ``passed``,
        ``testable``, ``untestable_reason``, ``test``, ``per_seed`` (differences), ``excluded_seeds``
        (refused reads), ``treatment``, ``control``, ``at``, ``budget``, ``metric``,
        ``alternative``, ``alpha``, ``min_effect``, ``seeds``, ``holm_family``, ``error``, ``never_trained``
        (arm -> its runs that never trained, {} when none).
    """
    untrained = {a: r for a, r in (never_trained or {}).items() if r}
    recs = [_hypothesis(h, plan, runs, matched, index, n_resamples, seed, untrained) for h in plan.hypotheses]
    family = [i for i, r in enumerate(recs) if r["testable"]]
    if family:
        for i, p in zip(family, stats.holm([recs[i]["p_value"] for i in family])):
            recs[i].update(p_adjusted=p, passed=bool(p <= recs[i]["alpha"]))
    for r in recs:
        r["holm_family"] = len(family)
        n = r["seeds"]
        r["status"] = (NOT_TESTED_NEVER_TRAINED if r["never_trained"] else
                       "not evaluated" if r["estimate"] is None else "PASSED" if r["passed"] else
                       "not passed" if r["testable"] else f"not testable ({n} seed{'' if n == 1 else 's'}"
                       + (", no spread)" if r["untestable_reason"] == stats.NO_SPREAD else ")"))
    return recs


def _hypothesis(h, plan, runs, matched, index, n_resamples, seed, untrained: dict) -> dict:
    """One hypothesis's record (:func:`evaluate_hypotheses`), before the Holm step; not computed when an arm of it
    has a run that never trained (``untrained``: arm -> records) or cannot be read (``error``)."""
    treat, ctrl = h.arms
    budget = float(h.budget if h.budget is not None else getattr(plan.budget, h.at))
    rec = {"name": h.name, "statement": h.statement, "status": None, "estimate": None, "ci": None, "ci_level": None,
           "ci_two_way": None, "p_value": None, "p_floor": None, "p_text": None, "p_adjusted": None, "passed": False,
           "testable": False, "untestable_reason": None, "test": None, "per_seed": {}, "excluded_seeds": [],
           "treatment": treat, "control": ctrl, "at": h.at, "budget": budget, "metric": h.metric,
           "alternative": h.alternative, "alpha": h.alpha, "min_effect": h.min_effect, "seeds": 0, "error": None,
           "never_trained": {a: untrained[a] for a in dict.fromkeys((treat, ctrl)) if a in untrained}}
    if rec["never_trained"]:  # a broken setup, not a finding: as an untestable hypothesis, out of the Holm family
        rec["untestable_reason"] = "; ".join(never_trained_why(a, r) for a, r in rec["never_trained"].items())
        return rec
    m = matched.get(h.at)
    if m is None or not m["recorded"]:
        rec["error"] = f"at = {h.at!r}: " + (m["source"] if m else "not an axis of this study")
        return rec
    final = m["final_eval"] and budget == m["budget"]
    reads = read_runs(runs, h.at, budget, plan=plan, final=final, metric=h.metric)
    t_reads = _by_seed(reads, treat)
    c_reads = _by_seed(initial_reads(runs, h.metric), treat) if ctrl == INITIAL else _by_seed(reads, ctrl)
    for arm, rd in ((treat, t_reads), (ctrl, c_reads)):
        if not rd:
            rec["error"] = f"arm {arm!r} has no completed run" + (" with an eval at update 0" if arm == INITIAL else "")
            return rec
    rec["excluded_seeds"] = sorted({s for rd in (t_reads, c_reads) for s, r in rd.items() if r["value"] is None})
    level = 1 - h.alpha if h.alternative == "two-sided" else 1 - 2 * h.alpha
    c = compare(t_reads, c_reads, t_arm=treat, c_arm=treat if ctrl == INITIAL else ctrl, index=index,
                mode=ITEM_MODES[h.metric], level=level, n_resamples=n_resamples, seed=seed)
    if not c["differences"]:
        rec["error"] = (f"no seed of {treat} and {ctrl} could be read at {h.at} = {budget:g} within the promised eval "
                        f"interval (refused: seeds {rec['excluded_seeds']}); add evals near it")
        return rec
    diffs = list(c["differences"].values())
    sf = stats.sign_flip_test(diffs, min_effect=h.min_effect, alternative=h.alternative)
    n = len(c["differences"])
    d = hypothesis_test(h.test).decide(diffs, sf, min_effect=h.min_effect, alternative=h.alternative, alpha=h.alpha)
    testable, why, p_value, p_text, method = d["testable"], d["why"], d["p_value"], d["p_text"], d["method"]
    rec.update(estimate=c["t"]["estimate"], ci=c["t"]["ci"], ci_level=level,
               ci_two_way=c["two_way"]["ci"] if c["two_way"] else None, p_value=p_value, p_floor=sf["p_floor"],
               p_text=p_text, p_exact=sf["p_value"], p_exact_text=sf["p_text"], test=method,
               per_seed=c["differences"], seeds=n, testable=testable, untestable_reason=why)
    return rec
