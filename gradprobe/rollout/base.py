"""The sampler role: prompts (token ids) in, completions (token ids) out.

Everything that samples from the policy (rollouts, Monte-Carlo continuations of the dense
rewards, evaluation) asks a :class:`Sampler`, never ``model.generate`` directly, so the
Hugging Face backend (:mod:`gradprobe.rollout.hf`) and a vLLM backend serve the same code.

Contract of a sampler (DESIGN.md, "Pitfalls", masks):

* ``sample(prompts, num_samples=K, ...)`` returns ``len(prompts) * K`` samples in prompt-major
  order (sample ``i * K + k`` continues prompt ``i``);
* a sample's ``token_ids`` are cut after the FIRST id in the policy's EOS ids, the EOS kept
  (so a pad id equal to EOS, as in SmolLM2, never hides the end of a completion);
* ``truncated`` is True iff no EOS came within ``max_new_tokens``; then
  ``len(token_ids) == max_new_tokens``;
* ``max_new_tokens`` may be one int per prompt (per-request budgets, as vLLM's per-request
  ``SamplingParams``): the Monte-Carlo continuations of the dense rewards send every prefix
  with its own remaining budget in ONE call. A backend must honour each prompt's budget
  exactly (e.g. generate to the micro-batch's largest and cut each row at its own).
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from ..config import SamplingConfig


class PromptTooLongError(ValueError):
    """A prompt plus ``max_new_tokens`` does not fit in the model's context window."""


#: How the samplers name the limit of :func:`context_limit` (a model's own context).
MODEL_CONTEXT = "the model's max_position_embeddings"


def context_limit(config) -> int | None:
    """The context limit (tokens) of a transformers model config: its ``max_position_embeddings``, or its text
    config's (a multimodal config); None when it names none (no check is made then). The limit every sampler's
    length check (:func:`check_prompt_ids`) and a run's setup check of its prompts
    (:mod:`gradprobe.rollout.prompt_lengths`) compare with."""
    n = getattr(config, "max_position_embeddings", None)
    if n is None and hasattr(config, "get_text_config"):
        n = getattr(config.get_text_config(), "max_position_embeddings", None)
    return int(n) if n is not None else None


def exceeds_context(length: int, budget: int, limit: int | None) -> bool:
    """The length rule: a prompt of ``length`` tokens with a budget of ``budget`` new tokens does not fit a context of
    ``limit`` tokens (``length + budget > limit``). A budget of 0 generates nothing and always fits; no known
    limit (None): everything fits."""
    return limit is not None and budget > 0 and length + budget > limit


def check_prompt_ids(prompts: Sequence[Sequence[int]], budgets: Sequence[int], limit: int | None,
                     what: str = MODEL_CONTEXT) -> None:
    """A sampler call's check of its prompts (every backend's ``check_prompts``): each must be non-empty and fit
    with its budget (:func:`exceeds_context`).

    Parameters
    ----------
    prompts : sequence of sequences of int, length M
        Unpadded prompt ids.
    budgets : sequence of int, length M
        Each prompt's ``max_new_tokens``.
    limit : int or None
        The context limit (tokens); None: no length check.
    what : str
        The limit's name in the message.

    Raises
    ------
    PromptTooLongError
        The first prompt that does not fit (:func:`prompt_too_long`: its index, length, the limit and the fix).
    ValueError
        An empty prompt.
    """
    for i, (p, b) in enumerate(zip(prompts, budgets)):
        if len(p) == 0:
            raise ValueError(f"prompt {i} is empty: generation needs at least one prompt token (e.g. BOS)")
        if exceeds_context(len(p), b, limit):
            raise prompt_too_long(i, len(prompts), len(p), b, limit, what)


def prompt_too_long(index: int, n_prompts: int, length: int, budget: int, limit: int,
                    what: str = MODEL_CONTEXT, *, name: str | None = None, note: str = "",
                    longest: int | None = None, longest_name: str = "") -> PromptTooLongError:
    """The error for prompt ``index`` (of a call's ``n_prompts``) of ``length`` tokens that, with ``budget``
    new tokens, passes the context ``limit`` (``what`` names it), with the fix: a lower ``max_new_tokens``, or,
    when the prompt alone fills the context, a shorter prompt or one left out of the pool. ``name`` names the
    prompt instead of its index in the call (a data file's line: a run's setup check); ``note`` is appended.

    ``longest`` (tokens), with ``longest_name`` (e.g. ``"the longest prompt of the training pool"``): the longest
    prompt of the set the named one was checked with (:func:`~gradprobe.rollout.prompt_lengths.check_prompt_lengths`).
    The bound given is then the one that makes every prompt of the set fit, limit - longest, and the message says it is
    the longest prompt's where that is longer than the named one (a bound from the named prompt alone was refused
    again at the next longer one); where the longest prompt alone fills the context, no max_new_tokens fits the set
    and the message says so. Without it (a sampler's per-call check), the bound is the named prompt's own."""
    top = length if longest is None else max(length, longest)
    if length >= limit:
        fix = "The prompt alone leaves no room for a completion: shorten it or leave it out of the prompt pool."
    elif top == length:
        fix = f"Lower max_new_tokens to at most {limit - length} or shorten the prompt."
    elif top < limit:
        fix = (f"Lower max_new_tokens to at most {limit - top}, the bound for {longest_name} ({top} tokens), or "
               "shorten the prompts.")
    else:
        fix = (f"No max_new_tokens fits every prompt: {longest_name} has {top} tokens, which alone leave no room "
               "for a completion: shorten it or leave it out of the prompt pool.")
    name = name or f"prompt {index} (of this call's {n_prompts})"
    return PromptTooLongError(f"{name} has {length} tokens; with max_new_tokens={budget} that is "
                              f"{length + budget} > {what}={limit}. {fix}{note}")


class NonFiniteSamplingError(RuntimeError):
    """Sampling met non-finite (NaN/inf) or negative next-token probabilities: the policy's logits are not
    finite, so its weights have diverged (typically a learning rate far too large). A RuntimeError, as the
    error of ``torch.multinomial`` it replaces."""


#: How torch (``torch.multinomial``) words a sampling distribution with NaN, inf or negative entries.
_NON_FINITE_PROBS = "probability tensor contains either `inf`, `nan` or element < 0"


@contextlib.contextmanager
def non_finite_sampling(backend: str, model=None):
    """Raise :class:`NonFiniteSamplingError` instead of a RuntimeError in the block that is torch's refusal to
    sample from a distribution with NaN/inf/negative entries (directly, or quoted by a backend's own error);
    any other error passes unchanged. ``backend`` names the sampler (``"hf"``, ``"hf_paged"``) in the message.

    With ``model`` (a transformers causal LM), its output embeddings (the LM head) are checked on every forward
    in the block (:func:`_check_finite_logits`): logits holding NaN or +inf, or a row with no finite entry, stop
    the block with that same error before any token is chosen. Without the check greedy decoding (argmax)
    takes a NaN row's first index and returns garbage silently (a diverged policy's eval would read as accuracy
    0), and on CUDA ``torch.multinomial`` stops with a device-side assert instead of torch's CPU error. Costs
    one max over the vocabulary of the (batch, positions, vocab) logits and one host sync per forward."""
    hook = None
    head = model.get_output_embeddings() if model is not None else None
    if head is not None:
        hook = head.register_forward_hook(_check_finite_logits)
    try:
        yield
    except RuntimeError as e:
        if isinstance(e, NonFiniteSamplingError) or _NON_FINITE_PROBS not in str(e):
            raise
        raise NonFiniteSamplingError(
            f"sampling with the {backend} backend failed: the policy's next-token probabilities are not finite "
            f"(NaN/inf logits), so its weights have diverged; lower the learning rate that produced them") from e
    finally:
        if hook is not None:
            hook.remove()


def _check_finite_logits(module, inputs, logits) -> None:
    """Forward hook on the LM head: raise torch's wording (:data:`_NON_FINITE_PROBS`, which
    :func:`non_finite_sampling` turns into :class:`NonFiniteSamplingError`, also when a backend quotes it from
    its own thread) when ``logits`` (batch, positions, vocab) hold NaN or +inf, or a row with every entry
    -inf."""
    import torch

    if not torch.is_tensor(logits) or not logits.is_floating_point():
        return
    if not bool(torch.isfinite(logits.amax(dim=-1)).all()):  # a row's max: NaN/+inf if it holds one, -inf if all are
        raise RuntimeError(f"{_NON_FINITE_PROBS}: the policy's logits hold NaN/inf (gradprobe's check of the "
                           "LM head's output, before a token is chosen)")


@dataclass
class Sample:
    """One completion.

    Attributes
    ----------
    token_ids : list[int]
        Generated ids, cut after the first EOS (the EOS kept). Length 0 only when the call's
        ``max_new_tokens`` was 0.
    truncated : bool
        True iff no EOS within ``max_new_tokens``.
    """

    token_ids: list[int]
    truncated: bool

    def __len__(self) -> int:
        return len(self.token_ids)


@runtime_checkable
class Sampler(Protocol):
    """A role served by :class:`gradprobe.rollout.hf.HFSampler` (and a vLLM sampler)."""

    def sample(self, prompts: list[list[int]], *, num_samples: int, sampling: SamplingConfig,
               max_new_tokens: int | Sequence[int] | None = None, desc: str | None = None,
               greedy: bool = False) -> list[Sample]:
        """Draw ``num_samples`` completions of every prompt.

        Parameters
        ----------
        prompts : list[list[int]], length M
            Unpadded prompt token ids (chat template applied by the caller).
        num_samples : int
            K, completions per prompt.
        sampling : SamplingConfig
            Temperature, top_p, top_k, ``max_new_tokens``, micro-batch size.
        max_new_tokens : int or sequence of int (length M), optional
            Overrides ``sampling.max_new_tokens`` for this call; a sequence gives each prompt
            its own budget. A budget of 0 yields an empty, truncated sample.
        desc : str, optional
            Progress-bar label.
        greedy : bool
            Argmax decoding for evaluation (``SamplingConfig`` forbids temperature 0); only
            evaluation passes it, so test doubles may omit it.

        Returns
        -------
        list[Sample], length M * K, prompt-major.
        """
        ...


def per_prompt_budgets(max_new_tokens, num_prompts: int, default: int) -> list[int]:
    """Normalise a sampler's ``max_new_tokens`` argument to one budget per prompt.

    Parameters
    ----------
    max_new_tokens : None, int, or sequence of int (length ``num_prompts``)
        None means ``default`` (``sampling.max_new_tokens``).

    Returns
    -------
    list[int], length ``num_prompts``

    Raises
    ------
    ValueError
        A negative budget or a sequence of the wrong length.
    """
    if max_new_tokens is None:
        budgets = [int(default)] * num_prompts
    elif isinstance(max_new_tokens, int):
        budgets = [int(max_new_tokens)] * num_prompts
    else:
        budgets = [int(b) for b in max_new_tokens]
        if len(budgets) != num_prompts:
            raise ValueError(f"max_new_tokens has {len(budgets)} budgets for {num_prompts} prompts")
    if any(b < 0 for b in budgets):
        raise ValueError(f"max_new_tokens must be >= 0, got {min(budgets)}")
    return budgets


def cut_at_eos(token_ids: Sequence[int], eos_token_ids: Sequence[int], max_new_tokens: int) -> Sample:
    """Cut generated ids after the first EOS and flag truncation.

    Parameters
    ----------
    token_ids : sequence of int
        Raw generated ids (possibly followed by padding after an EOS).
    eos_token_ids : sequence of int
        Any of them ends a completion.
    max_new_tokens : int
        The call's length limit; ids beyond it are dropped.

    Returns
    -------
    Sample
        ``token_ids`` up to and including the first EOS; ``truncated`` iff there is no EOS
        within the first ``max_new_tokens`` ids.
    """
    eos = set(int(e) for e in eos_token_ids)
    ids = [int(t) for t in token_ids[:max_new_tokens]]
    for k, t in enumerate(ids):
        if t in eos:
            return Sample(token_ids=ids[: k + 1], truncated=False)
    return Sample(token_ids=ids, truncated=True)
