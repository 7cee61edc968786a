"""Small argument dataclasses, one per stage; each is saved as JSON beside its results."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass


#: the largest prompt pool a plan's ``[task] pool`` or ``gradprobe rank-prompts --pool`` takes: every prompt of the
#: pool is built before training or ranking starts (:mod:`gradprobe.training.plan_checks`,
#: :mod:`gradprobe.difficulty.rank`)
MAX_POOL = 1_000_000

#: The largest group a probe or a plan takes (``--group``, ``--heldout-group``, a plan's ``[train] group``, and K,
#: ``--continuations``, the group of continuations drawn from each step boundary): 64 times the largest GRPO group
#: of the published recipes (DeepSeekMath's 64; 8-16 is usual), far above any real use, low enough that a mistyped
#: size is refused before its completions are sampled and held in memory.
MAX_GROUP = 4096
#: The largest seed numpy's and torch's generators take from every code path (``torch.manual_seed``: int64): every
#: seed a command, a plan or the Python API accepts lies in [0, MAX_SEED] (:func:`gradprobe.cli.args.seed_int`,
#: :mod:`gradprobe.training.plan_checks`, :class:`gradprobe.probe_settings.BatchSettings`,
#: :mod:`gradprobe.difficulty.rank`)
MAX_SEED = 2**63 - 1
#: the sampler backends (the keys of :data:`gradprobe.rollout.SAMPLERS`, which a test keeps equal)
SAMPLER_BACKENDS = ("hf", "hf_paged", "vllm")
#: policy dtypes every command accepts (``--dtype``; the keys of :data:`gradprobe.models.DTYPES`, which a test
#: keeps equal)
DTYPE_NAMES = ("float32", "float64", "bfloat16", "float16")
#: the study executors (the keys of :data:`gradprobe.study.executors.EXECUTORS`, which a test keeps equal;
#: named here so that the command line can list them without importing the study layer)
EXECUTOR_NAMES = ("local", "ray", "inline")
#: the loss types ``--loss-type`` offers (the keys of :data:`gradprobe.grpo.loss_types.LOSSES`, which
#: tests/test_cli_choices.py keeps equal; named here so that the command line lists them without torch)
LOSS_TYPE_NAMES = ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo")
#: The largest learning rate a plan or a probe accepts: an AdamW step moves each weight by about lr, so above 1
#: one update replaces the policy's weights by noise (and past float32's range the optimizer cannot hold it).
MAX_LR = 1.0
#: The lowest sampling temperature (``sampling.temperature``) a plan or a probe accepts. Logits are divided by the
#: temperature in float32, whose largest value is about 3.4e38: below 1e-30 a logit of magnitude 3.4e8 or more
#: (and below float32's smallest normal, about 1.2e-38, any logit: the temperature itself rounds towards 0)
#: overflows to inf (1e-300 gave non-finite logits at update 0). Temperatures above it but under vLLM's
#: ``_SAMPLING_EPS = 1e-5`` (vllm/sampling_params.py) are sampled greedily by vLLM and near-greedily by the HF
#: sampler; a plan or a study frozen with one stays readable.
MIN_TEMPERATURE = 1e-30
#: The largest ``sampling.top_k``: far above any vocabulary (a top_k at or above the vocabulary keeps every token;
#: 0 means off), and within the 32-bit integer tensors that vLLM holds top_k in (a value past 2**63 - 1 does not
#: even fit torch's int64).
MAX_TOP_K = 2**31 - 1
#: What to do when the vllm backend cannot run here (every vLLM refusal ends with it).
VLLM_FIX = ("install the vllm extra on a GPU machine (`pip install -e \".[vllm]\"` in a checkout, or "
            "`pip install gradprobe[vllm]`; a vllm build matching your torch), or sample with the hf backend "
            "(`gradprobe probe --backend hf`; for train and study, the plan's `[sampling] backend = \"hf\"`; in "
            "Python, gradprobe.rollout.HFSampler)")


def vllm_installed() -> bool:
    """Whether a ``vllm`` package is installed here (``importlib.util.find_spec``: nothing is imported, as vLLM's
    import takes seconds)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def backend_unavailable(backend: str) -> str | None:
    """Why the sampler ``backend`` cannot run here (``vllm`` not installed: :func:`vllm_installed`), else None.
    Torch-free, so that a study refuses before its plan is frozen."""
    if backend == "vllm" and not vllm_installed():
        return f"the vllm backend needs vLLM, which is not installed here; {VLLM_FIX}"
    return None


@dataclass(frozen=True)
class Reference:
    """One kind of reference update v of the probe (``--reference``; DESIGN.md, "The probe").

    Attributes
    ----------
    name : str
        The registry key and ``probe.json["reference"]["kind"]``.
    spelling : str
        How ``--reference`` spells it (``heldout``, ``direction:PATH``).
    takes_path : bool
        The spelling carries a file after ``NAME:`` (a ``.safetensors`` parameter-space vector, loaded
        before any generation); otherwise v is computed: the RLOO policy gradient of accuracy on
        ``heldout_prompts`` x ``heldout_group`` held-out rollouts (its own ledger).
    """

    name: str
    spelling: str
    takes_path: bool

    def matches(self, spec: str) -> bool:
        """Whether ``spec`` (a ``--reference`` value) is this kind: ``NAME:PATH`` or ``NAME``."""
        return spec.startswith(self.name + ":") if self.takes_path else spec == self.name

    def path(self, spec: str) -> str | None:
        """The file of ``spec`` (``direction:PATH`` -> ``PATH``), None for a computed reference."""
        return spec.split(":", 1)[1] if self.takes_path else None


@dataclass(frozen=True)
class Preconditioner:
    """One preconditioner P of the probe's direction u = P v (``--precondition``).

    Attributes
    ----------
    name : str
        The registry key.
    second_moment : bool
        True (``adam``): P = diag(1 / (sqrt(s) + eps)), s the mean squared minibatch GRPO gradient of
        the probe batch (K = ``second_moment_minibatches`` backwards), one s, P and alignment pass per
        token-weight family of the loss types, as each loss-type arm's Adam has its own second moment;
        a constant factor on the gradient (cispo's cap) divides out of the step. False (``none``): an
        SGD step, u = v, one alignment pass shared by every loss type.
    help : str
        The ``--precondition`` help text of this choice.
    """

    name: str
    second_moment: bool
    help: str


#: ``--reference`` kinds, name -> :class:`Reference`
REFERENCE_KINDS: dict[str, Reference] = {r.name: r for r in (
    Reference("heldout", "heldout", takes_path=False),
    Reference("direction", "direction:PATH", takes_path=True),
)}
#: ``--precondition`` choices, name -> :class:`Preconditioner`
PRECONDITIONER_KINDS: dict[str, Preconditioner] = {p.name: p for p in (
    Preconditioner("adam", second_moment=True, help="predict an Adam step (u = P v)"),
    Preconditioner("none", second_moment=False, help="predict an SGD step (u = v)"),
)}
#: the probe's reference updates (``--reference``) and preconditioners (``--precondition``), from the registries
REFERENCES = tuple(r.spelling for r in REFERENCE_KINDS.values())
PRECONDITIONERS = tuple(PRECONDITIONER_KINDS)


def reference_kind(spec: str) -> Reference:
    """The :class:`Reference` of a ``--reference`` value.

    Raises
    ------
    ValueError
        ``spec`` is no registered kind (the message lists :data:`REFERENCES`).
    """
    for kind in REFERENCE_KINDS.values():
        if isinstance(spec, str) and kind.matches(spec):
            return kind
    raise ValueError(f"reference {spec!r} must be one of {REFERENCES}")


def preconditioner(name: str) -> Preconditioner:
    """The :class:`Preconditioner` named ``name``.

    Raises
    ------
    ValueError
        An unknown name (the message lists :data:`PRECONDITIONERS`).
    """
    if name not in PRECONDITIONER_KINDS:
        raise ValueError(f"precondition {name!r} must be one of {PRECONDITIONERS}")
    return PRECONDITIONER_KINDS[name]


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling settings shared by rollouts, MC continuations and the reference gradient.

    Attributes
    ----------
    temperature : float
        Softmax temperature; log-probabilities are computed at this temperature too. At least
        :data:`MIN_TEMPERATURE` (1e-30).
    top_p : float
        Nucleus mass (1.0 = off). Values < 1 make the sampler differ from the policy whose
        log-probabilities are differentiated; the probe warns.
    top_k : int
        0 = off; at most :data:`MAX_TOP_K`.
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

    Raises
    ------
    TypeError
        A field of the wrong type (``sampling.max_new_tokens must be an integer, got '64' (str)``; a whole float
        such as 64.0 is taken as the integer 64).
    ValueError
        A value out of range (named with its bound) or an unknown backend.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 128
    batch_size: int = 64
    backend: str = "hf"

    def __post_init__(self):
        self._check_types()
        if not 0 < self.temperature < math.inf:
            raise ValueError(f"sampling.temperature must be a finite number > 0, got {self.temperature}")
        if self.temperature < MIN_TEMPERATURE:
            raise ValueError(f"sampling.temperature = {self.temperature!r} is below the minimum {MIN_TEMPERATURE:g}: "
                             "logits are divided by the temperature in float32, which overflows to inf (non-finite "
                             f"logits at the first rollout); set temperature >= {MIN_TEMPERATURE:g} (1.0 is the "
                             "default; vLLM samples greedily below 1e-5)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"sampling.top_p must be in (0, 1], got {self.top_p}")
        if isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"sampling.top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        if self.top_k > MAX_TOP_K:
            raise ValueError(f"sampling.top_k = {self.top_k!r} is above {MAX_TOP_K:,} (2**31 - 1): no vocabulary is "
                             "that large and samplers hold top_k in 32-bit integers; set top_k = 0 to keep every token "
                             "(off), or a number of tokens below the vocabulary's size")
        if self.max_new_tokens < 1:
            raise ValueError(f"sampling.max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.batch_size < 1:
            raise ValueError(f"sampling.batch_size must be >= 1 (sequences per generate call), got {self.batch_size}")
        if self.backend not in SAMPLER_BACKENDS:
            raise ValueError(f"sampling.backend {self.backend!r} is not one of {', '.join(SAMPLER_BACKENDS)}")

    def _check_types(self) -> None:
        """Refuse a field of the wrong type before the range checks compare it (TypeError naming the field); a
        whole float in an integer field becomes that integer. (A bool top_k is refused by the range check.)"""
        for name in ("temperature", "top_p", "top_k", "max_new_tokens", "batch_size"):
            value, integer = getattr(self, name), name in ("top_k", "max_new_tokens", "batch_size")
            if isinstance(value, bool) and name == "top_k":
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or (
                    integer and not isinstance(value, numbers.Integral) and not float(value).is_integer()):
                want = "an integer" if integer else "a number"
                raise TypeError(f"sampling.{name} must be {want}, got {value!r} ({type(value).__name__})")
            if integer and not isinstance(value, numbers.Integral):
                object.__setattr__(self, name, int(value))
        if not isinstance(self.backend, str):
            raise TypeError(f"sampling.backend must be a string (one of {', '.join(SAMPLER_BACKENDS)}), got "
                            f"{self.backend!r} ({type(self.backend).__name__})")


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
