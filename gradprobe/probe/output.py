"""A probe's output folder and its printed table (README, "The probe command").

:func:`write_probe_files` writes the folder of one probe batch (names from :mod:`gradprobe.layout`):

- :data:`~gradprobe.layout.ALIGNMENT_SAFETENSORS`: ``alignment`` a (N, T) in the model's dtype,
  ``completion_mask`` (N, T), ``completion_ids`` (N, T) and ``advantages.<reward>`` A^R (N, T, float64);
- :data:`~gradprobe.layout.TOKENS_JSONL`: one line per completion: ``row``, ``prompt_id``, ``score``,
  ``truncated``, ``tokens`` (the vocabulary's pieces), ``texts`` (what each adds to the decoded text,
  :func:`token_texts`), their ``alignment`` and every reward's ``advantages``, for heat maps;
- :data:`~gradprobe.layout.PROBE_JSON`: the result, last, so its presence marks a complete folder.

Every file is written atomically (:mod:`gradprobe.outputs`: a temporary file, fsync, rename), and JSON in
gradprobe's one encoding of non-finite floats (:func:`gradprobe.outputs.json_safe`: NaN -> null,
+-inf -> "inf"/"-inf"). :func:`format_table` is what ``gradprobe probe`` prints.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import save as safetensors_bytes

from ..forecast.forecaster import format_forecast
from ..layout import ALIGNMENT_SAFETENSORS, PROBE_JSON, TOKENS_JSONL
from ..outputs import json_safe, write_bytes_atomic, write_json_atomic, write_text_atomic
from ..tables import format_columns

__all__ = ["token_texts", "write_probe_files", "format_table"]


def token_texts(tokenizer, ids: list[int]) -> list[str]:
    """The text each token adds to the decoded completion (what a person reads), one string per id.

    ``convert_ids_to_tokens`` gives the vocabulary's raw pieces (``"Ġthe"``, ``"Ċ"``, byte
    fragments); this decodes prefixes instead, so ``"".join(token_texts(tok, ids)) ==
    tok.decode(ids)``. A token that ends inside a multi-byte character adds ``""`` and the token
    that completes it adds the character. Cost: one decode per token (completions are short).
    """
    out, prev = [], ""
    for k in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:k], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if text.endswith("\ufffd") and k < len(ids):  # an incomplete UTF-8 sequence: wait for the next token
            out.append("")
            continue
        out.append(text[len(prev):] if text.startswith(prev) else text)
        prev = text
    return out


def _token_lines(batch, alignment, advantages: dict, tokenizer) -> str:
    """tokens.jsonl's text: one JSON object per completion (row n of the batch, n = 0..N-1)."""
    lines = []
    for n in range(batch.num_rows):
        m = batch.completion_mask[n].cpu()
        ids = batch.completion_ids[n].cpu()[m].tolist()
        lines.append(json.dumps({
            "row": n, "prompt_id": batch.problems[n // batch.group_size].id,
            "score": json_safe(float(batch.scores[n])), "truncated": bool(batch.truncated[n]),
            "tokens": tokenizer.convert_ids_to_tokens(ids),  # the vocabulary's raw pieces
            "texts": token_texts(tokenizer, ids),  # what each token adds to the decoded text
            "alignment": alignment[n].cpu()[m].tolist(),
            "advantages": {k: v[n].cpu()[m].tolist() for k, v in advantages.items()},
        }) + "\n")
    return "".join(lines)


def write_probe_files(out, result: dict, batch, alignment, advantages: dict, tokenizer, *,
                      importance_weights=None) -> None:
    """Write one probe batch's folder ``out`` (created if missing): alignment.safetensors, tokens.jsonl,
    then probe.json (module docstring).

    Parameters
    ----------
    result : dict
        ``probe.json``'s content (:func:`gradprobe.probe.run.run_probe`).
    batch : gradprobe.types.RolloutBatch
        The probe batch, N = B * G completions of T tokens at most.
    alignment : Tensor
        a, shape (N, T).
    advantages : dict[str, Tensor]
        Reward -> A^R, shape (N, T).
    importance_weights : Tensor, optional
        A guided probe's W, shape (N, T) (:mod:`gradprobe.probe.guided`), saved as ``importance_weights``
        (the advantages are saved unweighted: the update's are W * A^R).

    Raises
    ------
    OutputDirError (an OSError)
        A file cannot be written (named); the file's previous content, if any, is left unchanged.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {"alignment": alignment.detach().cpu().contiguous(),
               "completion_mask": batch.completion_mask.cpu().contiguous(),
               "completion_ids": batch.completion_ids.cpu().contiguous()}
    for name, adv in advantages.items():
        tensors[f"advantages.{name}"] = adv.cpu().contiguous()
    if importance_weights is not None:
        tensors["importance_weights"] = importance_weights.detach().cpu().contiguous()
    write_bytes_atomic(out / ALIGNMENT_SAFETENSORS, safetensors_bytes(tensors))
    write_text_atomic(out / TOKENS_JSONL, _token_lines(batch, alignment, advantages, tokenizer))
    write_json_atomic(out / PROBE_JSON, json_safe(result))


def format_table(result: dict) -> str:
    """A plain-text table of the per-reward results (what ``gradprobe probe`` prints)."""
    cfg = result["config"]
    lines = [
        f"model {cfg['model']}  task {cfg['task']}  batch {cfg['prompts']}x{cfg['group']}  reference {cfg['reference']}"
        f"  precondition {cfg['precondition']}  lr {cfg['lr']:g}  budget {cfg['budget_tokens']:,} tokens",
        f"batch mean reward {result['batch']['mean_reward']:.3f}  truncation {result['batch']['truncation_rate']:.2f}"
        f"  generated tokens {result['ledger']['generated_tokens']}",
        "",
    ]
    rows = []
    for r in result["rewards"]:
        iv = r.get("interval")
        ivs = f"[{iv[0]:+.3e}, {iv[1]:+.3e}]" if iv else "-"
        snr = r.get("snr")
        snr_s = "-" if snr is None else (f"{snr:.2f}" if isinstance(snr, float) else str(snr))
        rows.append([r["name"], f"{r['inner_product']:+.3e}", ivs, snr_s, f"{r['predicted_gain_per_update']:+.4f}",
                     f"{r['tokens_per_update']:,}", f"{r['predicted_gain_at_budget']:+.3f}"])
    # columns as wide as their longest entry (long reward names)
    lines += format_columns(["reward", "<g_R,u>", "95% interval", "SNR", "gain/update", "tokens/update",
                             "gain@budget"], rows, "<>>>>>>")
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
