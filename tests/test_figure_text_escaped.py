"""Names the user gave (a study, arm, reward, run or path) in a figure's title, labels, ticks or legend: a tab made
matplotlib warn ``Glyph 9 (\\t) missing from font(s) DejaVu Sans`` and draw an empty box, and a file name's
undecodable byte (a lone surrogate, ``\\udcff``) made its font code raise TypeError. The figures of
:func:`gradprobe.figures.subplots` now draw such text escaped, as the printed tables show it (``\\t``), and read no
``$...$`` in it as math text (a reward file ``d$^$.py`` made ``savefig`` raise a ParseSyntaxException)."""

from __future__ import annotations

import io
import warnings

import pytest
from matplotlib.backends.backend_agg import RendererAgg

from gradprobe.difficulty.reliability_plot import plot_reliability
from gradprobe.figures import subplots


@pytest.fixture
def drawn(monkeypatch):
    """The text strings the Agg renderer is asked to draw (after the figure's escaping), in order."""
    seen: list[str] = []
    draw_text = RendererAgg.draw_text

    def record(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        seen.append(s)
        return draw_text(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    monkeypatch.setattr(RendererAgg, "draw_text", record)
    return seen


def _saved(fig, **kwargs) -> list[str]:
    """``fig`` saved as PNG; the messages of the warnings that raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.tight_layout()
        fig.savefig(io.BytesIO(), format="png", **kwargs)
    return [str(w.message) for w in caught]


def test_a_tab_and_an_undecodable_byte_in_figure_text_are_drawn_escaped(drawn):
    fig, ax = subplots(figsize=(4, 3))
    ax.set_title("study\tone")
    ax.barh(["arm\tx", "r\udcff.py:reward"], [1, 2])
    ax.plot([0, 1], [0, 1], label="run\x1bred")
    ax.legend()
    ax.set_xlabel("two\nlines")  # a newline the figure code wrote still breaks the line
    assert _saved(fig, bbox_inches="tight") == []  # no "Glyph 9 (\t) missing from font(s)" warning
    assert {"study\\tone", "arm\\tx", "r\\udcff.py:reward", "run\\x1bred", "two", "lines"} <= set(drawn)
    assert not any(c in s for s in drawn for c in "\t\x1b\udcff\n")
    assert ax.get_title() == "study\tone"  # the text object keeps the name as given


def test_the_reliability_diagram_legend_shows_a_tab_escaped(tmp_path, drawn):
    rel = {"count": [4, 6], "mean_predicted": [0.2, 0.7], "observed": [0.25, 0.66]}
    result = {"estimators": {"my\test": {"reliability": rel, "brier": 0.1}}, "baselines": {}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_reliability(result, tmp_path / "reliability.png")
    assert [str(w.message) for w in caught if "Glyph" in str(w.message)] == []
    assert "my\\test (Brier 0.100)" in drawn
    assert (tmp_path / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dollar_signs_in_a_name_are_drawn_as_they_are_not_as_math_text(drawn):
    """Was: ``c$x$`` drawn as c and an italic x (mathtext), and ``d$^$`` raising a multi-line ParseSyntaxException
    from ``savefig``, after the computation the figure reports (``--rewards 'outcome,c$x$.py:fn,d$^$.py:fn'``)."""
    fig, ax = subplots(figsize=(4, 3))
    names = ["outcome", "c$x$.py:fn", "d$^$.py:fn"]
    ax.barh(names, [1, 2, 3])
    ax.set_title("rewards c$x$ and d$^$")
    ax.plot([0, 1], [0, 1], label="run $\\alpha$ one")
    ax.legend()
    assert _saved(fig, bbox_inches="tight") == []
    assert {"outcome", "c$x$.py:fn", "d$^$.py:fn", "rewards c$x$ and d$^$", "run $\\alpha$ one"} <= set(drawn)
    assert not any("mathtext" in s for s in drawn)


def test_a_math_text_name_is_measured_as_its_characters(drawn):
    """The layout measures the text the figure draws: ``$\\frac{1}{2}$`` as its characters, not as a fraction."""
    fig, ax = subplots(figsize=(4, 3))
    parsed = ax.text(0, 0, "$\\frac{1}{2}$")  # matplotlib would read it as math text
    plain = ax.text(0, 0.5, "$\\frac{1}{2}$", parse_math=False)  # its characters, as the reference
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width = plain.get_window_extent(renderer).width
    assert parsed.get_window_extent(renderer).width == pytest.approx(width) and width > 60
    assert drawn.count("$\\frac{1}{2}$") == 2


def test_a_backslash_before_a_dollar_sign_in_a_name_is_drawn_as_given(drawn):
    """Was: ``a\\$b`` drawn as ``a$b`` (matplotlib drops the backslash of text it parses as possible math text)."""
    fig, ax = subplots(figsize=(4, 3))
    ax.barh(["a\\$b.py:fn", "outcome"], [1, 2])
    ax.set_title("t\\$u")
    ax.plot([0, 1], [0, 1], label="l\\$m")
    ax.legend()
    assert _saved(fig, bbox_inches="tight") == []
    assert {"a\\$b.py:fn", "t\\$u", "l\\$m"} <= set(drawn)
    assert not any("$" in s and "\\$" not in s for s in drawn)


def test_the_renderer_is_kept_while_the_size_holds_and_made_again_for_a_new_dpi():
    fig, _ = subplots(figsize=(4, 3))
    first = fig.canvas.get_renderer()
    assert fig.canvas.get_renderer() is first
    fig.set_dpi(fig.dpi * 2)
    second = fig.canvas.get_renderer()
    assert second is not first and second.dpi == fig.dpi
    assert isinstance(second, RendererAgg) and type(second) is type(first)
