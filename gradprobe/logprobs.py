"""Per-token log-probabilities: ONE function for the loss, the probe and the references.

l_ijt(theta) = log pi_theta(y_ijt | x_i, y_ij<t) at the sampling temperature, shape (N, T),
with position ids derived from the attention mask (left padding gives the same values as
each row alone) and only the last T + 1 logits computed (``logits_to_keep``).
"""

from __future__ import annotations

import torch


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids, shape (N, L): 0 at each row's first real token, counting real tokens only."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_length: int, *,
                   temperature: float = 1.0, params: dict | None = None) -> torch.Tensor:
    """Log-probabilities of the completion tokens.

    Parameters
    ----------
    model : transformers causal LM
    input_ids, attention_mask : LongTensor, shape (N, P + T)
        As in :class:`gradprobe.types.RolloutBatch`.
    prompt_length : int
        P; the completion is ``input_ids[:, P:]``.
    temperature : float
        Logits are divided by it before the softmax (the sampler's distribution).
    params : dict[str, Tensor] or None
        If given, the model is evaluated functionally at these parameters
        (``torch.func.functional_call``), which is how ``torch.func.jvp`` differentiates it.

    Returns
    -------
    Tensor, shape (N, T), the model's dtype
        Values at padding positions are finite but meaningless: multiply by the completion mask.
    """
    completion = input_ids[:, prompt_length:]
    t = completion.shape[1]
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask,
                  position_ids=position_ids_from_mask(attention_mask), use_cache=False, logits_to_keep=t + 1)
    if params is None:
        out = model(**kwargs)
    else:
        out = torch.func.functional_call(model, params, (), kwargs)
    logits = out.logits[:, :-1]  # (N, T, V): the logit at position p predicts token p + 1
    if temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, completion.unsqueeze(-1)).squeeze(-1)
