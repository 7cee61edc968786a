"""What ``gradprobe probe`` prints: :func:`format_table`, the per-reward table, its warnings and the forecast.

:func:`no_signal_entries` names the rewards that give no gradient on the batch of an older ``probe.json``, whose
entries lack ``no_signal_reason`` (:func:`gradprobe.probe.result.reward_entries` records it in every entry now).
Both are also importable from :mod:`gradprobe.probe.output`, where they lived before.
"""

from __future__ import annotations

from ..forecast.forecaster import format_forecast
from ..forecast.result import no_signal_reason
from ..probe_keys import LOSS_TYPE_SEPARATOR
from ..tables import format_columns
from .result import REFERENCE_REWARD

__all__ = ["format_table", "no_signal_entries", "ALIGNMENT_SNR_HEADER", "BIDI_CONTROLS", "bidi_escaped"]

#: The Unicode bidirectional controls (Unicode Standard Annex #9, "Explicit Directional Embeddings/Overrides/Isolates"
#: and the implicit marks): LRE, RLE, PDF, LRO, RLO (U+202A..U+202E), LRI, RLI, FSI, PDI (U+2066..U+2069), LRM, RLM
#: (U+200E, U+200F) and ALM (U+061C). Raw in a table cell or a page they reorder the text after them (a name
#: ``r<RLO>gnp.py`` reads as ``ryp.png``, and the rest of its line or paragraph is reversed), so a name (a plug-in
#: file's, a study folder's, an arm's) shows them as ``repr`` writes them (:func:`bidi_escaped`).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")

#: The per-reward table's column of <g_R,u> / its bootstrap standard error (``snr`` of ``probe.json``'s ``rewards``),
#: not the forecast table's SNR of rho-1 (:data:`gradprobe.forecast.section.RHO_SNR_HEADER`): two SNRs, each
#: named by its ratio.
ALIGNMENT_SNR_HEADER = "<g,u>/se"


def bidi_escaped(value):
    """``value`` with each :data:`BIDI_CONTROLS` character of its text written as ``repr`` writes it (U+202E as
    ``\\u202e``), so that a shown name cannot reorder what follows it; lists, tuples and dicts (keys and values)
    mapped item by item; anything else, and a text without such a character, unchanged (the same object)."""
    if isinstance(value, str):
        if BIDI_CONTROLS.isdisjoint(value):
            return value
        return type(value)("".join(repr(c)[1:-1] if c in BIDI_CONTROLS else c for c in value))  # markup stays markup
    if isinstance(value, dict):
        return {bidi_escaped(k): bidi_escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(bidi_escaped(v) for v in value)
    return value


def format_table(result: dict) -> str:
    """A plain-text table of the per-reward results (what ``gradprobe probe`` prints). Every text of ``result`` is
    shown with its bidirectional controls escaped (:func:`bidi_escaped`: a plug-in file's name holding U+202E)."""
    silent = _no_signal_lines(result)  # names as repr writes them (bidi controls escaped); warnings compared raw
    result = bidi_escaped(result)
    cfg = result["config"]
    secs = cfg.get("budget_seconds")
    lines = [
        f"model {cfg['model']}  task {cfg['task']}  batch {cfg['prompts']}x{cfg['group']}  reference {cfg['reference']}"
        f"  precondition {cfg['precondition']}  lr {cfg['lr']:g}  budget {cfg['budget_tokens']:,} tokens"
        + (f" (gain@budget and the forecast), {secs:,g} device-seconds (gain@{secs:g}s: raw first order, each "
           "reward's seconds/update including its own compute)" if secs is not None else ""),
        f"batch mean reward {result['batch']['mean_reward']:.3f}  truncation {result['batch']['truncation_rate']:.2f}"
        f"  generated tokens {result['ledger']['generated_tokens']}",
        "",
    ]
    if cfg.get("checkpoints"):  # gradprobe.probe.checkpoints: batches at the initial policy and each checkpoint, pooled
        labels = list(dict.fromkeys(b.get("checkpoint", "?") for b in result.get("batches") or []))
        lines.insert(2, f"probed along a reference run: {len(labels)} policies ({', '.join(labels)}), "
                        f"{cfg.get('batches_per_policy', '?')} batch(es) each, pooled; "
                        "<g_R,u> below is the mean over all batches")
    rows = [_reward_row(r, secs is not None) for r in result["rewards"]]
    header = ["reward", "<g_R,u>", "95% interval", ALIGNMENT_SNR_HEADER, "gain/update", "tokens/update", "gain@budget"]
    if secs is not None:
        header += ["seconds/update", f"gain@{secs:g}s"]
    # columns as wide as their longest entry (long reward names)
    lines += format_columns(header, rows, "<" + ">" * (len(header) - 1))
    extra = (cfg.get("loss_types") or [])
    if extra:
        passes = (result.get("costs") or {}).get("extra_alignment_passes")
        source = ("its token-weight family's alignment pass, each family with its own Adam preconditioner" if passes
                  else "the same alignment pass")
        lines.append(f"REWARD@LOSS: the reward's gradient under that loss type (from {source}); plain REWARD: "
                     f"under the probe's --loss-type {cfg.get('loss_type')}")
    guided = (result["rewards"][0].get("guidance") if result["rewards"] else None) if cfg.get("guidance") else None
    if guided:  # a guided probe (gradprobe.probe.guided): whose update the numbers are
        iw = guided["is_weight"]
        lines.append(f"guided arm (fraction {cfg['guidance']['fraction']:g}, prefix {cfg['guidance']['prefix']:g}, cap "
                     f"{iw['cap']:g}): {guided['guided_rows']} guided completions, {guided['hint_tokens']:,} hint "
                     f"tokens; every estimate is of the importance-weighted update (mean weight {iw['mean']:.4f}, "
                     f"{iw['capped_fraction']:.1%} of tokens at the cap)")
    lines += [f"warning: {w}" for w in result.get("warnings", [])]
    lines += silent
    c = result["costs"]
    ratio = c.get("alignment_to_update_ratio")
    fc = result.get("forecast")
    lines += ["", "gain/update and gain@budget: accuracy points, the RAW first-order extrapolation (no diminishing returns: "
                  "expected to overestimate)" + ("; read the forecast below" if fc and fc.get("available") else ""),
              f"alignment pass {c['alignment_pass_seconds']:.2f}s = "
              f"{ratio:.2f}x one update's forward+backward ({c['update_forward_backward_seconds']:.2f}s)"
              + (f" on the wall clock, {c['alignment_to_update_cpu_ratio']:.2f}x on the process's CPU clock (unaffected "
                 "by other processes)" if c.get("alignment_to_update_cpu_ratio") is not None else "") + "; "
              f"rollouts {c['rollout_seconds']:.1f}s, continuations {c['continuation_seconds']:.1f}s, "
              f"reference {c['reference_seconds']:.1f}s" if ratio is not None else ""]
    if fc:
        lines.append(format_forecast(fc))
    return "\n".join(lines)


def _reward_row(r: dict, seconds: bool) -> list[str]:
    """One row of :func:`format_table`'s table; with ``seconds`` (a ``--budget-seconds`` probe) also the reward's
    ``seconds_per_update`` and ``predicted_gain_at_time_budget``."""
    iv = r.get("interval")
    ivs = f"[{iv[0]:+.3e}, {iv[1]:+.3e}]" if iv else "-"
    snr = r.get("snr")
    snr_s = "-" if snr is None else (f"{snr:.2f}" if isinstance(snr, float) else str(snr))
    row = [r["name"], f"{r['inner_product']:+.3e}", ivs, snr_s, f"{r['predicted_gain_per_update']:+.4f}",
           f"{r['tokens_per_update']:,}", f"{r['predicted_gain_at_budget']:+.3f}"]
    if seconds:
        spu, gain = r.get("seconds_per_update"), r.get("predicted_gain_at_time_budget")
        row += ["-" if spu is None else f"{spu:.3f}", "-" if gain is None else f"{gain:+.3f}"]
    return row


def _no_signal_lines(result: dict) -> list[str]:
    """format_table's warning per entry without gradient, unless :func:`gradprobe.probe.result.diagnose` already
    warned that its reward's groups are all flat (that line names the reward, not the entry key ``REWARD@LOSS``)."""
    warned = result.get("warnings") or []
    rewards = {r["name"]: r.get("reward") or r["name"].partition(LOSS_TYPE_SEPARATOR)[0]
               for r in result.get("rewards") or []}
    lines = []
    for name, reason in _silent_entries(result).items():
        reward = rewards.get(name, name)
        if not any(w.startswith(f"reward {reward!r}: every group") for w in warned):
            lines.append(f"warning: reward {name!r} gives no gradient ({reason}): it cannot train, and its zeros "
                         "above are exact, not a measurement")
    return lines


def _silent_entries(result: dict) -> dict[str, str]:
    """Entry key -> why it gives no gradient: each entry's ``no_signal_reason`` (recorded since the entries were
    built, :func:`gradprobe.probe.result.reward_entries`), else :func:`no_signal_entries` (an older ``probe.json``)."""
    rewards = result.get("rewards") or []
    if rewards and all("no_signal_reason" in r for r in rewards):
        return {r["name"]: r["no_signal_reason"] for r in rewards if r["no_signal_reason"] is not None}
    return no_signal_entries(result)


def no_signal_entries(result: dict) -> dict[str, str]:
    """The probe entries that give no gradient on the probe batch(es), each with why, recomputed from their
    numbers (for a ``probe.json`` written before entries recorded ``no_signal_reason``).

    Parameters
    ----------
    result : dict
        A probe result (``probe.json``): its ``rewards`` entries (``per_group``, ``signal_proxy_per_group``,
        ``valid_completions``, ``reward_stats``) and ``config.probe_batches``.

    Returns
    -------
    dict[str, str]
        Entry key -> reason (:func:`gradprobe.forecast.result.no_signal_reason`: every advantage is 0, because
        every group's rewards are equal or the reward returned None/NaN for every completion).
    """
    rewards = result.get("rewards") or []
    ref = next((r for r in rewards if r.get("name") == REFERENCE_REWARD), None)
    batches = int((result.get("config") or {}).get("probe_batches") or 1)
    reasons = {r["name"]: no_signal_reason([r], [ref], batches=batches) for r in rewards}
    return {k: v for k, v in reasons.items() if v is not None}
