"""A name holding a Unicode bidirectional control (a plug-in file ``plug/r<U+202E>gnp.py``, a study folder, an arm)
shows it escaped (``\\u202e``, as repr writes it) in the probe's console table, in its report.html and in calib's
report.html, so that it cannot reverse the text after it; names without one show byte for byte as before."""

from __future__ import annotations

import json
from pathlib import Path

from calib.report_html import _never_trained_html
from gradprobe.probe.report_html import render_probe_report
from gradprobe.probe.table import BIDI_CONTROLS, bidi_escaped, format_table

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "study_tiny_heldout4k" / "probe" / "probe.json"
RLO = "\u202e"


def _renamed() -> dict:
    """The shipped probe with its reward hybrid_0.5 named ``hy<RLO>brid_0.5`` everywhere (entries, forecast rows)."""
    text = SHIPPED.read_text()
    assert "hybrid_0.5" in text
    return json.loads(text.replace("hybrid_0.5", "hy\\u202ebrid_0.5"))


def test_console_table_escapes_a_bidi_control_and_keeps_its_columns():
    raw = _renamed()
    assert any(r["name"] == f"hy{RLO}brid_0.5" for r in raw["rewards"])
    text = format_table(raw)
    assert not BIDI_CONTROLS & set(text)
    rows = [line for line in text.splitlines() if line.startswith(("reward ", "outcome ", "mc_value ", "hy\\u202e"))]
    assert len(rows) == 4 and rows[3].startswith("hy\\u202ebrid_0.5 ")
    assert len({len(line) for line in rows}) == 1  # the escaped name is measured as shown: the columns line up
    plain = json.loads(SHIPPED.read_text())
    assert format_table(plain) == format_table(json.loads(json.dumps(plain)))  # nothing else changes
    assert bidi_escaped(plain) == plain


def test_probe_page_escapes_a_bidi_control_in_every_cell_and_heading():
    raw = _renamed()
    tokens = [{"row": 0, "prompt_id": "p0", "score": 1.0, "truncated": False, "tokens": ["a"], "texts": ["a"],
               "alignment": [1.0], "advantages": {r["name"]: [0.5] for r in raw["rewards"]}}]
    page = render_probe_report(raw, tokens)
    assert not BIDI_CONTROLS & set(page)
    assert "<td>hy\\u202ebrid_0.5</td>" in page
    assert "<h3>hy\\u202ebrid_0.5" in page


def test_calib_page_escapes_a_bidi_control_in_a_study_and_arm_name():
    page = _never_trained_html({"never_trained": [{"study": f"s{RLO}x", "arm": f"a{RLO}<b>", "why": "no update"}]})
    assert page == "<p>Left out of the floor and the arm-mean errors: s\\u202ex/a\\u202e&lt;b&gt;: no update.</p>"
    plain = _never_trained_html({"never_trained": [{"study": "st", "arm": "a&'\"", "why": "w"}]})
    assert plain == "<p>Left out of the floor and the arm-mean errors: st/a&amp;&#x27;&quot;: w.</p>"
