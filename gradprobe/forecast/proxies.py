"""Per-update efficiency of a reward relative to grpo, from the probe and from verl's signal proxy.

Probe efficiency (DESIGN.md, "Forecast"): rho_R = <g_R, u> / <g_outcome, u>, with u the
(preconditioned) reference direction. Over K probe batches (each with its own training prompts and
per-group contributions c^R_kg, which sum to that batch's <g_R, u>; :mod:`gradprobe.probe.estimate`)

    rho_R = (sum_k sum_g c^R_kg) / (sum_k sum_g c^outcome_kg),

a ratio of batch means (each batch weighted equally). Within a batch the loss normaliser is shared
by every reward, so it cancels from the ratio.

Uncertainty, in three parts:

1. prompts: a paired bootstrap over groups, stratified by batch (each batch's groups resampled with
   replacement, the same resample for every reward; ``numpy.random.PCG64(seed)``);
2. the held-out reference's own sampling noise: when the batches used different reference draws,
   the jackknife over batches (Efron & Stein 1981; se_J^2 = (K-1)/K sum_k (rho_(-k) - mean)^2,
   rho_(-k) the ratio without batch k) measures the spread of the whole procedure, prompts and
   reference together; the replicates are then widened by se_J / se_boot when that exceeds 1. With
   one reference draw (the default: computed once per policy and reused) this part is absent and
   the result says so;
3. the standard error is robust: se = (q_84.13 - q_15.87) / 2 of the replicates, which equals the
   standard deviation of a normal and stays finite when the denominator's SNR is low and the ratio's
   bootstrap distribution has Cauchy-like tails.

Signal-to-noise of rho: SNR = |rho_raw - 1| / se, the evidence that R's per-update efficiency
differs from grpo's (rho = 1). A reward that is an exact rescaling of grpo's on every group (``outcome_loo``:
G / (G - 1) times grpo's advantages) has replicates equal to rho_raw up to float rounding, so its se is rounding
and its SNR an arbitrary huge number of order 1 / eps: such an SNR is printed ``exact`` (:func:`rho_snr_text`,
:data:`ROUNDING_RTOL`); the stored value and the forecast are unchanged (the calibration reads the stored ``snr``
as a feature). A ratio resting on one contributing group has se exactly 0 (every replicate that draws the group is
its ratio) and SNR inf, printed as such: one group is no rescaling, and the note on few groups says so.

Empirical-Bayes shrinkage toward 1 (normal prior rho ~ N(1, tau^2), normal likelihood with the
bootstrap se; tau^2 estimated by moments from the observation itself, tau_hat^2 =
max(0, (rho_raw - 1)^2 - se^2): Efron & Morris 1975, JASA 70(350), the positive-part James-Stein
rule; Morris 1983, JASA 78(381), eq. 2.5)::

    k = tau_hat^2 / (tau_hat^2 + se^2) = max(0, 1 - 1 / SNR^2),     rho = 1 + k (rho_raw - 1).

So a ratio with SNR <= 1 is shrunk all the way to 1: the forecast falls back to cost only, and the
result says so. The replicates are shrunk by the same k. The shrunk interval of a ratio shrunk all the way
(and of an undefined ratio) is NaN, not [1, 1]: its width 0 would be a certainty the probe does not have.

Signal proxy (verl's forward-only gradient power; :func:`gradprobe.probe.estimate.signal_proxy_group_sums`):
P_R = (1/N) sum_n A_n^2 W_n estimates E||g_n||^2 of one trajectory's gradient. Its efficiency is
rho_sp = sqrt(P_R / P_outcome): if g_R = c g_outcome then P_R / P_outcome = c^2, so the square root
is on the scale of rho. The same stratified bootstrap gives its interval; it is not shrunk (it is
the proxy as verl computes it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Efficiency", "stratified_counts", "probe_efficiency", "signal_proxy_efficiency", "robust_se",
           "shrink_factor", "ROUNDING_RTOL", "EXACT_SNR", "se_at_rounding", "rho_snr_text"]

Z68 = (0.15865525393145707, 0.8413447460685429)  # normal quantiles at -1 and +1 standard deviation

#: Relative standard error of rho at or below which it is float rounding, not a measurement: sqrt(eps) of float64
#: (1.49e-8). The replicates of a reward that rescales grpo's group contributions exactly are ratios of B-term dot
#: products that differ from rho_raw by rounding alone, at most gamma_n * kappa relative (Higham 2002, "Accuracy and
#: Stability of Numerical Algorithms", 2nd ed., section 3.1: gamma_n = n u / (1 - n u), u = eps / 2, kappa the dot
#: product's condition number sum |c a| / |sum c a|), a few eps for the probe's sums; sqrt(eps) leaves room for n kappa
#: up to 1e8, and lies orders of magnitude below the relative se a bootstrap over sampled groups of rollouts measures.
ROUNDING_RTOL = math.sqrt(float(np.finfo(np.float64).eps))
#: How an SNR of rho-1 whose se is rounding (:func:`se_at_rounding`) is printed.
EXACT_SNR = "exact"


def robust_se(x: np.ndarray) -> float:
    """Half the central 68.27% interquantile range of ``x`` (finite values): the standard deviation of a
    normal, finite for heavy-tailed ratio replicates. NaN when fewer than 2 finite values."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return math.nan
    lo, hi = np.quantile(x, Z68)
    return float(hi - lo) / 2.0


def se_at_rounding(rho_raw, snr) -> bool:
    """Whether the se behind an SNR of rho-1 (``snr`` = |rho_raw - 1| / se) is float rounding: 0 < se <=
    :data:`ROUNDING_RTOL` |rho_raw|, i.e. the bootstrap replicates differ from rho_raw by rounding alone, as those of a
    reward that is an exact rescaling of grpo's on several groups do (module docstring). An infinite ``snr`` (se
    exactly 0) is not: every replicate is then bit-identical, which is what a ratio resting on one contributing group
    gives (each replicate that draws it is that group's ratio: :func:`probe_efficiency`), so it is printed as the
    number (``inf``) with the note on few groups, not as an exact rescaling. NaN, None, 0 (rho_raw = 1, or se not
    finite: no se to judge) or text is not either. Reads the stored pair (a forecast row's ``rho_raw`` and ``snr``,
    JSON's ``"inf"`` included), so a saved ``probe.json`` section prints by it too."""
    try:
        raw, snr = float(rho_raw), float(snr)
    except (TypeError, ValueError):
        return False
    if not (0 < snr < math.inf and math.isfinite(raw)):
        return False
    return abs(raw - 1.0) / snr <= ROUNDING_RTOL * abs(raw)


def rho_snr_text(rho_raw, snr, number: str) -> str:
    """How the SNR of rho-1 is printed: :data:`EXACT_SNR` when its se is rounding (:func:`se_at_rounding`), else
    ``number``, the SNR as the caller prints its numbers (e.g. ``f"{snr:.2f}"``). One rule for the forecast table
    (:func:`gradprobe.forecast.format_forecast`) and the verdicts that quote the SNR."""
    return EXACT_SNR if se_at_rounding(rho_raw, snr) else number


def shrink_factor(snr: float) -> float:
    """Empirical-Bayes shrinkage factor k = max(0, 1 - 1 / SNR^2) (module docstring; Efron & Morris 1975).

    Parameters
    ----------
    snr : float
        |rho_raw - 1| / se (>= 0; inf when se = 0).

    Returns
    -------
    float in [0, 1]
        0 for SNR <= 1 (shrunk to 1), 1 for SNR = inf (no shrinkage).
    """
    if not snr > 1.0:  # also NaN
        return 0.0
    if math.isinf(snr):
        return 1.0
    return 1.0 - 1.0 / snr ** 2


def stratified_counts(sizes: list[int], n_draws: int, seed: int) -> list[np.ndarray]:
    """Bootstrap multiplicities, resampling each batch's groups with replacement.

    Parameters
    ----------
    sizes : list[int]
        Groups per batch, B_k.
    n_draws : int
        Replicates D.
    seed : int

    Returns
    -------
    list of ndarray, shape (D, B_k) each
        How often each group is drawn in each replicate (rows sum to B_k).
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    out = []
    for b in sizes:
        idx = rng.integers(0, b, size=(n_draws, b))
        counts = np.zeros((n_draws, b))
        np.add.at(counts, (np.repeat(np.arange(n_draws), b), idx.ravel()), 1.0)
        out.append(counts)
    return out


@dataclass
class Efficiency:
    """A reward's per-update efficiency relative to grpo.

    Attributes
    ----------
    reward : str
    rho_raw : float
        Ratio of batch-mean inner products (NaN when grpo's own is <= 0: undefined).
    se : float
        Robust standard error of ``rho_raw`` (prompts, plus the reference spread when measured).
    snr : float
        |rho_raw - 1| / se.
    shrink : float
        k in [0, 1].
    rho : float
        1 + k (rho_raw - 1): what the forecast uses.
    interval_raw, interval : (float, float)
        Percentile intervals of the raw and the shrunk replicates; ``interval`` is (NaN, NaN) when ``shrink`` is 0
        (SNR <= 1, or ``rho_raw`` undefined): the shrunk replicates are then all 1, and [1, 1] is no measurement.
    replicates : ndarray, shape (draws,)
        Shrunk replicates (the forecast's Monte Carlo uses them).
    batches : int
    reference_noise : bool
        True when the spread between batches with different reference draws entered ``se``.
    notes : list[str]
    """

    reward: str
    rho_raw: float
    se: float
    snr: float
    shrink: float
    rho: float
    interval_raw: tuple[float, float]
    interval: tuple[float, float]
    replicates: np.ndarray
    batches: int
    reference_noise: bool
    notes: list[str] = field(default_factory=list)

    @property
    def few_groups(self) -> bool:
        """Whether rho rests on under :data:`MIN_INFORMATIVE_GROUPS` informative groups (its note is in ``notes``):
        its SNR and interval then do not measure its uncertainty, so no verdict may rest on them."""
        return any(n.startswith(FEW_GROUPS_NOTE) for n in self.notes)


def _interval(x: np.ndarray, level: float) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (math.nan, math.nan)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(x, [a, 1.0 - a])
    return (float(lo), float(hi))


def probe_efficiency(reward: str, per_group: list[np.ndarray], per_group_ref: list[np.ndarray], *,
                     counts: list[np.ndarray], reference_draws: list | None = None,
                     level: float = 0.95) -> Efficiency:
    """rho_R from the probe's per-group contributions, with its bootstrap, SNR and shrinkage.

    Parameters
    ----------
    reward : str
    per_group, per_group_ref : list of ndarray, shape (B_k,) each
        Per batch k, each group's contribution to <g_R, u> and to <g_outcome, u> (``per_group`` of
        ``probe.json``); the same groups in the same order for both.
    counts : list of ndarray, shape (D, B_k)
        From :func:`stratified_counts` (shared by every reward: paired).
    reference_draws : list, length K, optional
        An id of each batch's reference draw; two or more distinct ids turn on the jackknife part.
    level : float
        Interval coverage.

    Returns
    -------
    Efficiency

    Raises
    ------
    ValueError
        Mismatched batch counts or group counts.
    """
    k = len(per_group)
    _check_batches(reward, per_group, per_group_ref, counts)
    num = sum(float(np.sum(a)) for a in per_group)
    den = sum(float(np.sum(b)) for b in per_group_ref)
    bnum = sum(c @ np.asarray(a, dtype=np.float64) for a, c in zip(per_group, counts))
    bden = sum(c @ np.asarray(b, dtype=np.float64) for b, c in zip(per_group_ref, counts))
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.where(bden != 0, bnum / np.where(bden != 0, bden, 1.0), np.nan)
    draws = set(map(str, reference_draws)) if reference_draws is not None else set()
    notes = _reference_noise_notes(k, len(draws))
    if not den > 0:
        notes.append(f"grpo's own alignment <g_outcome, u> = {den:.3g} is not positive on the probe batch(es): the "
                     "ratio rho is undefined, so the forecast is cost only; use more --prompts or --probe-batches")
        return Efficiency(reward, math.nan, math.nan, 0.0, 0.0, 1.0, (math.nan, math.nan), (math.nan, math.nan),
                          np.ones(len(boot)), k, False, notes)
    rho_raw = num / den
    boot = _one_group_replicates(per_group, per_group_ref, boot, rho_raw)
    se = robust_se(boot)
    reference_noise = k >= 2 and len(draws) >= 2
    if reference_noise:
        boot, se = _with_jackknife(per_group, per_group_ref, num, den, rho_raw, boot, se)
    snr = _snr(abs(rho_raw - 1.0), se)
    kf = shrink_factor(snr)
    rho = 1.0 + kf * (rho_raw - 1.0)
    shrunk = 1.0 + kf * (np.nan_to_num(boot, nan=rho_raw) - 1.0) if kf > 0 else np.ones_like(boot)
    raw_interval = _interval(boot, level)
    notes += _reading_notes(per_group, per_group_ref, raw_interval, snr, level)
    interval = _interval(shrunk, level) if kf > 0 else (math.nan, math.nan)  # all 1: no interval, not [1, 1]
    return Efficiency(reward, rho_raw, se, snr, kf, rho, raw_interval, interval, shrunk, k, reference_noise, notes)


def _one_group_replicates(per_group, per_group_ref, boot: np.ndarray, rho_raw: float) -> np.ndarray:
    """``boot`` with every finite replicate set to ``rho_raw`` when one group, in all the batches, contributes to
    either alignment (the others are 0 in both): a replicate that draws it w times is (w c^R) / (w c^outcome) =
    rho_raw exactly, which float products at w = 3, 5... miss by an ulp, and that rounding would read as an se at
    rounding, i.e. an exact rescaling (:func:`se_at_rounding`), where one group rescales nothing. Else unchanged."""
    groups = sum(int(np.count_nonzero((np.asarray(a, dtype=np.float64) != 0) | (np.asarray(b, dtype=np.float64) != 0)))
                 for a, b in zip(per_group, per_group_ref))
    return np.where(np.isfinite(boot), rho_raw, boot) if groups == 1 else boot


#: Fewest groups with a nonzero contribution (to <g_R, u> and to <g_outcome, u>) for which the bootstrap over groups
#: is read without a note: with fewer, a resample holds the few informative groups or not, and its spread says
#: little about the ratio's uncertainty (a bootstrap needs more than a handful of units: Efron & Tibshirani 1993,
#: "An Introduction to the Bootstrap", section 6.4 on small samples).
MIN_INFORMATIVE_GROUPS = 5

#: How the note on a ratio resting on under :data:`MIN_INFORMATIVE_GROUPS` informative groups starts
#: (:func:`_reading_notes`); ``Efficiency.few_groups`` is set whenever it is given.
FEW_GROUPS_NOTE = "rho rests on few groups"


def _reading_notes(per_group, per_group_ref, interval: tuple[float, float], snr: float, level: float) -> list[str]:
    """Notes on reading rho's SNR and interval: when they disagree (the interval of ``level`` includes 1 although
    SNR > 1.96: the replicates' tails are wider than their central 68%, from which the SNR's standard error is
    read, module docstring part 3), and when fewer than :data:`MIN_INFORMATIVE_GROUPS` groups contribute to the
    reward's or grpo's alignment (the rest contribute 0, e.g. groups whose rewards are all equal), so neither the SNR
    nor the interval measures the ratio's uncertainty. Notes only: the forecast's numbers are unchanged."""
    notes = []
    lo, hi = interval
    if snr > 1.96 and lo <= 1.0 <= hi:
        notes.append(f"rho's bootstrap is heavy-tailed: its {level:.0%} interval [{lo:.2f}, {hi:.2f}] includes 1 "
                     f"(grpo's per-update efficiency) although its SNR of rho-1 (|rho-1|/se) is {snr:.2f} (se read "
                     "from the central 68% of the replicates): read the interval, not the SNR")
    total = sum(len(a) for a in per_group)
    used = [sum(int(np.count_nonzero(np.asarray(a, dtype=np.float64))) for a in x) for x in (per_group, per_group_ref)]
    if min(used) < MIN_INFORMATIVE_GROUPS:
        notes.append(f"{FEW_GROUPS_NOTE}: {used[0]} of {total} contribute to this reward's alignment and "
                     f"{used[1]} to grpo's (the others contribute 0: groups whose rewards are all equal); a bootstrap "
                     f"over under {MIN_INFORMATIVE_GROUPS} groups does not measure its uncertainty, so its SNR of "
                     "rho-1 and its interval are not to be trusted: use more --prompts or --probe-batches")
    return notes


def _check_batches(reward: str, per_group, per_group_ref, counts) -> None:
    """ValueError unless the reward, the reference and the bootstrap counts cover the same batches and groups."""
    k = len(per_group)
    if k == 0 or len(per_group_ref) != k or len(counts) != k:
        raise ValueError(f"per_group ({k} batches), per_group_ref ({len(per_group_ref)}) and counts ({len(counts)}) "
                         "must cover the same probe batches")
    for j, (a, b, c) in enumerate(zip(per_group, per_group_ref, counts)):
        if len(a) != len(b) or c.shape[1] != len(a):
            raise ValueError(f"batch {j}: reward {reward!r} has {len(a)} groups, the reference reward {len(b)}, the "
                             f"bootstrap counts {c.shape[1]}; they must be the same probe batch")


def _reference_noise_notes(k: int, n_draws: int) -> list[str]:
    """The note saying the held-out reference's own noise is not in the interval (one reference draw)."""
    if k >= 2 and n_draws < 2:
        return ["one reference draw shared by the batches: the held-out reference's own sampling noise is not in "
                "the interval"]
    if k < 2:
        return ["one probe batch and one reference draw: the held-out reference's own sampling noise is not in "
                "the interval (more --probe-batches narrow it)"]
    return []


def _with_jackknife(per_group, per_group_ref, num: float, den: float, rho_raw: float, boot: np.ndarray,
                    se: float) -> tuple[np.ndarray, float]:
    """Replicates widened to the jackknife-over-batches standard error when it exceeds the bootstrap's
    (module docstring, part 2: Efron & Stein 1981), and the standard error then used."""
    k = len(per_group)
    sums = np.array([float(np.sum(a)) for a in per_group])
    sums_ref = np.array([float(np.sum(b)) for b in per_group_ref])
    loo_den = den - sums_ref
    if np.all(loo_den > 0):
        loo = (num - sums) / loo_den
        se_j = math.sqrt((k - 1) / k * float(np.sum((loo - loo.mean()) ** 2)))
    else:
        se_j = math.inf
    if math.isfinite(se) and se > 0 and se_j > se:
        boot = rho_raw + (boot - rho_raw) * (se_j / se) if math.isfinite(se_j) else np.full_like(boot, np.nan)
        se = se_j
    elif not (math.isfinite(se) and se > 0):
        se = se_j
    return boot, se


def _snr(dev: float, se: float) -> float:
    """|rho_raw - 1| / se: 0 when se is not finite, inf when se = 0 < dev."""
    if not math.isfinite(se):
        return 0.0
    if se == 0:
        return 0.0 if dev == 0 else math.inf
    return dev / se


def signal_proxy_efficiency(power: list[np.ndarray], power_ref: list[np.ndarray], *, counts: list[np.ndarray],
                            level: float = 0.95) -> tuple[float, tuple[float, float], np.ndarray]:
    """rho_sp = sqrt(P_R / P_outcome) from verl's per-group gradient power (module docstring).

    Parameters
    ----------
    power, power_ref : list of ndarray, shape (B_k,) each
        Per batch, each group's sum of A_n^2 W_n (``signal_proxy_per_group`` of ``probe.json``).
    counts : list of ndarray, shape (D, B_k)
        Shared bootstrap multiplicities.
    level : float

    Returns
    -------
    (rho_sp, interval, replicates (D,))
        NaN (and NaN replicates) when P_outcome is 0 (every group flat).
    """
    num = sum(float(np.sum(a)) for a in power)
    den = sum(float(np.sum(b)) for b in power_ref)
    d = counts[0].shape[0] if counts else 0
    if not den > 0:
        return math.nan, (math.nan, math.nan), np.full(d, np.nan)
    bnum = sum(c @ np.asarray(a, dtype=np.float64) for a, c in zip(power, counts))
    bden = sum(c @ np.asarray(b, dtype=np.float64) for b, c in zip(power_ref, counts))
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.sqrt(np.where(bden > 0, bnum / np.where(bden > 0, bden, 1.0), np.nan))
    return math.sqrt(num / den), _interval(boot, level), boot
