"""``report.html``: a self-contained page of one probe result, to look at rather than to parse.

``gradprobe probe --out DIR`` writes ``DIR/report.html`` beside ``probe.json`` (:func:`write_probe_report`).
One file, no external references (figures embedded as base64 PNG, styles inline), so it can be mailed
or attached to an issue. Sections:

1. the verdict table: each arm's forecast gain vs grpo at the budget (accuracy points) with its interval
   and the verdict sentence of :func:`gradprobe.forecast.forecast_section` (plus the calibrated gain when
   ``--calibration`` was given, labelled as the console labels it: ``calibrated gain (cost_only's, not probe's)``
   with a note under the table when the calibration corrects another forecaster than the verdicts', each gain's
   caveats (``tied``, ``intercept only``, ``shift only``, ``outside domain``) in its cell and the calibration's notes
   under the table); a row read off a reference curve that gives no verdict at the budget, or whose probe rho rests
   on too few groups to give one (its ``no_verdict_reason``), is greyed, its verdict cell says ``no verdict at
   BUDGET: WHY`` instead of advice, and its numbers read off the curve are marked ``*`` with a line under the
   table, as ``gradprobe probe`` prints them
   (:func:`gradprobe.forecast.format_forecast`); without a reference curve, the note saying what a forecast needs;
   either way the pre-screen's cost as a share of one grpo run's token budget (the line ``gradprobe probe`` prints)
   and the section's notes;
2. the raw per-reward table: <g_R, u>, its bootstrap interval over prompts, SNR, the first-order gain per
   update and at the budget (points), tokens per update c_R, and with ``--budget-seconds`` seconds per update and
   the raw first-order gain at the seconds budget;
3. the intervals as a figure: forecast gain vs grpo (points) per arm, and <g_R, u> per reward, each with
   its interval (:mod:`gradprobe.probe.report_figures`; an arm whose cost-only forecast is 0 by construction is
   drawn as the probe's forecast in its own marker, not as a measured 0; an arm that gives no verdict is left out,
   its row annotated and the caption saying why);
4. per-token heat maps, one per reward: the few completions whose summed term
   sum_t A^R_t a_t moves <g_R, u> most, each token coloured by its term A^R_t a_t (blue: pushes the update
   toward the reference u, red: against it; full colour at the 95th percentile of the shown |terms|; hover
   for a_t, A^R_t and the product), read from
   ``tokens.jsonl`` (``texts``, ``alignment``, ``advantages``; ``batch_0/tokens.jsonl`` with
   ``--probe-batches N``);
5. the token ledger as bar charts: generated tokens of the probe by category (rollout, continuation,
   selection) and of the held-out reference, and tokens per update c_R of each reward.

Formulas (DESIGN.md, "The probe"): a_t = <grad l_t, u> (per-token alignment), <g_R, u> = (1/Z_R)
sum_ijt A^R_ijt a_ijt, so a token's term before the loss normalisation 1/Z_R is A^R_t a_t.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..forecast.forecaster import format_budget
from ..forecast.result import NO_VERDICT, no_verdict
# the words and marks format_forecast prints: one wording
from ..forecast.section import RAW_GAINS_ABOVE, pre_screen_line, row_marks
from ..forecast.special_rows import no_verdict_words
from ..layout import PROBE_JSON, TOKENS_JSONL, rerun_advice
from ..outputs import read_probe_json, write_text_atomic
from ..tables import holds_surrogate, shown, surrogates_escaped
from .output import claim_probe_file
from .report_figures import NO_VERDICT_MARK, interval_figure, ledger_figure, ledger_rows, png
from .table import bidi_escaped


__all__ = ["write_probe_report", "render_probe_report", "pick_completions", "colour_scale", "read_tokens", "REPORT"]

REPORT = "report.html"
#: completions shown per reward in the heat maps
COMPLETIONS_PER_REWARD = 3
#: quantile of the shown |A a| that gets full colour in the heat maps (:func:`colour_scale`)
SCALE_QUANTILE = 0.95
_BLUE, _RED = (33, 102, 172), (178, 24, 43)  # ColorBrewer RdBu ends: toward / against the reference
#: What the line under the verdict table says a marked number is (the console's words).
NO_VERDICT_WORDS = "read off a reference curve that gives no verdict here"

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gradprobe probe report: {{ cfg.model }} on {{ cfg.task }}</title>
<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:90%}
td.n{text-align:right;font-family:monospace}img{max-width:100%}figure{margin:1.5em 0}
p.note{background:#fff4d6;padding:6px 10px;border-left:4px solid #e0a800}
td.verdict{font-weight:bold}.worth{color:#1a6e1a}.not{color:#a01818}
tr.noverdict td{color:#767676;background:#f4f4f4}td.verdict.noverdict{font-weight:normal;font-style:italic}
.heat{font-family:monospace;white-space:pre-wrap;border:1px solid #ddd;padding:6px;margin:.4em 0 1em;font-size:95%}
.heat span{border-radius:2px}.meta{font-size:85%;color:#555}
.scale{display:inline-block;width:240px;height:12px;vertical-align:middle;border:1px solid #bbb;
background:linear-gradient(to right,rgb{{ red }},#fff,rgb{{ blue }})}</style></head>
<body>
<h1>Probe report</h1>
<p>Model <b>{{ cfg.model }}</b>, task <b>{{ cfg.task }}</b>; probe batch {{ cfg.prompts }} prompts x {{ cfg.group }}
completions{% if batches > 1 %} x {{ batches }} batches{% endif %}{% if cfg.checkpoints %} along a reference run: {{ cfg.batches_per_policy }} at each of {{ cfg.checkpoints|length + 1 }} policies (the initial one and {{ cfg.checkpoints|join(", ") }}), pooled{% endif %}; reference <b>{{ cfg.reference }}</b>
(preconditioner: {{ reference.precondition }}); lr {{ cfg.lr }}; loss {{ cfg.loss_type }};
budget {{ "{:,}".format(cfg.budget_tokens) }} generated tokens{% if secs is not none %} (gain at budget and the
forecast), {{ "{:,g}".format(secs) }} device-seconds (gain@{{ "{:g}".format(secs) }}s: raw first order, each reward's
seconds / update including its own compute){% endif %}.
Batch mean reward {{ fmt(batch.mean_reward, ".3f") }}, truncation rate {{ fmt(batch.truncation_rate, ".2f") }}.</p>
{% for w in warnings %}<p class="note">warning: {{ w }}</p>{% endfor %}

<h2>Verdict</h2>
{% if forecast.available %}
<p>Forecast vs grpo at {{ budget_s }}{% if forecast["update"] %}, for the curve's {#
#}{{ forecast["update"].curve|join('x') }} updates, not {% if forecast["update"].stated %}the {#
#}{{ forecast["update"].probe|join('x') }} of --update-prompts x --update-group{% else %}the probe's {#
#}{{ forecast["update"].probe|join('x') }}{% endif %}{% endif %} (grpo reaches {#
#}{{ fmt(forecast.grpo_accuracy, ".1f") }}{{ nv_mark(forecast) }} points there), by the
<b>{{ forecast.method }}</b> forecaster ({{ forecast.method_choice }}); reference curve: {{ forecast.curve }}.
Gains in accuracy points, {{ level }}% intervals; method: the forecaster behind each row's gain (rho is used by
the probe and signal-proxy forecasters only, not by cost only).</p>
<table id="verdicts"><tr><th>arm</th><th>reward</th><th>tokens / update</th><th>rho</th><th>forecast accuracy</th>
<th>gain vs grpo</th><th>interval</th>{% if calibrated %}{% if cal.forecaster_note %}{#
#}<th>{{ cal.own_header }}</th>{% endif %}<th>{{ cal.header }}</th><th>calibrated interval</th>{% endif %}
<th>method</th><th>verdict</th></tr>
{% for r in forecast.rows %}{% set ma, m = row_marks(forecast, r) %}{#
#}<tr{% if m %} class="noverdict"{% endif %}><td>{{ r.arm|shown }}</td>{#
#}<td>{{ r.reward|shown }}</td><td class="n">{{ fmt(r.tokens_per_update, ",.0f") }}</td>
<td class="n">{{ fmt(r.rho, ".2f") }}</td><td class="n">{{ fmt(r.forecast_accuracy, ".1f") }}{{ ma }}</td>
<td class="n">{{ fmt(r.forecast_gain, "+.1f") }}{{ m }}</td>{#
#}<td class="n">{{ interval(r.gain_interval, "+.1f") }}{{ m }}</td>
{% if calibrated %}{% if cal.forecaster_note %}<td class="n">{{ fmt(calibrated.get(r.reward, {}).get("forecast"),
"+.1f") }}{{ m }}</td>{% endif %}<td class="n">{{ fmt(calibrated.get(r.reward, {}).get("gain"), "+.1f") }}{{ m }}{#
#}{% for c in calibrated.get(r.reward, {}).get("marks", []) %} {{ c }}{% endfor %}</td>
<td class="n">{{ interval(calibrated.get(r.reward, {}).get("interval"), "+.1f") }}{{ m }}</td>{% endif %}
<td>{{ r.method or "n/a" }}</td><td class="verdict {{ verdict_class(r) }}">{{ verdict_text(r, budget_s) }}</td></tr>
{% endfor %}</table>{% if no_verdict_line %}
<p class="note" id="no-verdict">{{ no_verdict_line }}</p>{% endif %}
{% if calibrated and cal.forecaster_note %}<p class="note" id="calibration-forecaster">{{ cal.forecaster_note }}</p>
{% endif %}{% if calibrated %}{% for n in cal.notes %}<p class="note calibration">{{ n }}</p>
{% endfor %}{% endif %}
{% if forecast.budget.seconds_note %}<p class="note">--budget-seconds {{ "{:g}".format(forecast.budget.seconds) }}:
{{ forecast.budget.seconds_note }}</p>{% endif %}
{% for line in pre_screen %}<p id="pre-screen">{{ line }}</p>{% endfor %}
{% for n in forecast.notes %}<p class="note">{{ n }}</p>{% endfor %}
{% else %}
<p class="note">No forecast: {{ no_forecast_note or "the probe was run without one (gradprobe probe adds it)" }}</p>
{% for line in pre_screen %}<p id="pre-screen">{{ line }}</p>{% endfor %}
{% for n in forecast.notes %}<p class="note">{{ n }}</p>{% endfor %}
{% endif %}

<h2>Raw per-reward figures</h2>
<p>&lt;g_R, u&gt;: the reward's policy gradient along the (preconditioned) reference update u, with its 95% bootstrap
interval over prompts and its SNR, &lt;g_R, u&gt; / its bootstrap standard error (not the forecast's SNR of rho - 1,
|rho - 1| / se); gains: the first-order extrapolation 100 lr &lt;g_R, u&gt; (accuracy points; no diminishing
returns, expected to overestimate){% if secs is not none %}; seconds / update: the wall-clock seconds of one training
update under the reward, its own compute included, and gain@{{ "{:g}".format(secs) }}s the raw first-order gain at the
{{ "{:,g}".format(secs) }} device-seconds budget{% endif %}.</p>
<table id="rewards"><tr><th>reward</th><th>&lt;g_R, u&gt;</th><th>95% interval</th>
<th>SNR of &lt;g_R, u&gt;</th><th>gain / update</th>
<th>tokens / update</th><th>gain at budget</th>{% if secs is not none %}<th>seconds / update</th>
<th>gain@{{ "{:g}".format(secs) }}s (raw first order)</th>{% endif %}</tr>
{% for r in rewards %}<tr><td>{{ r.name|shown }}</td><td class="n">{{ fmt(r.inner_product, "+.3e") }}</td>
<td class="n">{{ interval(r.interval, "+.3e") }}</td><td class="n">{{ fmt(r.snr, ".2f") }}</td>
<td class="n">{{ fmt(r.predicted_gain_per_update, "+.4f") }}</td><td class="n">{{ fmt(r.tokens_per_update, ",.0f") }}</td>
<td class="n">{{ fmt(r.predicted_gain_at_budget, "+.3f") }}</td>{% if secs is not none %}
<td class="n">{{ fmt(r.seconds_per_update, ".3f") }}</td><td class="n">{{ fmt(r.predicted_gain_at_time_budget, "+.3f") }}</td>{% endif %}</tr>
{% endfor %}</table>

<h2>Intervals</h2>
<figure><img id="intervals" alt="intervals" src="data:image/png;base64,{{ images.intervals }}">
<figcaption>{{ intervals_caption }}</figcaption></figure>

<h2>Per-token heat maps</h2>
<p>For each reward, the {{ per_reward }} completions of the probe batch whose summed term sum_t A<sup>R</sup><sub>t</sub>
a<sub>t</sub> has the largest magnitude. Each token is coloured by its own term A<sup>R</sup><sub>t</sub> a<sub>t</sub>
(a<sub>t</sub> = &lt;grad log pi(y_t), u&gt;, its alignment; A<sup>R</sup><sub>t</sub> its advantage under R):
<span class="scale"></span> red: against the reference update, white: 0, blue: toward it (full colour at the 95th
percentile of the |terms| shown for that reward; larger ones saturate). Hover a token for its numbers; a line break
is shown as &#8629;.</p>
{% for h in heatmaps %}<div class="reward-heatmap" data-reward="{{ h.name|shown }}"><h3>{{ h.name|shown }}</h3>
{% if h.rows %}<p class="meta">colour scale: |A a| = {{ fmt(h.scale, ".3g") }}</p>
{% for row in h.rows %}<p class="meta">completion {{ row.row }} (prompt {{ row.prompt_id }}), verifier score
{{ fmt(row.score, "g") }}{% if row.truncated %}, truncated{% endif %}; sum A a = {{ fmt(row.total, "+.3g") }}</p>
<div class="heat">{% for t in row.tokens %}<span style="background:{{ t.colour }}" title="{{ t.title }}">{{ t.text }}</span>{% if t.newline %}<br>{% endif %}{% endfor %}</div>
{% endfor %}{% else %}<p class="note">no per-token data for this reward in tokens.jsonl</p>{% endif %}</div>
{% endfor %}

<h2>Token ledger</h2>
<figure><img id="ledger" alt="token ledger" src="data:image/png;base64,{{ images.ledger }}">
<figcaption>Generated tokens of the probe by category (the held-out reference's own rollouts beside them; never charged
to a reward), and tokens per update c_R of each reward (continuations included).</figcaption></figure>
<table id="ledger-table"><tr><th>category</th><th>generated tokens</th></tr>
{% for k, v in ledger_rows %}<tr><td>{{ k }}</td><td class="n">{{ "{:,}".format(v) }}</td></tr>{% endfor %}</table>
<p class="meta">Made by gradprobe with {{ versions }}.</p>
</body></html>
"""


def _fmt(x, spec: str = ".3g") -> str:
    if x is None or isinstance(x, str) or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a" if x is None or not isinstance(x, str) else x
    return format(x, spec)


def _interval(iv, spec: str) -> str:
    """``[lo, hi]`` in ``spec``; ``n/a`` for none, a string end, or a NaN end (a reward without a calibrated gain:
    calib gives it the interval [NaN, NaN] in memory, null in calibrated.json; the console prints n/a too)."""
    if not iv or len(iv) != 2 or any(v is None or isinstance(v, str) or (isinstance(v, float) and math.isnan(v))
                                     for v in iv):
        return "n/a"
    return f"[{format(iv[0], spec)}, {format(iv[1], spec)}]"


def _verdict_class(row: dict) -> str:
    """The verdict cell's colour class: ``noverdict`` (grey) for a row with a ``no_verdict_reason``, whatever its
    verdict says; else ``worth`` (green) / ``not`` (red) by the verdict's first words, or none."""
    if row.get("no_verdict_reason"):
        return "noverdict"
    v = str(row.get("verdict") or "")
    return "not" if v.startswith("not worth") else ("worth" if v.startswith("worth") else "")


def _nv_mark(row: dict) -> str:
    """:data:`NO_VERDICT_MARK` for a forecast row (or the section, for grpo's accuracy in the title) read off a
    reference curve that gives no verdict at the budget (its ``no_verdict_reason``), else ''."""
    return NO_VERDICT_MARK if row.get("no_verdict_reason") else ""


def _verdict_text(row: dict, budget_s: str) -> str:
    """A row's verdict cell: its ``verdict``; for a row with a ``no_verdict_reason`` whose verdict does not start
    ``no verdict at`` (a hand-edited or foreign ``probe.json``), ``no verdict at BUDGET: WHY`` instead, so the page
    never shows advice the forecast refused (:func:`gradprobe.forecast.result.no_verdict`)."""
    v, why = str(row.get("verdict") or ""), row.get("no_verdict_reason")
    if why and not v.startswith(NO_VERDICT):
        return no_verdict(budget_s.removesuffix(" tokens") or "the budget", str(why))
    return v


def _no_verdict_line(fc: dict) -> str | None:
    """The line under the verdict table when a number in it is marked :data:`NO_VERDICT_MARK`: the console's
    (:func:`gradprobe.forecast.format_forecast`), the reason said where no row's verdict says it (grpo alone, or
    every other arm without gradient); None when the curve gives verdicts."""
    if any(r.get("no_verdict_reason") for r in fc.get("rows") or []):  # a curve's reason, or a rho on few groups
        words = no_verdict_words(r.get("no_verdict_reason") for r in fc.get("rows") or [])
        return f"{NO_VERDICT_MARK} {words} (why: in the row's verdict); not advice"
    if fc.get("no_verdict_reason"):
        return f"{NO_VERDICT_MARK} {NO_VERDICT_WORDS}: {fc['no_verdict_reason']}"
    return None


def read_tokens(out: Path, result: dict | None = None) -> list[dict]:
    """Rows of ``out/tokens.jsonl`` (``out/batch_0/tokens.jsonl`` for several probe batches); [] if neither.

    With ``result`` (the probe's ``probe.json`` content) the rows are counted against the completions of the batch
    the file belongs to: ``result["batch"]`` for ``out/tokens.jsonl``, batch 0's record (``result["batches"][0]``,
    else ``out/batch_0/probe.json``) for ``out/batch_0/tokens.jsonl``, so that the heat maps are never drawn from
    part of the batch (a file cut at a line boundary reads as valid JSON lines).

    Raises
    ------
    ValueError
        The file holds another number of lines than the batch's completions (``batch.completions``, else
        ``prompts`` x ``group``): the file, both counts and the fix (restore it, or write the probe again) named.
    """
    for path in (out / TOKENS_JSONL, out / "batch_0" / TOKENS_JSONL):
        if path.exists():
            rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            expected = _completions(_batch_record(out, path, result)) if result is not None else None
            if expected is not None and len(rows) != expected:
                raise ValueError(f"{path} holds {len(rows)} completion lines but its {PROBE_JSON} records {expected} "
                                 "completions (one line each): the file is incomplete or was edited; restore it, or "
                                 f"{rerun_advice(out)}")
            return rows
    return []


def _batch_record(out: Path, path: Path, result: dict):
    """The ``probe.json`` content of the batch whose ``tokens.jsonl`` is ``path`` (:func:`read_tokens`)."""
    if path.parent == out:
        return result
    batches = result.get("batches")
    if isinstance(batches, list) and batches and isinstance(batches[0], dict):
        return batches[0]
    file = path.parent / PROBE_JSON
    return read_probe_json(file, rerun_advice(out)) if file.is_file() else None


def _completions(record) -> int | None:
    """``record["batch"]``'s completions (``completions``, else ``prompts`` x ``group``); None without a count."""
    batch = record.get("batch") if isinstance(record, dict) else None
    if not isinstance(batch, dict):
        return None
    n, b, g = batch.get("completions"), batch.get("prompts"), batch.get("group")
    whole = [isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (n, b, g)]
    return n if whole[0] else (b * g if whole[1] and whole[2] else None)


def pick_completions(rows: list[dict], reward: str, k: int = COMPLETIONS_PER_REWARD) -> list[dict]:
    """The ``k`` completions whose summed term sum_t A^R_t a_t has the largest |value| (row order breaks ties).

    Parameters
    ----------
    rows : list[dict]
        ``tokens.jsonl`` rows: ``alignment`` (a_t, length T_n) and ``advantages[reward]`` (A^R_t, length T_n).
    reward : str
    k : int

    Returns
    -------
    list[dict]
        Each chosen row plus ``terms`` (A^R_t a_t per token, length T_n) and ``total`` (their sum), in
        decreasing |total|; rows without the reward or without tokens are skipped.
    """
    scored = []
    for row in rows:
        adv = (row.get("advantages") or {}).get(reward)
        a = row.get("alignment") or []
        if adv is None or not a or len(adv) != len(a):
            continue
        terms = [float(x) * float(y) for x, y in zip(adv, a)]
        scored.append({**row, "terms": terms, "total": float(sum(terms))})
    scored.sort(key=lambda r: -abs(r["total"]))  # stable: ties keep row order
    return scored[:k]


def _colour(value: float, scale: float) -> str:
    if not scale or not math.isfinite(value):
        return "transparent"
    w = min(1.0, abs(value) / scale)
    r, g, b = _BLUE if value > 0 else _RED
    return f"rgba({r},{g},{b},{w:.3f})"


def colour_scale(terms) -> float:
    """The |A a| that gets full colour: the 95th percentile of |terms| (numpy's linear interpolation).

    A few tokens (often a wrong digit, whose log-probability gradient is large) have terms 10-100x
    the rest; on a linear scale up to the maximum every other token would be white. Larger terms
    saturate. 0.0 when ``terms`` is empty."""
    import numpy as np

    a = np.abs(np.asarray(list(terms), dtype=np.float64))
    return float(np.quantile(a, SCALE_QUANTILE)) if a.size else 0.0


def _heatmaps(rows: list[dict], names: list[str], per_reward: int) -> list[dict]:
    out = []
    for name in names:
        chosen = pick_completions(rows, name, per_reward)
        scale = colour_scale(t for r in chosen for t in r["terms"])
        picked = []
        for r in chosen:
            texts = r.get("texts") or r.get("tokens") or []
            toks = []
            for text, a, adv, term in zip(texts, r["alignment"], r["advantages"][name], r["terms"]):
                newline = text.endswith("\n")
                toks.append({"text": text.replace("\n", "\u21b5"), "newline": newline, "colour": _colour(term, scale),
                             "title": f"a = {a:+.3g}, A = {adv:+.3g}, A a = {term:+.3g}"})
            picked.append({"row": r.get("row"), "prompt_id": r.get("prompt_id"), "score": r.get("score"),
                           "truncated": r.get("truncated"), "total": r["total"], "tokens": toks})
        out.append({"name": name, "scale": scale, "rows": picked})
    return out


def _shown_name(name):
    """A reward's or arm's name as the page shows it: control characters and lone surrogates escaped as the printed
    table does (:func:`gradprobe.tables.shown`: ``r\\udcff.py:reward``); anything but a string unchanged."""
    return shown(name) if isinstance(name, str) else name


def _encodable(value):
    """Every value the page shows, each lone surrogate (an undecodable byte of a file name, ``os.fsdecode``) written
    as ``\\udcHH``, so that the page can be written as UTF-8 (a surrogate has no UTF-8 form), and each bidirectional
    control as ``\\u202e`` (:func:`gradprobe.probe.table.bidi_escaped`: a name holding U+202E would reverse the rest
    of its cell or heading); the rest unchanged."""
    value = bidi_escaped(value) if isinstance(value, str) else value  # markup stays markup
    return type(value)(surrogates_escaped(value)) if holds_surrogate(value) else value


def render_probe_report(result: dict, tokens: list[dict], *, per_reward: int = COMPLETIONS_PER_REWARD) -> str:
    """The HTML page of a probe result (see the module docstring for its sections).

    Parameters
    ----------
    result : dict
        ``probe.json``'s content (with ``forecast`` when ``gradprobe probe`` made one, and
        ``calibrated_gain``/``calibrated_interval`` per reward and ``calibration``, calibrated.json's document, after
        ``--calibration``: :func:`calib.apply.calibrate_probe`). The calibrated column's header says whose gain it
        calibrates when that is not the verdicts' forecaster, its cells the caveats, and the notes under the table
        why (:func:`_calibration_view`).
    tokens : list[dict]
        ``tokens.jsonl`` rows (:func:`read_tokens`); may be empty (the heat maps then say so).
    per_reward : int
        Completions per reward in the heat maps.

    Returns
    -------
    str
        A self-contained HTML document (every figure a base64 PNG, no external reference).
    """
    import jinja2

    cfg = result.get("config") or {}
    fc = result.get("forecast") or {}
    rewards = result.get("rewards") or []
    calibrated, cal = _calibration_view(result)
    fig, caption = interval_figure(result)
    intervals_png = png(fig)
    budget = fc.get("budget") or {}
    env = jinja2.Environment(autoescape=True, undefined=jinja2.ChainableUndefined, finalize=_encodable)
    env.filters["shown"] = _shown_name
    return env.from_string(_TEMPLATE).render(
        cfg=cfg, batch=result.get("batch") or {}, reference=result.get("reference") or {}, forecast=fc,
        pre_screen=pre_screen_line(fc), no_forecast_note=_page_note(fc.get("note")),
        warnings=result.get("warnings") or [], rewards=rewards, calibrated=calibrated, cal=cal,
        batches=int(cfg.get("probe_batches") or 1),
        budget_s=(format_budget(budget["value"], budget.get("kind", "tokens")) + (" tokens" if budget.get("kind") ==
                                                                                  "tokens" else "")
                  if budget.get("value") is not None else ""),
        level=int(round(100 * float(fc.get("level") or 0.95))),
        images={"intervals": intervals_png, "ledger": png(ledger_figure(result))}, intervals_caption=caption,
        heatmaps=_heatmaps(tokens, [r["name"] for r in rewards], per_reward), per_reward=per_reward,
        ledger_rows=ledger_rows(result), secs=cfg.get("budget_seconds"), fmt=_fmt, interval=_interval,
        verdict_class=_verdict_class, verdict_text=_verdict_text, nv_mark=_nv_mark, row_marks=row_marks,
        no_verdict_line=_no_verdict_line(fc),
        red=_RED, blue=_BLUE, versions=", ".join(f"{k} {v}" for k, v in (result.get("versions") or {}).items()))


#: The verdict table's calibrated-gain header; ``(cost_only's, not probe's)`` is added when the calibration corrects
#: another forecaster than the verdicts' (:func:`_calibration_view`).
CALIBRATED_HEADER = "calibrated gain"


def _calibration_view(result: dict) -> tuple[dict, dict]:
    """What the verdict table shows of ``--calibration``, as ``gradprobe probe`` prints it
    (:func:`calib.apply.format_calibrated`).

    Returns ``(calibrated, cal)``: ``calibrated`` maps each reward with a ``calibrated_gain`` to its ``gain``,
    ``interval``, ``forecast`` (the calibrated forecaster's gain vs grpo that the calibration read; all in accuracy
    points) and ``marks`` (its ``caveats`` in ``result["calibration"]``: ``tied``, ``intercept only``, ``shift
    only``; then ``outside domain``), {} without a calibration. ``cal`` holds ``header`` (``calibrated gain
    (cost_only's, not probe's)`` when the calibration's ``forecaster_note`` says it corrects another forecaster than
    the verdicts', else ``calibrated gain``), ``forecaster_note`` (None when they match), ``own_header`` (the column
    of the calibrated forecaster's gain, shown beside the verdicts' gain only when they differ: ``cost_only's gain
    vs grpo``) and ``notes`` (the document's notes but that one, in the console's order: warnings, rewards without a
    calibrated gain, caveats). A result without ``calibration`` (a probe.json read back: calib writes its document
    to calibrated.json) gets the plain header, no marks and no notes."""
    doc = result.get("calibration")
    doc = doc if isinstance(doc, dict) else {}
    block = doc.get("calibration") if isinstance(doc.get("calibration"), dict) else {}
    given = {r.get("name"): r for r in doc.get("rewards") or [] if isinstance(r, dict)}
    caveats = {n: list(r.get("caveats") or []) for n, r in given.items()}
    calibrated = {r["name"]: {"gain": r.get("calibrated_gain"), "interval": r.get("calibrated_interval"),
                              "forecast": given.get(r["name"], {}).get("forecast"),
                              "marks": caveats.get(r["name"], []) + (["outside domain"] if r.get("outside_domain")
                                                                      else [])}
                  for r in result.get("rewards") or [] if r.get("calibrated_gain") is not None}
    note = block.get("forecaster_note") or None
    header = (f"{CALIBRATED_HEADER} ({block.get('forecaster_name')}'s, not {block.get('verdict_forecaster')}'s)"
              if note else CALIBRATED_HEADER)
    notes = [n for n in doc.get("notes") or [] if isinstance(n, str) and n != note]
    return calibrated, {"header": header, "forecaster_note": note, "notes": notes,
                        "own_header": f"{block.get('forecaster_name')}'s gain vs grpo"}


#: What the page says instead of the no-forecast note's words that point at the console's raw table, printed above
#: it (``gradprobe probe``; :data:`gradprobe.forecast.section.RAW_GAINS_ABOVE`, the words the note is built from):
#: the page's raw per-reward table comes after the verdict section.
_BELOW = "the gains in the raw per-reward table below are"


def _page_note(note: str | None) -> str | None:
    """The forecast section's ``note`` as the page says it: the raw gains placed below (``RAW_GAINS_ABOVE`` -> the
    words of :data:`_BELOW`)."""
    return note.replace(RAW_GAINS_ABOVE, _BELOW) if isinstance(note, str) else note


def write_probe_report(out: str | Path, result: dict | None = None, *,
                       per_reward: int = COMPLETIONS_PER_REWARD) -> Path:
    """Write ``out/report.html`` atomically (a temporary file in ``out``, then ``os.replace``), named in the record of
    the probe writing ``out`` (:func:`gradprobe.probe.output.claim_probe_file`; nothing without one) once the page and
    its figures are rendered, just before its temporary file: a probe killed while rendering has not named it, so a
    ``report.html`` the user puts there afterwards is kept by the next probe, not deleted as the killed probe's.

    Parameters
    ----------
    out : path
        The probe's output folder (``probe.json``, ``tokens.jsonl``).
    result : dict, optional
        The probe result; default: read ``out/probe.json``.
    per_reward : int
        Completions per reward in the heat maps.

    Returns
    -------
    Path
        ``out/report.html``.

    Raises
    ------
    OutputDirError
        ``out`` is missing, not a folder, not writable, or the disk is full (names the path and the
        fix); the temporary file is removed and an existing ``report.html`` is left as it was. Or the probe's record
        in ``out`` cannot be read or written (:func:`~gradprobe.probe.output.claim_probe_file`, named).
    FileNotFoundError
        ``result`` not given and ``out/probe.json`` does not exist (named, with the fix).
    ValueError
        ``result`` not given and ``out/probe.json`` is not UTF-8 text, not valid JSON or no JSON object with a
        ``rewards`` list (one line naming the file and the fix: :func:`gradprobe.outputs.read_probe_json`, which
        reads a UTF-8 byte-order mark as :func:`gradprobe.load_probe` does). Or ``tokens.jsonl`` holds another number
        of lines than the batch's completions (:func:`read_tokens`: the file, both counts and the fix named).
    """
    out = Path(out)
    if result is None:
        result = read_probe_json(out / PROBE_JSON, rerun_advice(out))
    page = render_probe_report(result, read_tokens(out, result) if out.is_dir() else [], per_reward=per_reward)
    path = out / REPORT
    claim_probe_file(out, REPORT)  # rendered: named in the probe's record just before its temporary file
    write_text_atomic(path, page)  # a temporary file in out, fsynced, then os.replace
    return path
