"""``report.html`` of ``gradprobe probe``: a real probe of the shipped tiny tier, its page, the page in Chromium."""

from __future__ import annotations

import base64
import errno
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gradprobe.cli import main
from gradprobe.probe import report_html
from gradprobe.probe.report_html import pick_completions, read_tokens, render_probe_report, write_probe_report
from gradprobe import outputs
from gradprobe.outputs import OutputDirError

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory):
    """`gradprobe probe` on the tiny tier's default task and rewards, on a small batch (4 x 4, 4 x 4 held out)."""
    import torch

    threads = torch.get_num_threads()
    out = tmp_path_factory.mktemp("probe") / "out"
    try:
        assert main(["probe", "--prompts", "4", "--group", "4", "--heldout-prompts", "4", "--heldout-group", "4",
                     "--bootstrap", "200", "--threads", "1", "--no-progress", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def test_report_has_the_verdicts_every_reward_and_one_heat_map_per_reward(probe_dir):
    result = json.loads((probe_dir / "probe.json").read_text())
    page = (probe_dir / "report.html").read_text()
    names = [r["name"] for r in result["rewards"]]
    assert names == ["outcome", "mc_value", "hybrid_0.5"]
    fc = result["forecast"]
    assert fc["available"]  # the shipped reference curve of the tiny tier
    verdicts = [r["verdict"] for r in fc["rows"] if r["verdict"] != "reference (grpo)"]
    assert len(verdicts) == 2 and all("250k" in v and "vs grpo" in v for v in verdicts)
    table = page[page.index('<table id="verdicts">'):page.index("</table>", page.index('<table id="verdicts">'))]
    for v in verdicts:
        assert html.escape(v) in table
    for name in names:
        assert f"<td>{name}</td>" in page
    maps = _heat_blocks(page)
    assert list(maps) == names
    for body in maps.values():
        assert 1 <= body.count('<div class="heat">') <= report_html.COMPLETIONS_PER_REWARD
        assert body.count("rgba(") >= 5  # coloured tokens
    # self-contained: every image embedded, no external reference
    imgs = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(imgs) == 2 and all(base64.b64decode(i).startswith(PNG_MAGIC) for i in imgs)
    assert not re.search(r'(?:src|href)="(?!data:)', page) and "<script" not in page


def test_heat_maps_show_the_completions_that_move_each_reward_most(probe_dir):
    """Checked against alignment.safetensors (a, A^R, mask), not against tokens.jsonl the page reads."""
    from safetensors.torch import load_file

    t = load_file(str(probe_dir / "alignment.safetensors"))
    mask = t["completion_mask"].bool()
    page = (probe_dir / "report.html").read_text()
    result = json.loads((probe_dir / "probe.json").read_text())
    for r in result["rewards"]:
        terms = (t[f"advantages.{r['name']}"].double() * t["alignment"].double()) * mask  # (N, T)
        totals = terms.sum(-1).numpy()  # (N,)
        best = sorted(range(len(totals)), key=lambda n: -abs(totals[n]))[:report_html.COMPLETIONS_PER_REWARD]
        block = _heat_blocks(page)[r["name"]]
        shown = [int(x) for x in re.findall(r"completion (\d+) \(prompt", block)]
        assert shown == best, r["name"]
        shown_terms = np.concatenate([terms[n][mask[n]].abs().numpy() for n in best])
        scale = float(np.quantile(shown_terms, 0.95))  # full colour at the 95th percentile of the shown |A a|
        assert scale > 0 and (shown_terms > scale).any()  # the largest terms saturate
        for k, row in enumerate(best):
            heat = block.split('<div class="heat">')[k + 1].split("</div>")[0]
            spans = re.findall(r'<span style="background:rgba\((\d+),\d+,\d+,([0-9.]+)\)" title="a = ([^,]+), '
                               r'A = ([^,]+), A a = ([^"]+)">', heat)
            assert len(spans) == int(mask[row].sum())  # one coloured span per completion token
            a = t["alignment"][row][mask[row]].double().numpy()
            term = terms[row][mask[row]].numpy()
            assert np.allclose([float(s[2]) for s in spans], a, rtol=5e-3, atol=1e-12)  # 3 significant digits
            assert np.allclose([float(s[1]) for s in spans], np.minimum(1, np.abs(term) / scale), atol=1.5e-3)
            assert all((s[0] == "33") == (x > 0) for s, x in zip(spans, term))  # blue toward u, red against


def _heat_blocks(page: str) -> dict[str, str]:
    """{reward: its heat-map section of the page}, in page order."""
    body = page[:page.index("<h2>Token ledger</h2>")]
    out = {}
    for part in body.split('<div class="reward-heatmap" data-reward="')[1:]:
        name, rest = part.split('"', 1)
        out[html.unescape(name)] = rest
    return out


def test_report_opens_in_headless_chromium_and_is_not_blank(probe_dir, tmp_path):
    from PIL import Image

    assert shutil.which(CHROMIUM), (f"headless Chromium not found ({CHROMIUM}): the README's test command installs "
                                     "Debian's chromium when it is missing (apt-get install -y chromium, as root)")
    shot = tmp_path / "shot.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'chrome'}", "--window-size=1280,2400", "--virtual-time-budget=10000",
           f"--screenshot={shot}", (probe_dir / "report.html").as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert shot.exists(), f"no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    img = np.asarray(Image.open(shot).convert("RGB"), dtype=np.float64)
    assert img.shape[:2] == (2400, 1280)
    assert img.std() > 20  # text, tables, figures: far from a blank page
    colourful = (np.abs(img[..., 0] - img[..., 2]) > 60).mean()  # heat-map tokens and figure markers
    assert colourful > 0.001


def test_page_without_forecast_and_with_calibration(probe_dir):
    result = json.loads((probe_dir / "probe.json").read_text())
    tokens = read_tokens(probe_dir)
    bare = dict(result, forecast={"available": False, "note": "no reference curve for model 'x'"})
    page = render_probe_report(bare, tokens)
    assert "No forecast: no reference curve for model" in page and '<table id="verdicts">' not in page
    cal = json.loads(json.dumps(result))
    for i, r in enumerate(cal["rewards"]):
        r.update(calibrated_gain=-1.25 + i, calibrated_interval=[-3.5 + i, 0.75 + i])
    page = render_probe_report(cal, tokens)
    assert "<th>calibrated gain</th>" in page and "[-2.5, +1.8]" in page and "+0.8" in page
    assert render_probe_report(result, []).count("no per-token data for this reward") == 3


def test_the_no_forecast_note_places_the_raw_gains_below_on_the_page_and_above_in_the_console(probe_dir):
    """The console prints the raw table above ``forecast: none.``; the page puts its raw per-reward table after the
    verdict section, so the page's sentence says "below" (the console's words are unchanged)."""
    from gradprobe.forecast import forecast_section, format_forecast

    result = json.loads((probe_dir / "probe.json").read_text())
    section = forecast_section({**result, "config": {**result["config"], "model": "not-shipped"}})
    assert "the gains above are the raw first-order extrapolation" in format_forecast(section)
    page = render_probe_report(dict(result, forecast=section), read_tokens(probe_dir))
    said = ("No forecast: no reference curve for model &#39;not-shipped&#39;: the gains in the raw per-reward table "
            "below are the raw first-order extrapolation")
    assert said in page and "the gains above" not in page
    assert page.index(said) < page.index("<h2>Raw per-reward figures</h2>")


def _pre_screen_expected(result: dict, budget: float) -> tuple[int, str]:
    """The pre-screen's generated tokens (the probe's rollouts, continuations and selection, plus the held-out
    reference's own) and the cost line ``gradprobe probe`` prints for them against ``budget`` tokens."""
    gen = result["ledger"]["generated_tokens"]
    spent = sum(gen.get(c, 0) for c in ("rollout", "continuation", "selection"))
    spent += sum(result["reference"]["ledger"]["generated_tokens"].values())
    shown = f"{budget / 1000:g}k" if budget >= 1000 else f"{budget:g}"
    return spent, (f"pre-screen cost: {spent:,} generated tokens = {spent / budget:.1%} of one grpo run's {shown} "
                   "budget")


def test_page_without_forecast_shows_what_the_pre_screen_cost_and_its_notes(probe_dir):
    """The section of a probe without a forecast (here: no grpo reward to compare with) still carries the
    pre-screen's cost, which the printed output shows under "forecast: none."; the page shows it too."""
    from gradprobe.forecast import forecast_section, format_forecast

    result = json.loads((probe_dir / "probe.json").read_text())
    tokens = read_tokens(probe_dir)
    section = forecast_section(result, reference_reward="no_such_reward")
    assert not section["available"] and section["notes"] == []
    spent, line = _pre_screen_expected(result, 250_000.0)
    assert spent > 0 and line in format_forecast(section).splitlines()
    page = html.unescape(render_probe_report(dict(result, forecast=section), tokens))
    assert "No forecast: the forecast is a gain vs grpo: add 'no_such_reward' to --rewards" in page
    assert f'<p id="pre-screen">{line}</p>' in page
    dear = dict(result, config=dict(result["config"], budget_tokens=1000))  # screening dearer than training
    section = forecast_section(dear, reference_reward="no_such_reward")
    note = (f"the pre-screen spent {spent:,} generated tokens, {spent / 1000:.1f}x one grpo run's budget of 1,000: "
            "at this budget training an arm costs less than screening it; probe fewer prompts or continuations, or "
            "forecast at the budget you will train")
    assert section["notes"] == [note]
    page = html.unescape(render_probe_report(dict(dear, forecast=section), tokens))
    assert f'<p id="pre-screen">{_pre_screen_expected(result, 1000.0)[1]}</p>' in page
    assert f'<p class="note">{note}</p>' in page


def test_page_with_a_forecast_shows_the_pre_screen_cost(probe_dir):
    result = json.loads((probe_dir / "probe.json").read_text())
    assert result["forecast"]["available"] and result["config"]["budget_tokens"] == 250_000
    page = html.unescape((probe_dir / "report.html").read_text())
    assert f'<p id="pre-screen">{_pre_screen_expected(result, 250_000.0)[1]}</p>' in page


def test_pick_completions_ranks_by_the_summed_term():
    rows = [{"row": 0, "alignment": [1.0, 2.0], "advantages": {"r": [0.5, 0.5]}},   # +1.5
            {"row": 1, "alignment": [1.0, -4.0], "advantages": {"r": [1.0, 1.0]}},  # -3.0
            {"row": 2, "alignment": [3.0], "advantages": {"other": [1.0]}},          # no reward r
            {"row": 3, "alignment": [], "advantages": {"r": []}}]                    # empty
    got = pick_completions(rows, "r", k=5)
    assert [r["row"] for r in got] == [1, 0] and got[0]["terms"] == [1.0, -4.0] and got[1]["total"] == 1.5


def test_unwritable_folder_fails_clearly_and_leaves_nothing_half_written(probe_dir, tmp_path, monkeypatch):
    result = json.loads((probe_dir / "probe.json").read_text())
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    with pytest.raises(OutputDirError, match=r"report\.html.*failed"):
        write_probe_report(blocker, result)
    assert blocker.read_text() == "x"
    out = tmp_path / "copy"
    shutil.copytree(probe_dir, out)
    before = (out / "report.html").read_bytes()

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs.os, "replace", full)  # the atomic writer report.html goes through
    with pytest.raises(OutputDirError, match="No space left on device"):
        write_probe_report(out)
    assert (out / "report.html").read_bytes() == before  # the old page, whole
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp")) == []  # no temporary file left


def test_writing_the_report_leaves_matplotlib_backend_and_figures_alone(probe_dir, tmp_path):
    """A notebook's inline backend survives report.html (figures are drawn off-screen, gradprobe.figures):
    ``matplotlib.use("Agg")`` inside the writer would make every later ``plt.show()`` draw nothing."""
    import matplotlib
    import matplotlib.pyplot as plt

    before = matplotlib.get_backend()
    matplotlib.use("svg")  # a backend the writer would have to switch away from
    try:
        open_before = plt.get_fignums()
        shutil.copytree(probe_dir, tmp_path / "copy")
        (tmp_path / "copy" / "report.html").unlink()
        write_probe_report(tmp_path / "copy")
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == open_before
        assert (tmp_path / "copy" / "report.html").stat().st_size > 10_000
    finally:
        matplotlib.use(before)
