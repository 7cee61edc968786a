"""Per-update policy statistics from the loss's own forward pass: entropy and k3 KL to pi_init.

:func:`policy_stat_sums` sums both over a micro-batch's completion tokens, :func:`kl_clamped_tokens`
counts the tokens whose KL log-ratio hit verl's clamp, and :class:`EntropyCapture` reads the
full-vocabulary entropy from the logits of the loss's forward (a forward hook), so
:func:`gradprobe.grpo.step.loss_and_backward` needs no second forward of the policy. Definitions
of the logged ``kl_init`` and ``entropy``: :mod:`gradprobe.training.metrics`.
"""

from __future__ import annotations

import time

import torch

from .losses import KL_LOG_RATIO_CLAMP

__all__ = ["policy_stat_sums", "kl_clamped_tokens", "EntropyCapture"]


def policy_stat_sums(logp: torch.Tensor, init_logp: torch.Tensor, entropy: torch.Tensor,
                     mask: torch.Tensor) -> tuple[float, float]:
    """Sums over completion tokens of the k3 KL to the initial policy and of the entropy.

    k3_t = exp(d_t) - d_t - 1 with d_t = l_init_t - l_theta_t, an unbiased, non-negative
    per-token estimator of KL(pi_theta || pi_init) for tokens sampled from pi_theta (Schulman
    2020, "Approximating KL divergence"). Divide both sums by the number of completion tokens
    for the per-token means logged as ``kl_init`` and ``entropy``
    (:mod:`gradprobe.training.metrics`). d is clamped to [-20, 20] nats as verl clamps its
    ``low_var_kl`` log-ratio (``KL_LOG_RATIO_CLAMP``, :func:`~gradprobe.grpo.losses.k3_kl_penalty`),
    so a token that pi_theta or pi_init gives probability ~0 cannot make the sum inf; verl's
    value clamp (10 nats) is not applied to this statistic, which would hide real drift (a token
    raised from p = 1e-5 to 0.9 has k3 ~ 10.5). :func:`kl_clamped_tokens` counts the clamped tokens.

    Parameters
    ----------
    logp, init_logp : Tensor, shape (n, T)
        l_theta and l_init of the sampled tokens (nats), at the sampling temperature.
    entropy : Tensor, shape (n, T)
        Full-vocabulary entropy of pi_theta(. | prefix) per position (nats).
    mask : BoolTensor, shape (n, T)
        Completion mask.

    Returns
    -------
    (float, float)
        (sum of k3 over masked tokens, sum of entropy over masked tokens), computed in float64.
    """
    m = mask.to(torch.float64)
    d = (init_logp.detach() - logp.detach()).to(torch.float64).clamp(min=-KL_LOG_RATIO_CLAMP, max=KL_LOG_RATIO_CLAMP)
    kl = torch.where(mask.bool(), torch.expm1(d) - d, torch.zeros_like(d))  # padding may hold any finite value
    ent = torch.where(mask.bool(), entropy.detach().to(torch.float64), torch.zeros_like(d))
    return float((kl * m).sum()), float((ent * m).sum())


def kl_clamped_tokens(logp: torch.Tensor, init_logp: torch.Tensor, mask: torch.Tensor) -> int:
    """Completion tokens whose log-ratio |l_init - l_theta| exceeds ``KL_LOG_RATIO_CLAMP`` (20 nats).

    The tokens :func:`policy_stat_sums` clamps (verl's ``low_var_kl`` log-ratio clamp); a NaN
    log-ratio is not counted (it is a different failure, caught as a non-finite statistic).

    Parameters
    ----------
    logp, init_logp : Tensor, shape (n, T)
        l_theta and l_init of the sampled tokens (nats).
    mask : BoolTensor, shape (n, T)
        Completion mask.

    Returns
    -------
    int
    """
    d = (init_logp.detach() - logp.detach()).to(torch.float64)
    return int(((d.abs() > KL_LOG_RATIO_CLAMP) & mask.bool()).sum())


class EntropyCapture:
    """Forward hook on a causal LM: per-position full-vocabulary entropy from its output logits.

    Used inside :func:`token_logprobs`'s own forward (``logits_to_keep = T + 1``), so the entropy
    of pi_theta(. | prefix) at each completion position comes from the loss's logits, detached:
    H_t = -sum_v p_v log p_v, p = softmax(logits_t / temperature); half-precision logits are
    upcast to float32 first. ``rows`` collects one (n, T) tensor per forward; ``seconds`` the
    wall time spent in the hook.
    """

    def __init__(self, model, temperature: float):
        self.model, self.temperature = model, float(temperature)
        self.rows: list[torch.Tensor] = []
        self.seconds = 0.0
        self._handle = None

    def _hook(self, module, args, output):
        t0 = time.perf_counter()
        with torch.no_grad():
            logits = output.logits[:, :-1].detach()
            if logits.dtype in (torch.float16, torch.bfloat16):
                logits = logits.float()
            logp_all = torch.log_softmax(logits / self.temperature, dim=-1)
            self.rows.append(-(logp_all.exp() * logp_all).sum(-1))
        self.seconds += time.perf_counter() - t0

    def __enter__(self):
        self._handle = self.model.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc):
        self._handle.remove()
        return False
