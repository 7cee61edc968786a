"""Small argument dataclasses, one per stage; each is saved as JSON beside its results."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


#: the sampler backends (the keys of :data:`gradprobe.rollout.SAMPLERS`, which a test keeps equal)
SAMPLER_BACKENDS = ("hf", "hf_paged", "vllm")
#: policy dtypes every command accepts (``--dtype``; the keys of :data:`gradprobe.models.DTYPES`, which a test
#: keeps equal)
DTYPE_NAMES = ("float32", "float64", "bfloat16", "float16")
#: the study executors (the keys of :data:`gradprobe.study.executors.EXECUTORS`, which a test keeps equal;
#: named here so that the command line can list them without importing the study layer)
EXECUTOR_NAMES = ("local", "ray", "inline")
#: the probe's reference updates (``--reference``) and preconditioners (``--precondition``)
REFERENCES = ("heldout", "direction:PATH")
PRECONDITIONERS = ("adam", "none")


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling settings shared by rollouts, MC continuations and the reference gradient.

    Attributes
    ----------
    temperature : float
        Softmax temperature; log-probabilities are computed at this temperature too.
    top_p : float
        Nucleus mass (1.0 = off). Values < 1 make the sampler differ from the policy whose
        log-probabilities are differentiated; the probe warns.
    top_k : int
        0 = off.
    max_new_tokens : int
        Completion length limit in tokens; a completion that reaches it without EOS is truncated.
    batch_size : int
        Sequences per ``generate`` call (memory knob, does not change results for a fixed seed
        only up to the sampler's batching).
    backend : {"hf", "hf_paged", "vllm"}
        The rollout backend (:data:`gradprobe.rollout.SAMPLERS`): ``hf`` batched ``generate``,
        ``hf_paged`` transformers' continuous batching with a paged KV cache, ``vllm`` the optional
        vLLM engine (GPU; its weights are pushed after every update). Held-out evals always sample
        with ``hf``, so evals of arms on different backends stay comparable.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 128
    batch_size: int = 64
    backend: str = "hf"

    def __post_init__(self):
        if not self.temperature > 0:
            raise ValueError(f"sampling.temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"sampling.top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"sampling.max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.backend not in SAMPLER_BACKENDS:
            raise ValueError(f"sampling.backend {self.backend!r} is not one of {', '.join(SAMPLER_BACKENDS)}")


@dataclass(frozen=True)
class MCConfig:
    """Monte-Carlo step values (DESIGN.md, "Rewards and per-token advantages").

    Attributes
    ----------
    continuations : int
        K, continuations drawn from every internal step boundary.
    max_steps : int
        Completions with more newline-terminated lines than this have adjacent lines merged
        into ``max_steps`` steps of near-equal line counts.
    """

    continuations: int = 4
    max_steps: int = 8


def to_dict(obj) -> dict:
    """``dataclasses.asdict`` for the config dataclasses (JSON-serialisable)."""
    return asdict(obj)
