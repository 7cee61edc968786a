"""The per-token heat maps use one colour convention: blue for a token that pushes the update toward the reference
update u (A_t a_t > 0), red against it. A trial user found notebook 01 (seaborn ``RdBu_r``: positive red) opposite to
the probe's ``report.html`` (positive blue)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

from gradprobe.probe.report_html import _colour

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_prescreen_a_new_reward.ipynb"


def _rgb(text: str) -> tuple[int, int, int]:
    return tuple(int(x) for x in re.match(r"rgba\((\d+),(\d+),(\d+),", text).groups())


def test_the_notebook_and_the_html_report_colour_a_positive_term_blue():
    assert _rgb(_colour(+1.0, 1.0)) == (33, 102, 172) and _rgb(_colour(-1.0, 1.0)) == (178, 24, 43)
    source = "".join("".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"])
    (cmap,) = re.findall(r'sns\.heatmap\(.*cmap="([^"]+)"', source)
    top = matplotlib.colormaps[cmap](1.0)  # vmax = +bound: the largest positive term
    bottom = matplotlib.colormaps[cmap](0.0)
    assert top[2] > top[0] and bottom[0] > bottom[2]  # positive blue, negative red, as report.html
    assert "blue tokens push the policy towards" in source and "red ones\naway from it" in source
