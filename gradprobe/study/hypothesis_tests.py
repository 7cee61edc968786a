"""The tests a ``[[hypotheses]]`` entry may name (``test = "..."``), one :class:`HypothesisTest` each.

:data:`HYPOTHESIS_TESTS` maps a test's name to it; :func:`hypothesis_test` also resolves the earlier
names (:attr:`HypothesisTest.aliases`). The plan checks read the names from the torch-free
:data:`gradprobe.training.specs.TESTS` (training sits below the study and must not import it), and a
test keeps that tuple equal to the names and aliases here.

Every test takes the per-seed differences (treatment - control, accuracy points) and the exact
sign-flip result the analysis always reports beside it (``p_exact``), and returns the p-value that
decides the hypothesis; the interval is the Student-t interval of :func:`gradprobe.study.stats.paired_t`
for every test (:func:`gradprobe.study.comparisons.compare`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from . import stats

__all__ = ["HypothesisTest", "HYPOTHESIS_TESTS", "hypothesis_test", "sign_flip", "paired_t"]

_ONE_SEED = "one paired seed: no spread, no test"


@dataclass(frozen=True)
class HypothesisTest:
    """One test of a preregistered hypothesis.

    ``name``: what ``test = "..."`` says in a plan; ``aliases``: earlier names read as this test;
    ``decide(differences, exact, *, min_effect, alternative, alpha) -> dict``: ``differences`` the
    per-seed differences, shape (seeds,), in accuracy points; ``exact`` the
    :func:`gradprobe.study.stats.sign_flip_test` result of the same differences; the dict has
    ``p_value`` (None when not testable), ``p_text``, ``method``, ``testable`` and ``why`` (the
    reason it is not testable, else None). The function's docstring states the test and its source.
    """

    name: str
    aliases: tuple[str, ...]
    decide: Callable[..., dict]

    @property
    def doc(self) -> str:
        """The test and its source: the docstring of :attr:`decide`."""
        return self.decide.__doc__ or ""


def sign_flip(differences, exact: dict, *, min_effect: float, alternative: str, alpha: float) -> dict:
    """Exact sign-flip permutation test over seeds (Fisher 1935, sec. 21; Good 2005, sec. 3.7), through
    :func:`gradprobe.study.stats.sign_flip_test`: no distribution assumed, but its smallest attainable
    p is 2^-seeds (one-sided), so it is testable only with >= 2 seeds and that floor <= ``alpha``
    (5 seeds for alpha 0.05; :func:`gradprobe.study.stats.min_seeds_for_floor`)."""
    n = len(differences)
    testable = exact["testable"] and exact["p_floor"] <= alpha
    why = None if testable else (_ONE_SEED if n < 2 else
                                 f"with {n} seeds the smallest attainable p is "
                                 f"{Fraction(exact['p_floor']).limit_denominator(1 << 30)}, "
                                 f"above alpha {alpha:g}; it needs >= "
                                 f"{stats.min_seeds_for_floor(alpha, alternative)} seeds")
    return {"p_value": exact["p_value"], "p_text": exact["p_text"], "method": exact["method"],
            "testable": testable, "why": why}


def paired_t(differences, exact: dict, *, min_effect: float, alternative: str, alpha: float) -> dict:
    """Paired Student-t test over seeds (Student 1908), through :func:`gradprobe.study.stats.paired_t_test`:
    it assumes roughly normal per-seed differences and in exchange can reject with few seeds; testable
    with >= 2 seeds whose differences have some spread (:func:`gradprobe.study.stats.no_spread`: equal differences,
    or differences whose sd is below any eval's resolution, give t = mean / 0 or mean / noise: not testable, why
    :data:`gradprobe.study.stats.NO_SPREAD`). The exact sign-flip p is reported beside it (``p_exact``)."""
    n = len(differences)
    pt = stats.paired_t_test(differences, min_effect=min_effect, alternative=alternative)
    testable = pt["testable"] and pt["p_value"] is not None
    why = None if testable else _ONE_SEED if n < 2 else pt["why"]
    return {"p_value": pt["p_value"], "p_text": f"p = {pt['p_value']:.3g} (paired t, {n - 1} df)" if testable else None,
            "method": pt["method"], "testable": testable, "why": why}


#: test name -> test; the names and aliases equal :data:`gradprobe.training.specs.TESTS`
HYPOTHESIS_TESTS: dict[str, HypothesisTest] = {t.name: t for t in (
    HypothesisTest("sign_flip", ("paired_bootstrap",), sign_flip),
    HypothesisTest("paired_t", (), paired_t),
)}


def hypothesis_test(name: str) -> HypothesisTest:
    """The test called ``name`` or one of its aliases.

    Raises
    ------
    ValueError
        ``name`` is no test's name or alias (the message lists them).
    """
    for t in HYPOTHESIS_TESTS.values():
        if name == t.name or name in t.aliases:
            return t
    known = [n for t in HYPOTHESIS_TESTS.values() for n in (t.name, *t.aliases)]
    raise ValueError(f"hypothesis test {name!r} is not one of {', '.join(known)}")
