"""The reliability diagram of ``gradprobe difficulty-eval`` (``reliability.png``; re-exported by
:mod:`gradprobe.difficulty.evaluate`)."""

from __future__ import annotations

import numpy as np

from ..figures import subplots
from ..outputs import refuse_looping_file

__all__ = ["plot_reliability"]


def plot_reliability(result: dict, path) -> None:
    """Reliability diagram (PNG) of every estimator and baseline in ``result`` (:func:`evaluate_estimator`).

    x: mean predicted p per bin, y: observed success frequency; marker area ~ completions in the bin;
    the diagonal is perfect calibration.

    Raises
    ------
    OutputDirError (errno ELOOP)
        ``path`` is a symbolic link in a loop (:func:`gradprobe.outputs.refuse_looping_file`: the chain and the fix),
        refused before the figure is drawn; the link is kept.
    OSError
        ``path`` cannot be written (matplotlib's error).
    """
    import seaborn as sns

    refuse_looping_file(path)  # matplotlib would fail with a bare "[Errno 40] Too many levels of symbolic links"

    fig, ax = subplots(figsize=(5.5, 5))  # off-screen: no backend switch (gradprobe.figures)
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    rows = {**result["estimators"], **result["baselines"]}
    for (name, r), color in zip(rows.items(), sns.color_palette("deep", len(rows))):
        rel = r["reliability"]
        if not rel["count"]:
            continue
        sizes = 20 + 180 * np.asarray(rel["count"]) / max(rel["count"])
        ax.plot(rel["mean_predicted"], rel["observed"], color=color, lw=1)
        brier = "n/a" if r["brier"] is None else f"{r['brier']:.3f}"
        ax.scatter(rel["mean_predicted"], rel["observed"], s=sizes, color=color, label=f"{name} (Brier {brier})")
    ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="predicted success p_hat (bin mean)",
           ylabel="observed success frequency", title="Reliability of p_hat on the eval half")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
