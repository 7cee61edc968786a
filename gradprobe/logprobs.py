"""Per-token log-probabilities: ONE function for the loss, the probe and the references.

l_ijt(theta) = log pi_theta(y_ijt | x_i, y_ij<t) at the sampling temperature, shape (N, T),
with position ids derived from the attention mask (left padding gives the same values as
each row alone) and only the last T + 1 logits computed (``logits_to_keep``).
"""

from __future__ import annotations

import torch

#: Floor of the activation budget of :func:`memory_bounded_rows`, bytes (the budget is the larger of
#: it and the model's parameter memory).
ACTIVATION_BUDGET_FLOOR = 256 * 2**20


def activation_bytes_per_row(model, sequence_length: int, completion_length: int) -> int:
    """Estimated bytes one row keeps alive for a backward (or carries through a jvp) of :func:`token_logprobs`.

    body: per position and layer about 12 hidden + 5 MLP-intermediate + 2 x heads x L attention
    values are saved (norms, q/k/v, attention weights, MLP gate/up/activation; the eager attention
    path of the probe); head: the (T + 1, V) logits, their tempered copy, their log-softmax and its
    gradient (4 copies). Measured on SmolLM2-135M (L = 124, T = 64, float32): ~0.25 GB per row, the
    estimate 0.30 GB. Returns 0 when the config lacks the sizes (no bound).

    Parameters
    ----------
    model : transformers causal LM
    sequence_length : int
        L = P + T columns (tokens).
    completion_length : int
        T (tokens).
    """
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    try:
        h, layers, heads, vocab = (int(getattr(cfg, k)) for k in ("hidden_size", "num_hidden_layers",
                                                                   "num_attention_heads", "vocab_size"))
    except (AttributeError, TypeError):
        return 0
    inter = int(getattr(cfg, "intermediate_size", None) or 4 * h)
    size = next(model.parameters()).element_size()
    body = sequence_length * layers * (12 * h + 5 * inter + 2 * heads * sequence_length)
    head = 4 * (completion_length + 1) * vocab
    return size * (body + head)


def memory_bounded_rows(model, batch, micro_batch_size: int, *, budget_bytes: int | None = None) -> int:
    """Rows per micro-batch: ``micro_batch_size``, lowered so one micro-batch's activations fit a budget.

    Rows are independent, so every pass over a batch (log-probabilities, backward sums, the jvp)
    gives the same values for any micro-batch size (up to the order of float additions); this
    only bounds peak memory. Budget: ``budget_bytes``, default the larger of
    :data:`ACTIVATION_BUDGET_FLOOR` and the model's parameter memory, so activations stay within
    about one parameter copy (SmolLM2-135M: 1 row of 124 tokens; the tiny tier: unchanged).

    Parameters
    ----------
    model : transformers causal LM
    batch : gradprobe.types.RolloutBatch
        Its width L = P + T and T set the estimate (:func:`activation_bytes_per_row`).
    micro_batch_size : int
        The configured rows per micro-batch (an upper bound), >= 1.

    Returns
    -------
    int, between 1 and ``micro_batch_size``

    Raises
    ------
    ValueError
        ``micro_batch_size < 1``.
    """
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    per_row = activation_bytes_per_row(model, batch.input_ids.shape[1], batch.completion_mask.shape[1])
    if per_row <= 0:
        return micro_batch_size
    if budget_bytes is None:
        budget_bytes = max(ACTIVATION_BUDGET_FLOOR, sum(p.numel() * p.element_size() for p in model.parameters()))
    return max(1, min(micro_batch_size, int(budget_bytes // per_row)))


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
