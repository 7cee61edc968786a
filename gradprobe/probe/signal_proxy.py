"""verl's forward-only gradient-signal proxy, a baseline beside the probe (:mod:`gradprobe.forecast`).

:func:`token_probability_stats` reads pi_t(y_t) and sum_v pi_t(v)^2 of every completion token in one
no-grad forward; :func:`signal_proxy_group_sums` turns them into per-group sums of A_n^2 W_n (verl,
``compute_variance_proxy_metrics``). Re-exported by :mod:`gradprobe.probe.estimate`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..logprobs import position_ids_from_mask

__all__ = ["token_probability_stats", "signal_proxy_group_sums"]



@torch.no_grad()
def token_probability_stats(model, batch, *, micro_batch_size: int = 8) -> tuple[Tensor, Tensor]:
    """pi_t(y_t) and sum_v pi_t(v)^2 of every completion token, in one no-grad forward per micro-batch.

    The inputs, position ids and temperature are those of the loss (:func:`gradprobe.logprobs.token_logprobs`):
    logits at the batch's sampling temperature, the last T + 1 positions only.

    Parameters
    ----------
    model : transformers causal LM
    batch : gradprobe.types.RolloutBatch
        N = B * G rows, completions of T tokens.
    micro_batch_size : int
        Rows per forward (results do not depend on it).

    Returns
    -------
    pi : Tensor (float64), shape (N, T)
        Probability of the sampled token, pi_t(y_t).
    sum_pi_squared : Tensor (float64), shape (N, T)
        sum_v pi_t(v)^2 = exp(logsumexp(2 z) - 2 logsumexp(z)) over the vocabulary (z the logits), as
        verl's actor computes it (``sum_pi_squared``, docs/algo/otb.md). Values off the completion mask
        are meaningless: multiply by the mask.
    """
    t = batch.completion_mask.shape[1]
    completion = batch.input_ids[:, batch.prompt_length:]
    pis, sq = [], []
    for start in range(0, batch.num_rows, max(1, micro_batch_size)):
        rows = slice(start, start + micro_batch_size)
        ids, am = batch.input_ids[rows], batch.attention_mask[rows]
        out = model(input_ids=ids, attention_mask=am, position_ids=position_ids_from_mask(am), use_cache=False,
                    logits_to_keep=t + 1)
        z = out.logits[:, :-1].to(torch.float64)
        if batch.temperature != 1.0:
            z = z / batch.temperature
        lse = torch.logsumexp(z, dim=-1)
        logp = z.gather(-1, completion[rows].unsqueeze(-1)).squeeze(-1) - lse
        pis.append(logp.exp())
        sq.append(torch.exp(torch.logsumexp(2.0 * z, dim=-1) - 2.0 * lse))
    return torch.cat(pis), torch.cat(sq)


def signal_proxy_group_sums(advantages: Tensor, pi: Tensor, sum_pi_squared: Tensor, completion_mask: Tensor,
                            group_size: int, *, names: Sequence[str] | None = None) -> Tensor:
    """Per-group sums of verl's forward-only gradient-power proxy A_n^2 W_n.

    verl (volcengine/verl, ``verl/trainer/ppo/metric_utils.py``, ``compute_variance_proxy_metrics``,
    on-policy branch; docs/algo/otb.md, "Gradient Variance Proxy Metrics") estimates the squared norm of
    one trajectory's policy gradient without a backward pass as ||g_n||^2 ~ A_n^2 W_n with

        W_n = max(0, sum_t m_nt (1 - 2 pi_t(y_t) + sum_v pi_t(v)^2)),    A_n = masked mean_t A_nt,

    where 1 - 2 pi(y) + sum pi^2 = ||e_y - pi||^2 is the squared norm of the gradient of log pi(y)
    with respect to the logits; its ``proxy2_total_power`` is the batch mean (1/N) sum_n A_n^2 W_n.
    Summing per group keeps the bootstrap over prompts possible: the proxy is ``sums.sum(-1) / N``.

    Parameters
    ----------
    advantages : Tensor, shape (N, T) or (R, N, T)
        A^R_nt of one or R rewards (values off the mask are ignored).
    pi, sum_pi_squared : Tensor, shape (N, T)
        From :func:`token_probability_stats`.
    completion_mask : BoolTensor, shape (N, T)
    group_size : int
        G; rows are prompt-major.
    names : sequence of str, optional
        The rewards' names, in the order of ``advantages``' first axis, for the messages (else their index).

    Returns
    -------
    Tensor (float64), shape (B,) or (R, B)
        sum over the group's rows of A_n^2 W_n. An empty completion has A_n = 0 (verl's masked mean
        with its epsilon gives 0 too) and counts in N.

    Raises
    ------
    ValueError
        Mismatched shapes, N not a multiple of G, or non-finite values on the mask; or a non-finite sum (float64
        overflow, named by reward), so no inf reaches ``probe.json`` (the advantages' size is checked where every
        reward's output enters: :func:`gradprobe.rewards.base.checked_output`).
    """
    mask = completion_mask.bool()
    n, t = mask.shape
    if pi.shape != (n, t) or sum_pi_squared.shape != (n, t) or advantages.shape[-2:] != (n, t):
        raise ValueError(f"advantages {tuple(advantages.shape)}, pi {tuple(pi.shape)} and sum_pi_squared "
                         f"{tuple(sum_pi_squared.shape)} must all end in the completion mask's shape {(n, t)}")
    if group_size < 1 or n % group_size:
        raise ValueError(f"N = {n} rows is not a multiple of the group size {group_size}")
    m = mask.to(torch.float64)
    zero = torch.zeros((), dtype=torch.float64, device=pi.device)
    adv = torch.where(mask, advantages.to(device=pi.device, dtype=torch.float64), zero)
    w_tok = torch.where(mask, 1.0 - 2.0 * pi.to(torch.float64) + sum_pi_squared.to(torch.float64), zero)
    if not (torch.isfinite(adv).all() and torch.isfinite(w_tok).all()):
        raise ValueError("advantages or token probabilities are not finite on the completion mask")
    stacked = adv.reshape(-1, n, t)  # (R, N, T), R = 1 for one reward
    who = [f"reward {names[r]!r}" if names is not None and r < len(names) else
           (f"the reward at advantages[{r}]" if adv.dim() == 3 else "the reward") for r in range(stacked.shape[0])]
    a_row = adv.sum(-1) / m.sum(-1).clamp(min=1.0)  # (N,) or (R, N): masked mean over tokens
    w_row = w_tok.sum(-1).clamp(min=0.0)  # (N,): W clamped at 0 as verl does
    power = a_row ** 2 * w_row
    sums = power.unflatten(-1, (n // group_size, group_size)).sum(-1)
    bad = ~torch.isfinite(sums.reshape(len(who), -1)).all(-1)
    if bad.any():  # the last line: within the limit no realistic batch overflows
        r = int(bad.nonzero()[0, 0])
        raise ValueError(f"{who[r]}: the signal proxy's per-group sum of A^2 W is not finite (float64 overflow: "
                         f"its advantages reach |A| = {float(stacked[r].abs().max()):.3g}): rescale the reward "
                         "(divide its scores or advantages by a constant)")
    return sums
