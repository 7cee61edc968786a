"""report.html of a ``--budget-seconds`` probe names the seconds budget and shows seconds/update and gain@Ss (raw
first order), and its forecast figure does not draw cost only's 0-by-construction as a measured point."""

from __future__ import annotations

import json
import math

import pytest

from gradprobe.cli import main
from gradprobe.probe.report_figures import BY_CONSTRUCTION_LABEL, by_construction, interval_figure
from gradprobe.probe.report_html import render_probe_report


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory):
    """outcome (grpo), outcome_loo (same tokens per update as grpo: cost only's 0 by construction) and mc_value."""
    import torch

    threads = torch.get_num_threads()
    out = tmp_path_factory.mktemp("probe") / "out"
    try:
        assert main(["probe", "--rewards", "outcome,outcome_loo,mc_value", "--prompts", "4", "--group", "4",
                     "--heldout-prompts", "4", "--heldout-group", "4", "--bootstrap", "50", "--threads", "1",
                     "--no-progress", "--budget-seconds", "100", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def _table(page: str, table_id: str) -> str:
    start = page.index(f'<table id="{table_id}">')
    return page[start:page.index("</table>", start)]


def test_seconds_budget_in_header_and_columns(probe_dir):
    result = json.loads((probe_dir / "probe.json").read_text())
    assert result["forecast"]["budget"]["seconds"] == 100.0
    page = (probe_dir / "report.html").read_text()
    head = page[page.index("<h1>"):page.index("<h2>")]
    assert "250,000 generated tokens" in head and "100 device-seconds" in head and "raw first order" in head
    table = _table(page, "rewards")
    assert "<th>seconds / update</th>" in table and "<th>gain@100s (raw first order)</th>" in table
    for r in result["rewards"]:
        assert r["seconds_per_update"] > 0
        row = table[table.index(f"<td>{r['name']}</td>"):]
        row = row[:row.index("</tr>")]
        assert f'<td class="n">{r["seconds_per_update"]:.3f}</td>' in row
        assert f'<td class="n">{r["predicted_gain_at_time_budget"]:+.3f}</td>' in row
    assert "device-seconds" not in render_probe_report(
        dict(result, config=dict(result["config"], budget_seconds=None)), [])


def test_by_construction_arm_is_not_drawn_as_a_measurement(probe_dir):
    result = json.loads((probe_dir / "probe.json").read_text())
    rows = {r["arm"]: r for r in result["forecast"]["rows"]}
    loo = rows["outcome_loo"]
    assert loo["method"] == "cost_only" and loo["forecast_gain"] == 0.0 and loo["gain_interval"] == [None, None]
    assert "by construction" in loo["verdict"] and by_construction(loo) and not by_construction(rows["mc_value"])
    assert loo["by_construction"] is True and rows["mc_value"]["by_construction"] is False  # the row says it
    legacy = {k: v for k, v in loo.items() if k != "by_construction"}  # a probe.json written before the field
    assert by_construction(legacy) and not by_construction(dict(loo, by_construction=False))  # the field decides
    fig, caption = interval_figure(result)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    i = labels.index("outcome_loo")
    measured, probe = ax.containers[0], ax.containers[1]
    xs = measured.lines[0].get_xdata()
    assert math.isnan(xs[i])  # no blue dot at 0
    assert xs[labels.index("mc_value")] == pytest.approx(rows["mc_value"]["forecast_gain"])
    assert probe.get_label() == BY_CONSTRUCTION_LABEL
    assert list(probe.lines[0].get_ydata()) == [i]
    assert probe.lines[0].get_xdata()[0] == pytest.approx(loo["gain_probe"])
    segs = probe.lines[2][0].get_segments()[0]  # the x error bar: the probe's interval
    assert [p[0] for p in segs] == pytest.approx(loo["gain_probe_interval"])
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == BY_CONSTRUCTION_LABEL
    assert "0 by construction" in caption
    # no probe forecast either: left out, with a text annotation
    bare = json.loads(json.dumps(result))
    for r in bare["forecast"]["rows"]:
        if r["arm"] == "outcome_loo":
            r.update(gain_probe=None, gain_probe_interval=[None, None])
    ax = interval_figure(bare)[0].axes[0]
    assert len(ax.containers) == 1 and math.isnan(ax.containers[0].lines[0].get_xdata()[i])
    assert any("0 by construction" in t.get_text() for t in ax.texts)


def test_forecast_table_has_the_method_column(probe_dir):
    result = json.loads((probe_dir / "probe.json").read_text())
    table = _table((probe_dir / "report.html").read_text(), "verdicts")
    assert "<th>method</th>" in table
    for r in result["forecast"]["rows"]:
        row = table[table.index(f"<tr><td>{r['arm']}</td>"):]
        assert f"<td>{r['method']}</td>" in row[:row.index("</tr>")]
