"""Does the reference curve start where the probe's own measurement says the policy is?

The forecast reads every arm off grpo's curve, which starts at R0 (greedy held-out accuracy at update 0,
accuracy points). The probe measures the same policy's held-out accuracy itself (the held-out reference's
rollouts, sampled at the probe's temperature: ``reference.heldout_accuracy``). The two differ by design (greedy
decoding vs sampling), but not by much: on the 17 studies shipped in ``data/`` R0 minus the probe's sampled
held-out accuracy is 2.0 to 21.8 points (16 prompts x 16 held-out rollouts each), and 21.6 on the default job
(8 x 16). A far larger gap means the curve does not describe this policy: an accuracy logged on another scale
(fractions read as points), a curve of another task or model, or a broken batch (every completion truncated).
:func:`start_notes` says so in a note when

    |R0 - 100 h| > max(:data:`MIN_GAP_POINTS`, :data:`GAP_SE` x se),

h the probe's held-out accuracy (fraction, pooled over its batches' own held-out draws) and se its
prompt-clustered standard error in points, 100 sd(group means) / sqrt(groups) (groups are the resampling unit,
as in every probe interval); without per-group accuracies (a probe written before they were kept) the test is
the gap alone. The forecast is still made: the note names the gap and the likely causes.

A probe batch whose completions were all truncated (``batch.truncation_rate`` 1) scores cut-off text only; its
gradients say nothing about a reward, and a note says so.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MIN_GAP_POINTS", "GAP_SE", "heldout_measurement", "start_notes"]

#: The smallest gap (accuracy points) between the curve's R0 and the probe's held-out accuracy that is noted:
#: above the largest gap on the shipped studies (21.8) with room for a model whose greedy and sampled accuracies
#: differ more.
MIN_GAP_POINTS = 30.0
#: A gap is noted only beyond this many prompt-clustered standard errors of the probe's held-out accuracy.
GAP_SE = 3.0


def heldout_measurement(batches: list[dict]) -> tuple[float, float | None, int] | None:
    """The probe's held-out accuracy, pooled over its batches' own held-out draws.

    Parameters
    ----------
    batches : list of dict
        Per-batch probe results (``probe.json`` or its ``batches``); each may have ``reference`` with
        ``heldout_accuracy`` (fraction) and ``heldout_group_accuracy`` (fractions, shape (groups,)).
        A reference reused from an earlier batch (``reused``) is counted once.

    Returns
    -------
    (accuracy, se, groups) or None
        Accuracy in points, its prompt-clustered standard error in points (None when per-group accuracies are
        absent or fewer than 2), the number of held-out groups; None when no batch measured a finite one.
    """
    accs, groups = [], []
    for b in batches:
        ref = b.get("reference") or {}
        h = ref.get("heldout_accuracy")
        if ref.get("reused") or not isinstance(h, (int, float)) or not math.isfinite(h):
            continue
        accs.append(float(h))
        g = ref.get("heldout_group_accuracy")
        if isinstance(g, list):
            groups += [float(x) for x in g if isinstance(x, (int, float)) and math.isfinite(x)]
    if not accs:
        return None
    if len(groups) >= 2:
        y = np.asarray(groups, dtype=np.float64)
        return 100.0 * float(y.mean()), 100.0 * float(y.std(ddof=1)) / math.sqrt(y.size), int(y.size)
    return 100.0 * float(np.mean(accs)), None, 0


def start_notes(curve, batches: list[dict]) -> list[str]:
    """Notes when the curve's R0 and the probe's held-out accuracy disagree, and when a batch was all truncated.

    Parameters
    ----------
    curve : ReferenceCurve
        grpo's curve (its ``params["R0"]``, accuracy points).
    batches : list of dict
        The probe's per-batch results.

    Returns
    -------
    list of str
        Zero, one or two notes (module docstring for the rule and its source).
    """
    notes = []
    m = heldout_measurement(batches)
    if m is not None:
        acc, se, n_groups = m
        r0 = float(curve.params["R0"])
        gap = r0 - acc
        bar = max(MIN_GAP_POINTS, GAP_SE * se) if se is not None else MIN_GAP_POINTS
        if abs(gap) > bar:
            meas = f"{acc:.1f} points" + (f" (se {se:.1f}, {n_groups} groups)" if se is not None else "")
            notes.append(f"CHECK THE CURVE: the reference curve {curve.source or '(unnamed)'} starts at R0 = {r0:.1f} "
                         f"points, but this probe's held-out rollouts score {meas}: a gap of {gap:+.1f} points, "
                         f"beyond {bar:.0f} (on the shipped studies greedy R0 exceeds the probe's sampled accuracy by "
                         "2-22 points). The curve may be on another scale (fractions read as points), of another task "
                         "or model, or the batch broken; every accuracy and gain of this forecast is read off it")
    trunc = [b.get("batch", {}).get("truncation_rate") for b in batches]
    if any(isinstance(t, (int, float)) and t >= 1.0 for t in trunc):
        notes.append("every completion of a probe batch hit --max-new-tokens (truncation 100%): its rewards score "
                     "cut-off text, so its gradients say nothing about them; raise --max-new-tokens and probe again")
    return notes
