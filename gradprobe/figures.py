"""Figures drawn off-screen without touching matplotlib's global state.

Report writers (``report.html``, study figures, reliability diagrams, the calibration report) draw
on a :class:`matplotlib.figure.Figure` made directly, not through ``pyplot``: no backend switch
(``matplotlib.use("Agg")`` would turn a notebook's inline backend off, so that every later
``plt.show()`` draws nothing), no figure registered with pyplot's figure manager (nothing to
close), and ``Figure.savefig`` renders PNG with the Agg canvas on its own.

The text of these figures holds names the user gave (studies, arms, rewards, runs, paths), in titles, axis and
tick labels, legends and annotations. A control character in one (a tab, an escape) has no glyph in the font, so
matplotlib warns ``Glyph 9 ... missing from font(s) DejaVu Sans`` and draws an empty box, and a lone surrogate (a
file name's undecodable byte, ``os.fsdecode``) makes its font code raise. The figure's canvas therefore measures
and draws every line of text as :func:`gradprobe.tables.shown` escapes it (``\\t``, ``\\x1b``, ``\\udcff``), as
the printed tables and warnings show the same names, whichever figure code put it there; the text objects keep the
names as given. A newline still breaks a line (matplotlib splits the text at newlines before it measures or draws
a line: report titles use two lines). No text is read as math text: a name holding ``$`` signs (a reward file
``c$x$.py``, ``d$^$.py``) is measured and drawn as its characters, where matplotlib would parse ``$...$`` as
mathtext (``c$x$`` drawn as c and an italic x, ``d$^$`` raising a multi-line ParseSyntaxException when the figure
is saved, after the computation it reports), and ``a\\$b`` keeps its backslash (matplotlib drops it from text
it parses); gradprobe's own figure text uses no math text. The canvas makes its renderer as Agg's does, through
public API only (``Text.set_parse_math``, a renderer subclass). Text drawn by LaTeX
(``rcParams["text.usetex"]``, which the user sets) is LaTeX's, as given.
"""

from __future__ import annotations

from functools import lru_cache

from .tables import shown

__all__ = ["subplots"]


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **kwargs):
    """``pyplot.subplots`` without pyplot: returns ``(Figure, Axes or array of Axes)``.

    The figure's canvas is an Agg canvas that escapes control characters and lone surrogates in the text it
    measures and draws, and reads no ``$...$`` in it as math text (module docstring), for ``savefig`` to PNG and for
    the layout (``tight_layout``, ``bbox_inches="tight"``); another format (``.svg``, ``.pdf``) is drawn by that
    format's own canvas, unescaped.
    ``kwargs`` go to :meth:`matplotlib.figure.Figure.subplots` (``squeeze``, ``sharex``, ...).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    _escaping_canvas()(fig)  # sets fig.canvas
    return fig, fig.subplots(nrows, ncols, **kwargs)


def _plain(s: str, ismath) -> tuple[str, bool | str]:
    """The text ``s`` a renderer is given and the ``ismath`` it draws it with: escaped (:func:`shown`) and plain
    (``False``, whatever matplotlib found: ``$...$`` in a name is no math text, module docstring), or as given when
    LaTeX draws it (``ismath == "TeX"``)."""
    return (s, ismath) if ismath == "TeX" else (shown(s), False)


def _no_math_text(figure) -> None:
    """Set every text object of ``figure`` not drawn by LaTeX to read no math text (``Text.set_parse_math``), so that
    matplotlib keeps a name's ``\\$`` as given (it drops the backslash of a text it parses); the renderer draws
    text plain in any case (:func:`_plain`), also that of tick labels matplotlib makes while it draws."""
    from matplotlib.text import Text

    for text in figure.findobj(Text):
        if not text.get_usetex():
            text.set_parse_math(False)


@lru_cache(maxsize=1)
def _escaping_canvas():
    """The Agg canvas class (made once, on first use: matplotlib is imported only when a figure is made) whose
    renderer measures and draws text escaped and plain (:func:`_plain`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg

    class EscapingRenderer(RendererAgg):
        def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            s, ismath = _plain(s, ismath)
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

        def get_text_width_height_descent(self, s, prop, ismath):
            s, ismath = _plain(s, ismath)
            return super().get_text_width_height_descent(s, prop, ismath)

    class EscapingCanvas(FigureCanvasAgg):
        _escaping_key = None  # (width, height, dpi) of the renderer made last: a new one when they change

        def get_renderer(self):
            _no_math_text(self.figure)
            w, h = self.get_width_height(physical=True)
            key = w, h, self.figure.dpi
            if self._escaping_key != key:  # what FigureCanvasAgg.get_renderer does, with the escaping renderer
                self.renderer = EscapingRenderer(w, h, self.figure.dpi)
                self._escaping_key = key
            return self.renderer

    return EscapingCanvas
