"""Figures drawn off-screen without touching matplotlib's global state.

Report writers (``report.html``, study figures, reliability diagrams, the calibration report) draw
on a :class:`matplotlib.figure.Figure` made directly, not through ``pyplot``: no backend switch
(``matplotlib.use("Agg")`` would turn a notebook's inline backend off, so that every later
``plt.show()`` draws nothing), no figure registered with pyplot's figure manager (nothing to
close), and ``Figure.savefig`` renders PNG with the Agg canvas on its own.
"""

from __future__ import annotations

__all__ = ["subplots"]


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **kwargs):
    """``pyplot.subplots`` without pyplot: returns ``(Figure, Axes or array of Axes)``.

    ``kwargs`` go to :meth:`matplotlib.figure.Figure.subplots` (``squeeze``, ``sharex``, ...).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)
