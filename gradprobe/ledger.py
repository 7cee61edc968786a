"""The compute ledger (DESIGN.md, "The compute ledger").

Every generated token is counted once, under one category:

``rollout``       policy samples used for training;
``continuation``  Monte-Carlo continuations of process rewards;
``selection``     tokens a prompt-selection rule generated or read;
``eval``          held-out evaluation (logged, never charged to the training budget).

Also trained tokens, FLOPs and device-seconds by kind of work. A training budget is charged
every kind of work that training needs (:data:`CHARGED_WORK`): generation, the update, a
prompt-selection rule's own work, and the reward's own compute (a verifier's seconds, a
process reward model's forward FLOPs); eval, the probe and I/O are logged, never charged. FLOPs follow Kaplan et al. 2020 (Table 1): forward = 2 N + 2 n_layer
n_ctx d_model per token with N the non-embedding parameters, here plus the unembedding
matmul 2 d_model V which dominates small models; a trained token costs 3x its forward
(forward + backward).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

CATEGORIES = ("rollout", "continuation", "selection", "eval")
CHARGED = ("rollout", "continuation", "selection")
#: kinds of ``flops`` / ``device_seconds`` charged to a training budget (eval, probe, reference, metrics: not)
CHARGED_WORK = ("generation", "training", "selection", "reward")
TRAIN_FORWARDS = 3.0  # forward + backward of a trained token, in forwards (Kaplan et al. 2020: 6N vs 2N)
JVP_FORWARDS = 3.0  # forward-mode pass: for every matmul y = W x it computes W x, dW x and W dx


def non_embedding_parameters(model) -> int:
    """N of Kaplan et al. 2020 (Table 1): the parameters of ``model`` (a ``torch.nn.Module`` with
    ``get_input_embeddings()``) excluding the input (and position) embeddings, each shared (tied)
    tensor counted once. Here, next to its only users, the FLOPs formulas below."""
    emb = model.get_input_embeddings()
    skip = {id(p) for p in emb.parameters()}
    seen, n = set(), 0
    for p in model.parameters():
        if id(p) in skip or id(p) in seen:
            continue
        seen.add(id(p))
        n += p.numel()
    return n


def forward_flops_per_token(model, context_length: float) -> float:
    """Forward FLOPs of one token at a mean context of ``context_length`` tokens.

    2 N + 2 d V + 2 n_layer n_ctx d (Kaplan et al. 2020, Table 1, with the unembedding added).
    """
    cfg = model.config
    d = cfg.hidden_size
    n = non_embedding_parameters(model)
    tied = getattr(cfg, "tie_word_embeddings", False)
    unembed = 2 * d * cfg.vocab_size if tied else 0  # untied lm_head is already inside N
    return 2.0 * n + unembed + 2.0 * cfg.num_hidden_layers * context_length * d


def batch_flops_per_token(model, batch) -> float:
    """:func:`forward_flops_per_token` at a rollout batch's mean context (FLOPs per token).

    The mean context of a generated token is the mean prompt length plus half the mean
    completion length (tokens), as in :func:`gradprobe.training.metrics.mean_context`.

    Parameters
    ----------
    model : transformers causal LM
    batch : gradprobe.types.RolloutBatch
        ``prompt_token_ids`` (B lists) and ``completion_mask`` (N, T).
    """
    prompts = [len(p) for p in batch.prompt_token_ids]
    prompt = sum(prompts) / len(prompts) if prompts else 0.0
    completion = float(batch.completion_mask.sum(-1).double().mean()) if batch.num_rows else 0.0
    return forward_flops_per_token(model, prompt + completion / 2)


@dataclass
class Ledger:
    """Compute spent by a probe batch or a training run.

    Attributes
    ----------
    generated_tokens : dict[str, int]
        Generated tokens (padding excluded) by category, keys :data:`CATEGORIES`.
    trained_tokens : int
        Completion tokens that went through a training forward + backward.
    flops : dict[str, float]
        ``generation`` (forward FLOPs of generated tokens), ``training`` (6N-style
        forward + backward), ``selection`` (a selection rule's own passes), ``reward`` (a process
        reward model's forwards), ``probe`` (forward-mode passes), ``eval``.
    device_seconds : dict[str, float]
        Wall seconds by kind of work: ``generation``, ``training``, ``selection``, ``reward`` (the
        reward's own compute: verifiers, a PRM; MC continuations are ``generation``), ``probe``,
        ``reference``, ``metrics``, ``eval``.
    """

    generated_tokens: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CATEGORIES})
    trained_tokens: int = 0
    flops: dict[str, float] = field(default_factory=dict)
    device_seconds: dict[str, float] = field(default_factory=dict)

    def add_generated(self, category: str, tokens: int) -> None:
        """Charge ``tokens`` generated tokens to ``category``.

        Raises
        ------
        ValueError
            Unknown category or negative count.
        """
        if category not in CATEGORIES:
            raise ValueError(f"ledger category {category!r} is not one of {CATEGORIES}")
        if tokens < 0:
            raise ValueError(f"ledger: negative token count {tokens} for {category!r}")
        self.generated_tokens[category] += int(tokens)

    def add_flops(self, kind: str, flops: float) -> None:
        self.flops[kind] = self.flops.get(kind, 0.0) + float(flops)

    def add_seconds(self, kind: str, seconds: float) -> None:
        self.device_seconds[kind] = self.device_seconds.get(kind, 0.0) + float(seconds)

    @contextlib.contextmanager
    def timed(self, kind: str):
        """Context manager adding the wall time of its body to ``device_seconds[kind]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add_seconds(kind, time.perf_counter() - start)

    @property
    def charged_tokens(self) -> int:
        """Generated tokens charged to a training budget (every category but ``eval``)."""
        return sum(self.generated_tokens[c] for c in CHARGED)

    @property
    def total_generated(self) -> int:
        return sum(self.generated_tokens.values())

    @property
    def charged_seconds(self) -> float:
        """Device-seconds charged to a training budget: the kinds of :data:`CHARGED_WORK`."""
        return sum(self.device_seconds.get(k, 0.0) for k in CHARGED_WORK)

    @property
    def charged_flops(self) -> float:
        """FLOPs charged to a training budget: the kinds of :data:`CHARGED_WORK`."""
        return sum(self.flops.get(k, 0.0) for k in CHARGED_WORK)

    @property
    def training_seconds(self) -> float:
        """Device-seconds of training work: generation + update (eval, probe and I/O excluded)."""
        return self.device_seconds.get("generation", 0.0) + self.device_seconds.get("training", 0.0)

    def share(self, category: str) -> float:
        """Fraction of charged generated tokens in ``category`` (0 when nothing was generated)."""
        total = self.charged_tokens
        return self.generated_tokens[category] / total if total else 0.0

    def merge(self, other: "Ledger") -> "Ledger":
        """A new ledger holding the sums of both."""
        out = Ledger()
        for c in CATEGORIES:
            out.generated_tokens[c] = self.generated_tokens[c] + other.generated_tokens[c]
        out.trained_tokens = self.trained_tokens + other.trained_tokens
        for src in (self, other):
            for k, v in src.flops.items():
                out.add_flops(k, v)
            for k, v in src.device_seconds.items():
                out.add_seconds(k, v)
        return out

    def to_dict(self) -> dict:
        return {
            "generated_tokens": dict(self.generated_tokens),
            "charged_generated_tokens": self.charged_tokens,
            "trained_tokens": self.trained_tokens,
            "flops": dict(self.flops),
            "device_seconds": dict(self.device_seconds),
            "training_device_seconds": self.training_seconds,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Ledger":
        out = cls()
        for c, v in d.get("generated_tokens", {}).items():
            out.add_generated(c, v)
        out.trained_tokens = int(d.get("trained_tokens", 0))
        out.flops = {k: float(v) for k, v in d.get("flops", {}).items()}
        out.device_seconds = {k: float(v) for k, v in d.get("device_seconds", {}).items()}
        return out
