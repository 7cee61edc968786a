"""Success probability of each pool prompt under the current policy (DESIGN.md, "Prompt difficulty").

Two layers:

1. **Logistic model** (prior for every prompt). p_model(x) = sigmoid(w . z(x) + b), z = standardised
   features (:mod:`gradprobe.difficulty.features`, NaN metadata imputed with the fit-time column mean),
   fitted by L2-regularised maximum likelihood (scikit-learn ``LogisticRegression``, inverse strength
   ``C``) on the observed 0/1 outcome of every completion (the standardisation uses the same weights,
   so it is the per-completion mean and std). Each observation row (one prompt at one
   update, s successes and f failures) enters as two weighted rows, y = 1 with weight
   gamma^age * s and y = 0 with weight gamma^age * f, which is the same likelihood as one row per
   completion; ``age`` = updates since the observation, so outcomes of older policies count less.
   With no observation yet p_model = 1/2; when every (weighted) observed outcome is equal the model
   cannot be fitted and p_model is the smoothed rate (S + 1/2) / (N + 1) (Krichevsky-Trofimov) for
   every prompt, flagged by :attr:`DifficultyEstimator.degenerate_`.

2. **Beta-Bernoulli posterior** per attempted prompt, with the model's prediction as its prior of
   strength n0 pseudo-counts (Beta-Bernoulli conjugacy, e.g. Gelman et al., *Bayesian Data
   Analysis*, 3rd ed., sec. 2.4)::

       alpha0 = n0 * p_model,   beta0 = n0 * (1 - p_model)
       S_i = sum_k gamma^(t - t_k) s_ik,   F_i = sum_k gamma^(t - t_k) f_ik
       p_hat_i = (alpha0 + S_i) / (alpha0 + beta0 + S_i + F_i) = (n0 p_model + S_i) / (n0 + S_i + F_i)

   where observation k of prompt i, made at update t_k, had s_ik successes and f_ik failures and t is
   the current update. The exponential discount of stale counts is that of discounted Thompson
   sampling (Raj & Kalyani 2017, "Taming non-stationary bandits: a Bayesian approach", arXiv
   1707.09727, Algorithm 2: all counts are multiplied by gamma at every step). A never-attempted
   prompt has S = F = 0, so p_hat = p_model exactly. gamma = 1 keeps every outcome forever.

Ranking: nearest 1/2 first, by d_i = |p_hat_i - 1/2|, ties broken by prompt id (string order), so the
order is deterministic. The rule "the candidates are predicted to fail more often than not" is the
verdict mean_i p_hat_i < 1/2 over the candidates (:func:`verdict`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Sequence

import numpy as np

from .metadata import MAX_METADATA

__all__ = ["EstimatorConfig", "DifficultyEstimator", "DegenerateOutcomesWarning", "DuplicatePromptError",
           "rank_half", "verdict", "check_unique_ids", "check_features"]


class DuplicatePromptError(ValueError):
    """A pool holds the same prompt id twice (ids key the posterior, so they must be unique)."""


def check_unique_ids(ids: Sequence[str], what: str = "pool") -> None:
    """Raise :class:`DuplicatePromptError` naming the first repeated id and how many repeats there are."""
    seen, dup = set(), []
    for i in ids:
        if i in seen:
            dup.append(i)
        seen.add(i)
    if dup:
        raise DuplicatePromptError(
            f"the {what} has {len(dup)} duplicate prompt id(s), first {dup[0]!r}: prompt ids key the posterior "
            f"counts, so each prompt must appear once; deduplicate the {what} (e.g. by Problem.id)")


def check_features(x: np.ndarray, name: str = "features") -> None:
    """Refuse a feature matrix the logistic model can neither be fitted on nor predict from, naming the argument, the
    first bad cell and the fix (scikit-learn said "Input X contains NaN" of values the user never made NaN).

    Parameters
    ----------
    x : ndarray (float64), shape (M, F)
        One row of features per prompt; NaN marks a missing value (imputed with the fit-time column mean).
    name : str
        The argument as the caller's user passed it (``features``).

    Raises
    ------
    ValueError
        ``x`` has rows but no column (F = 0: nothing to fit a model on); a value is infinite; or a value lies beyond
        +-:data:`gradprobe.difficulty.metadata.MAX_METADATA` (the limit ``--metadata-keys`` values have on the command
        line: the estimator standardises each feature, and the square of such a value overflows float64 into NaN).
    """
    if x.ndim == 2 and x.shape[0] and x.shape[1] == 0:
        raise ValueError(f"{name} has 0 columns (shape {x.shape}): the logistic model needs at least one feature per "
                         f"prompt; pass an (M, F) array with F >= 1, e.g. gradprobe.prompt_features(policy, problems)")
    if np.isinf(x).any():
        r, c = (int(v[0]) for v in np.nonzero(np.isinf(x)))
        raise ValueError(f"{name}[{r}, {c}] is {x[r, c]}: a feature must be finite (NaN marks a missing value, "
                         "imputed); fix the feature column")
    big = np.abs(x) > MAX_METADATA  # NaN compares False: a missing value
    if big.any():
        r, c = (int(v[0]) for v in np.nonzero(big))
        raise ValueError(f"{name}[{r}, {c}] is {x[r, c]:g} ({int(big.sum())} value(s) beyond +-{MAX_METADATA:g}): the "
                         "estimator standardises each feature, and the square of such a value overflows; rescale "
                         f"that column of {name} (e.g. its log10, or divide it by its scale)")


@dataclasses.dataclass(frozen=True)
class EstimatorConfig:
    """Settings of :class:`DifficultyEstimator`.

    Attributes
    ----------
    prior_strength : float
        n0 > 0, pseudo-counts of the model's prior in each prompt's Beta posterior.
    decay : float
        gamma in (0, 1], the factor applied to every observed count per update since it was observed.
    C : float
        Inverse L2 regularisation strength of the logistic model (scikit-learn convention).
    max_history : int
        Observation rows kept for the logistic fit (oldest dropped first; bounds the fit's cost).
    p_clip : float
        p_model is clipped to [p_clip, 1 - p_clip] so alpha0, beta0 > 0.
    """

    prior_strength: float = 8.0
    decay: float = 0.9
    C: float = 1.0
    max_history: int = 8192
    p_clip: float = 1e-3

    def __post_init__(self):
        if not (self.prior_strength > 0 and math.isfinite(self.prior_strength)):
            raise ValueError(f"prior_strength (n0) must be a finite number > 0, got {self.prior_strength}")
        if not 0 < self.decay <= 1:
            raise ValueError(f"decay (gamma) must lie in (0, 1], got {self.decay}")
        if not self.C > 0:
            raise ValueError(f"C must be > 0, got {self.C}")
        if self.max_history < 1:
            raise ValueError(f"max_history must be >= 1, got {self.max_history}")
        if not 0 < self.p_clip < 0.5:
            raise ValueError(f"p_clip must lie in (0, 0.5), got {self.p_clip}")


class DegenerateOutcomesWarning(UserWarning):
    """Every observed outcome is equal (always solved or never solved): p_hat carries no signal."""


class DifficultyEstimator:
    """Logistic model of success from prompt features + decayed Beta-Bernoulli posterior per prompt.

    Online use (one training run): each update calls :meth:`fit` (on the history so far), then
    :meth:`p_hat` for the candidates, then :meth:`observe` with the selected prompts' outcomes, then
    :meth:`step` (the clock t advances by one update). See the module docstring for the formulas.

    Parameters
    ----------
    config : EstimatorConfig, optional

    Attributes
    ----------
    clock : int
        t, updates so far.
    degenerate_ : bool
        After :meth:`fit`: True when the fit had observations but all of one class.
    n_observed_ : float
        After :meth:`fit`: completions in the (kept) history, undecayed.
    """

    def __init__(self, config: EstimatorConfig | None = None):
        self.config = config or EstimatorConfig()
        self.clock = 0
        self._counts: dict[str, list[float]] = {}  # id -> [S, F, t_last] (decayed to t_last)
        self._hx: list[np.ndarray] = []  # feature rows (F,)
        self._hs: list[float] = []
        self._hf: list[float] = []
        self._ht: list[int] = []
        self._model = None
        self._const: float | None = 0.5
        self.degenerate_ = False
        self.n_observed_ = 0.0

    # ------------------------------------------------------------------ observations
    def observe(self, ids: Sequence[str], features: np.ndarray, successes, attempts) -> None:
        """Record outcomes at the current update.

        Parameters
        ----------
        ids : sequence of str, length M
            Prompt ids (repeats add up).
        features : ndarray, shape (M, F)
            Features of each prompt under the policy that produced the outcomes.
        successes, attempts : array-like of int, shape (M,)
            Correct completions and completions with a reward (0 <= successes <= attempts).

        Raises
        ------
        ValueError
            Mismatched lengths, a wrong feature width, counts out of range, NaN or infinite (the first such
            prompt named), or features :func:`check_features`
            refuses (no column, an infinite value, one beyond +-1e150).
        """
        x = np.asarray(features, dtype=np.float64)
        s = np.asarray(successes, dtype=np.float64).reshape(-1)
        n = np.asarray(attempts, dtype=np.float64).reshape(-1)
        if x.ndim != 2 or not (len(ids) == x.shape[0] == s.shape[0] == n.shape[0]):
            raise ValueError(f"observe: {len(ids)} ids, features {x.shape}, {s.shape[0]} successes, "
                             f"{n.shape[0]} attempts; expected M ids, (M, F) features, M counts")
        check_features(x)
        if self._hx and x.shape[1] != self._hx[0].shape[0]:
            raise ValueError(f"observe: features have {x.shape[1]} columns, earlier observations "
                             f"{self._hx[0].shape[0]}")
        odd = np.flatnonzero(~(np.isfinite(s) & np.isfinite(n)))
        if odd.size:  # NaN passed the range test below and made p_hat NaN; inf reached scikit-learn unnamed
            i = int(odd[0])
            raise ValueError(f"observe: prompt {ids[i]!r} has successes {s[i]:g} of attempts {n[i]:g} "
                             f"({odd.size} prompt(s) with a count that is NaN or infinite): give finite counts of "
                             "completions, 0 <= successes <= attempts (0 attempts for a prompt with no outcome)")
        odd = np.flatnonzero((s < 0) | (s > n))
        if odd.size:
            i = int(odd[0])
            raise ValueError(f"observe: prompt {ids[i]!r} has successes {s[i]:g} of attempts {n[i]:g} ({odd.size} "
                             "prompt(s) out of range): need 0 <= successes <= attempts for every prompt")
        for i, pid in enumerate(ids):
            S, F = self._decayed(pid)
            self._counts[pid] = [S + s[i], F + n[i] - s[i], self.clock]
            if n[i] > 0:
                self._hx.append(x[i].copy())
                self._hs.append(float(s[i]))
                self._hf.append(float(n[i] - s[i]))
                self._ht.append(self.clock)
        excess = len(self._hx) - self.config.max_history
        if excess > 0:
            del self._hx[:excess], self._hs[:excess], self._hf[:excess], self._ht[:excess]

    def step(self, n: int = 1) -> None:
        """Advance the clock by ``n`` updates (every stored count decays by gamma^n)."""
        if n < 0:
            raise ValueError(f"step: n must be >= 0, got {n}")
        self.clock += int(n)

    def _decayed(self, pid: str) -> tuple[float, float]:
        c = self._counts.get(pid)
        if c is None:
            return 0.0, 0.0
        f = self.config.decay ** (self.clock - c[2])
        return c[0] * f, c[1] * f

    def counts(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Decayed (S, F) of each prompt at the current clock, each shape (M,)."""
        sf = np.array([self._decayed(i) for i in ids], dtype=np.float64).reshape(-1, 2)
        return sf[:, 0], sf[:, 1]

    def raw_attempts(self, ids: Sequence[str]) -> np.ndarray:
        """Decayed S + F of each prompt (the posterior's evidence in pseudo-completions), shape (M,)."""
        s, f = self.counts(ids)
        return s + f

    # ------------------------------------------------------------------ model
    def fit(self) -> "DifficultyEstimator":
        """(Re)fit the logistic model on the history, weights gamma^age * counts.

        Never raises on degenerate data: no history gives p_model = 1/2; a single class gives the
        smoothed rate with ``degenerate_ = True`` (and a :class:`DegenerateOutcomesWarning`).
        """
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        self._model, self.degenerate_ = None, False
        if not self._hx:
            self._const, self.n_observed_ = 0.5, 0.0
            return self
        age = self.clock - np.asarray(self._ht, dtype=np.float64)
        w = self.config.decay ** age
        s, f = np.asarray(self._hs) * w, np.asarray(self._hf) * w
        self.n_observed_ = float(np.sum(self._hs) + np.sum(self._hf))
        S, F = float(s.sum()), float(f.sum())
        if S <= 0 or F <= 0:
            self._const = (S + 0.5) / (S + F + 1.0)
            self.degenerate_ = True
            warnings.warn(DegenerateOutcomesWarning(
                f"all {self.n_observed_:.0f} observed completions {'failed' if S <= 0 else 'succeeded'}: the "
                f"logistic model cannot be fitted and p_model = {self._const:.4f} for every prompt (no signal)"),
                stacklevel=2)
            return self
        x = np.asarray(self._hx)
        X = np.concatenate([x, x], axis=0)
        y = np.concatenate([np.ones(len(x)), np.zeros(len(x))])
        sw = np.concatenate([s, f])
        keep = sw > 0
        model = make_pipeline(SimpleImputer(strategy="mean", keep_empty_features=True), StandardScaler(),
                              LogisticRegression(C=self.config.C, max_iter=1000, tol=1e-8))
        model.fit(X[keep], y[keep], standardscaler__sample_weight=sw[keep],
                  logisticregression__sample_weight=sw[keep])
        self._model, self._const = model, None
        return self

    def predict_model(self, features: np.ndarray) -> np.ndarray:
        """p_model of each prompt, shape (M,), clipped to [p_clip, 1 - p_clip].

        Parameters
        ----------
        features : ndarray, shape (M, F)
            F as at :meth:`observe`.

        Raises
        ------
        ValueError
            ``features`` not 2-D, of another width than the observed features', or refused by :func:`check_features`
            (no column, an infinite value, one beyond +-1e150).
        """
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError(f"predict_model: features must be (M, F), got shape {x.shape}")
        check_features(x)
        if self._hx and len(x) and x.shape[1] != self._hx[0].shape[0]:
            raise ValueError(f"predict_model: features have {x.shape[1]} columns, the observed features "
                             f"{self._hx[0].shape[0]}; pass the same feature columns as to observe")
        if self._model is None:
            p = np.full(x.shape[0], self._const if self._const is not None else 0.5)
        else:
            p = self._model.predict_proba(x)[:, 1] if len(x) else np.zeros(0)
        c = self.config.p_clip
        return np.clip(p, c, 1 - c)

    def linear_predictor(self) -> tuple[np.ndarray, float, np.ndarray] | None:
        """The fitted logistic model as one linear form: ``(w, c, fill)`` with, for a feature row x (F,),
        ``p_model(x) = clip(sigmoid(w . x' + c), p_clip, 1 - p_clip)`` and x' = x with each NaN replaced by
        ``fill`` (the imputer's fit-time column means, 0 for a column empty at fit time). The pipeline's
        standardisation z = (x' - mean) / scale is folded in: w = coef / scale, c = intercept - sum(coef * mean /
        scale). Shapes: w (F,), fill (F,), float64. None when no logistic model is fitted (no history, or
        :attr:`degenerate_`: p_model is then a constant, :meth:`predict_model` of any row).

        Used to predict many bootstrap refits at once (:mod:`gradprobe.difficulty.intervals`): one matrix
        product per chunk of prompts instead of one scikit-learn call per refit.
        """
        if self._model is None:
            return None
        imputer, scaler, logistic = (self._model[k] for k in range(3))
        scale = np.asarray(scaler.scale_, dtype=np.float64)
        coef = np.asarray(logistic.coef_, dtype=np.float64).reshape(-1)
        w = coef / scale
        c = float(logistic.intercept_[0] - np.sum(w * np.asarray(scaler.mean_, dtype=np.float64)))
        return w, c, np.asarray(imputer.statistics_, dtype=np.float64)

    # ------------------------------------------------------------------ posterior
    def posterior(self, ids: Sequence[str], p_model) -> tuple[np.ndarray, np.ndarray]:
        """Beta(alpha, beta) of each prompt: alpha = n0 p_model + S, beta = n0 (1 - p_model) + F.

        Parameters
        ----------
        ids : sequence of str, length M
        p_model : array-like, shape (M,)

        Returns
        -------
        alpha, beta : ndarray (float64), shape (M,)
        """
        p = np.asarray(p_model, dtype=np.float64).reshape(-1)
        if p.shape[0] != len(ids):
            raise ValueError(f"posterior: {len(ids)} ids but {p.shape[0]} prior probabilities")
        n0 = self.config.prior_strength
        s, f = self.counts(ids)
        return n0 * p + s, n0 * (1 - p) + f

    def p_hat(self, ids: Sequence[str], features: np.ndarray) -> np.ndarray:
        """Posterior mean success probability alpha / (alpha + beta) of each prompt, shape (M,)."""
        a, b = self.posterior(ids, self.predict_model(features))
        return a / (a + b)

    # ------------------------------------------------------------------ state (checkpoints)
    def state_dict(self) -> dict:
        """Everything needed to continue exactly (the model is refitted from the history)."""
        return {"config": dataclasses.asdict(self.config), "clock": self.clock,
                "counts": {k: list(v) for k, v in self._counts.items()},
                "hx": np.asarray(self._hx) if self._hx else None, "hs": list(self._hs), "hf": list(self._hf),
                "ht": list(self._ht)}

    def load_state_dict(self, state: dict) -> None:
        self.config = EstimatorConfig(**state["config"])
        self.clock = int(state["clock"])
        self._counts = {k: list(v) for k, v in state["counts"].items()}
        self._hx = [] if state["hx"] is None else [np.asarray(r, dtype=np.float64) for r in np.asarray(state["hx"])]
        self._hs, self._hf, self._ht = list(state["hs"]), list(state["hf"]), list(state["ht"])
        self._model, self._const = None, 0.5


def rank_half(ids: Sequence[str], p_hat) -> list[int]:
    """Indices of the prompts, nearest 1/2 first: sort key (|p_hat - 1/2| rounded to 12 decimals, id).

    Parameters
    ----------
    ids : sequence of str, length M
    p_hat : array-like, shape (M,)

    Returns
    -------
    list[int], length M

    Raises
    ------
    ValueError
        Mismatched lengths, or a p_hat that is NaN, infinite or outside [0, 1] (named with its prompt id:
        :func:`_check_probabilities`).
    """
    p = np.asarray(p_hat, dtype=np.float64).reshape(-1)
    if p.shape[0] != len(ids):
        raise ValueError(f"rank_half: {len(ids)} ids but {p.shape[0]} probabilities")
    _check_probabilities(p, "rank_half", ids)
    d = np.round(np.abs(p - 0.5), 12)  # float residue (|0.6 - .5| vs |0.4 - .5|) must not break a tie
    return sorted(range(len(ids)), key=lambda i: (d[i], str(ids[i])))


def verdict(p_hat) -> dict:
    """The rule "the candidates are predicted to fail more often than not" (mean p_hat < 1/2).

    Parameters
    ----------
    p_hat : array-like, shape (M,)
        The candidates' predicted success probabilities.

    Returns
    -------
    dict
        ``mean_p_hat`` (None when M = 0), ``fail_more_often`` (bool or None), ``candidates`` (M) and
        ``text``, a one-line statement.

    Raises
    ------
    ValueError
        A p_hat that is NaN, infinite or outside [0, 1] (:func:`_check_probabilities`): its mean would state a
        verdict ("NOT predicted to fail", from a NaN mean) that no probability supports.
    """
    p = np.asarray(p_hat, dtype=np.float64).reshape(-1)
    _check_probabilities(p, "verdict")
    if p.size == 0:
        return {"mean_p_hat": None, "fail_more_often": None, "candidates": 0, "text": "no candidates"}
    m = float(p.mean())
    fail = bool(m < 0.5)
    text = (f"candidates are predicted to fail more often than not (mean p_hat {m:.3f} < 1/2)" if fail else
            f"candidates are NOT predicted to fail more often than not (mean p_hat {m:.3f} >= 1/2)")
    return {"mean_p_hat": m, "fail_more_often": fail, "candidates": int(p.size), "text": text}


def _check_probabilities(p: np.ndarray, where: str, ids: Sequence[str] | None = None) -> None:
    """ValueError naming the first p_hat of ``p`` that is no probability (NaN, infinite, outside [0, 1]): its
    prompt id (or index, without ``ids``), its value, how many there are, and the fix."""
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))  # NaN fails both comparisons
    if bad.size:
        i = int(bad[0])
        name = f"prompt {ids[i]!r}" if ids is not None else f"p_hat[{i}]"
        raise ValueError(f"{where}: {name} has p_hat {float(p[i])!r} ({bad.size} value(s) NaN, infinite or outside "
                         "[0, 1]): p_hat must be a success probability in [0, 1]; pass the estimator's p_hat "
                         "(DifficultyEstimator.p_hat), not a logit or a count")
