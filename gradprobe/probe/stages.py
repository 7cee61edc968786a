"""The probe's first stages (DESIGN.md, "The probe"): the batch, its rewards and the cost yardstick.

:func:`gradprobe.probe.run.run_probe` calls them in this order, each one timed into a :class:`StageTimes`:

1. :func:`sample_batch`: B training prompts x G completions (``rollout`` tokens);
2. :func:`reward_advantages`: each reward's per-token advantages A^R, shape (N, T), N = B * G; MC rewards
   draw their continuations once for all of them (``continuation`` tokens); the batch then moves to the
   model's device as a :class:`DeviceBatch`;
3. :func:`guided_stage` (guided probes only): the guided update's importance weights W (N, T);
4. :func:`update_yardstick`: one GRPO update's forward + backward on the same batch, the unit the
   alignment pass's cost is reported in.

The reference direction and the alignment passes follow in :mod:`gradprobe.probe.direction`.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

from ..grpo.step import UpdateConfig, loss_and_backward
from ..ledger import Ledger
from ..logprobs import memory_bounded_rows
from ..memory import release_memory
from ..rewards import RewardContext, get_reward
from ..rewards.base import REWARDS, RewardFunctionError, user_function, checked_output
from ..rewards.sequence import call_reward
from ..rollout import collect_rollouts, make_sampler
from ..streams import stream_sampler
from ..types import RolloutBatch
from .config import ProbeConfig
from .guided import check_guided_prompts, importance_weights, sample_guided_batch

__all__ = ["StageTimes", "Samplers", "DeviceBatch", "progress_printer", "probe_samplers", "sample_batch",
           "reward_outputs", "is_builtin_reward", "reward_advantages", "guided_stage", "update_yardstick",
           "caller_reward", "native_signature_problem"]


@dataclass
class StageTimes:
    """Seconds of the probe's stages, read into ``probe.json["costs"]`` (wall clock; ``*_cpu``: this
    process's CPU clock, all its threads, which other processes on shared cores do not inflate).

    Attributes
    ----------
    rollout, continuation : float
        Generation of the probe batch and of the MC continuations (device-seconds).
    update, update_cpu : float
        One GRPO update's forward + backward on the probe batch (the cost yardstick).
    precondition, precondition_cpu : float
        The probe's own loss type's second moment s and u = P v (0 without Adam).
    alignment, alignment_cpu : float
        The probe's own alignment pass (its jvp).
    extra_passes : int
        Alignment passes of the other token-weight families (Adam with ``loss_types`` of other weights).
    extra_precondition, extra_alignment, extra_alignment_cpu : float
        Their second moments and directions u_f = P_f v, and their jvp passes.
    sums : dict[str, tuple[float, float]]
        Loss type -> (seconds, CPU seconds) of its weighted sums and bootstrap over every reward.
    signal_proxy : float
        verl's forward-only gradient-signal proxy (one no-grad forward).
    guided_scoring : float
        A guided probe's hinted forward of the importance weights (training's ``device_seconds["training"]``
        share of a guided update; 0 without guidance).
    """

    rollout: float = 0.0
    continuation: float = 0.0
    update: float = 0.0
    update_cpu: float = 0.0
    precondition: float = 0.0
    precondition_cpu: float = 0.0
    alignment: float = 0.0
    alignment_cpu: float = 0.0
    extra_passes: int = 0
    extra_precondition: float = 0.0
    extra_alignment: float = 0.0
    extra_alignment_cpu: float = 0.0
    sums: dict = field(default_factory=dict)
    signal_proxy: float = 0.0
    guided_scoring: float = 0.0


@dataclass(frozen=True)
class Samplers:
    """The probe's rollout backends: one random stream per source (:mod:`gradprobe.streams`), so a reward's
    figures do not depend on which other rewards draw continuations, nor the held-out reference on the
    continuations drawn."""

    rollout: object
    continuation: object
    reference: object


@dataclass(frozen=True)
class DeviceBatch:
    """The probe batch on the model's device and what every pass over it needs.

    Attributes
    ----------
    model : torch.nn.Module
        The policy's model.
    batch : RolloutBatch
        N = B * G completions of T tokens at most, on the model's device.
    outcome_advantages : Tensor
        (N, T), float64: the ``outcome`` reward's advantages (GRPO's), which the yardstick update and
        the Adam second moment use whether or not ``outcome`` is probed.
    micro_batch_size : int
        Rows per micro-batch of every pass (:func:`gradprobe.logprobs.memory_bounded_rows`: one
        micro-batch's activations fit about one parameter copy; values do not depend on it).
    max_completion_length : int
        dr_grpo's constant normaliser L_max (tokens): the sampling limit, as in training (Liu et al. 2025).
    guided : gradprobe.probe.guided.ImportanceWeights or None
        A guided probe's importance weights W (N, T) and hinted log-probabilities (None without guidance):
        every gradient of the guided update is the unguided one's with A replaced by W * A (:meth:`weighted`).
    """

    model: torch.nn.Module
    batch: RolloutBatch
    outcome_advantages: Tensor
    micro_batch_size: int
    max_completion_length: int
    guided: object = None

    def weighted(self, advantages: Tensor) -> Tensor:
        """The advantages the update's gradient sees: W * A (shape of ``advantages``, (N, T) or (R, N, T)) for a
        guided probe (:mod:`gradprobe.probe.guided`), ``advantages`` itself (the same object) without guidance."""
        return advantages if self.guided is None else self.guided.weights.to(advantages.dtype) * advantages


def progress_printer(config: ProbeConfig) -> Callable[[str], None]:
    """A function printing ``[gradprobe] msg`` to stderr when ``config.run.progress``, else doing nothing."""
    if config.run.progress:
        return lambda msg: print(f"[gradprobe] {msg}", file=sys.stderr, flush=True)
    return lambda msg: None


def probe_samplers(config: ProbeConfig, policy, sampler=None) -> Samplers:
    """The rollout backend (``sampler``, else ``config.sampling.backend`` seeded with ``config.batch.seed``:
    :func:`gradprobe.rollout.make_sampler`) and its ``continuation`` and ``reference`` streams."""
    sampler = sampler if sampler is not None else make_sampler(config.sampling.backend, policy, seed=config.batch.seed,
                                                               progress=config.run.progress)  # --backend
    return Samplers(rollout=sampler, continuation=stream_sampler(sampler, config.batch.seed, "continuation"),
                    reference=stream_sampler(sampler, config.batch.seed, "reference"))


def sample_batch(config: ProbeConfig, policy, task, sampler, ledger: Ledger, times: StageTimes) -> RolloutBatch:
    """Stage 1: ``config.batch.prompts`` training prompts x ``config.batch.group`` completions, charged to ``ledger``
    as ``rollout`` tokens; its generation seconds go to ``times.rollout``. With ``config.guidance``, k of each
    group are sampled from the hinted prompt by training's own collection (:mod:`gradprobe.probe.guided`),
    after checking that the model's prompt format keeps the hint (GuidanceError before any rollout)."""
    problems = task.problems("train", config.batch.prompts, seed=config.batch.seed)
    if config.guidance is not None:  # the guided arm's batch, as training collects it (gradprobe.probe.guided)
        check_guided_prompts(config, policy, task, problems)
        batch = sample_guided_batch(config, policy, task, problems, sampler, ledger)
    else:
        batch = collect_rollouts(policy, task, problems, group_size=config.batch.group, sampler=sampler,
                                 sampling=config.sampling, ledger=ledger, category="rollout", desc="rollouts")
    times.rollout = float(batch.metadata.get("generation_seconds", 0.0))
    release_memory()  # the generation's KV caches
    return batch


def native_signature_problem(fn) -> str | None:
    """Why ``fn``, given where a native :data:`~gradprobe.rewards.base.Reward` ``reward(batch, ctx) -> RewardOutput``
    is expected (a ``(name, Reward)`` pair, ``run_probe``'s ``extra_rewards``), cannot be one, read from its
    signature before any compute; None when it can, or when it has no signature to read (left to the call).

    Why: a TRL-style function ``f(prompts, completions, **columns)`` called as ``f(batch, ctx)`` failed deep in the
    probe with "'RewardContext' object is not iterable", naming neither the reward nor the fix."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    label = getattr(fn, "__name__", None) or type(fn).__name__  # a functools.partial or callable object: its type
    params = sig.parameters
    trl = next((p for p in ("completions", "prompts") if p in params), None)
    try:
        sig.bind(None, None)
    except TypeError:
        if trl:
            return f"{label}{sig} is a TRL-style function (it takes {trl}), not a Reward reward(batch, ctx)"
        return f"{label}{sig} cannot be called as a Reward reward(batch, ctx)"
    if trl and list(params)[:1] != ["batch"]:
        return f"{label}{sig} is a TRL-style function (it takes {trl}), not a Reward reward(batch, ctx)"
    return None


def caller_reward(fn, name: str):
    """``fn``, a reward the caller passed as a function (``run_probe``'s ``extra_rewards``, a ``(name, Reward)`` pair
    of ``gradprobe.probe``), called through :func:`gradprobe.rewards.sequence.call_reward`, as plug-ins are.

    Why: called bare, a native reward that raised stopped the probe with an error naming no reward, and one that
    called ``sys.exit()`` ended the program without a word. Now what it raises (a SystemExit, a KeyboardInterrupt no
    SIGINT caused) is a :class:`~gradprobe.rewards.base.RewardFunctionError` naming ``name``, which
    :func:`reward_outputs` records as that reward's failure; one already raised by the reward's own guard (a
    :func:`~gradprobe.rewards.sequence_reward`'s) goes on unchanged, named once."""

    def reward(batch, ctx=None):
        named = []

        def call():
            try:
                return fn(batch, ctx)
            except RewardFunctionError as e:  # named by the reward's own guard: not wrapped twice
                named.append(e)
                return None

        out = call_reward(call, name)
        if named:
            raise named[0]
        return out

    return reward


def reward_outputs(batch: RolloutBatch, rewards, ctx: RewardContext) -> tuple[dict, dict]:
    """Advantages and output metadata of every reward.

    Returns
    -------
    (dict[str, Tensor], dict[str, dict])
        reward -> A^R, shape (N, T), float64; reward -> ``generated_tokens`` (by ledger category),
        ``valid`` (completions with a reward), ``stats``, ``seconds`` (the call's wall time), ``own_seconds``
        (``seconds`` less the continuation generation seconds the call put on ``ctx.ledger``: the reward's own
        compute, which a seconds budget charges as training's ``device_seconds["reward"]``),
        ``missing_groups`` (groups without any reward).

    The user's rewards (:func:`is_builtin_reward` False: plug-ins, ``path/file.py:FUNCTION``, a Python function or
    ``(name, reward)`` pair, a reward the user registered) are called first, so one that raises fails before the
    built-in rewards' Monte Carlo continuations (or a process reward model's forwards) are spent; the built-ins
    follow in their given order, and the dicts keep ``rewards``' order (only the order of the calls changes).
    Every output is checked here, where it enters the probe (:func:`gradprobe.rewards.base.checked_output`): the
    advantages are exactly 0 on rows whose ``valid`` is False, so a reward with no valid row has the exact zeros
    its "no usable reward" warning promises.

    Raises
    ------
    ValueError
        A reward produced non-finite advantages (it must mask missing rewards instead; the reward is named).
    RewardFunctionError
        A plug-in reward raised or returned something unusable (:mod:`gradprobe.rewards.plugin`), or any reward
        returned an output that :func:`~gradprobe.rewards.base.checked_output` refuses (a float ``valid``, a
        ``generated_tokens`` count that is negative, fractional, text or under an unknown key, None for
        ``generated_tokens`` or ``stats``...; the message names the reward, the field and the value). Either
        error carries the failing reward's name as its attribute ``reward``
        (:func:`gradprobe.study.worker.isolated_probe` leaves that reward out).
    """
    advantages, outputs, rewards = {}, {}, list(rewards)
    gen = getattr(getattr(ctx, "ledger", None), "device_seconds", None)
    for name, fn in sorted(rewards, key=lambda item: is_builtin_reward(item[0])):  # stable: the user's first
        start, gen_before = time.perf_counter(), (gen or {}).get("generation", 0.0)
        try:
            out = fn(batch, ctx)
            seconds = time.perf_counter() - start
            generation = (gen or {}).get("generation", 0.0) - gen_before  # MC continuations: times.continuation
            out = checked_output(out, name, batch)  # the one entry: every consumer below sees checked values
            if not torch.isfinite(out.advantages).all():  # rows marked not valid and padding are zeroed: not these
                raise ValueError(f"reward {name!r} produced non-finite advantages on rows it marked valid; it must "
                                 "mask missing rewards instead (valid False for them)")
        except (RewardFunctionError, ValueError) as e:  # which reward failed, for a caller that leaves it out
            e.reward = name
            raise
        advantages[name] = out.advantages  # float64, exactly 0 off the mask and on rows marked invalid
        outputs[name] = {"generated_tokens": out.generated_tokens, "valid": int(out.valid.sum()),
                         "stats": out.stats, "seconds": seconds, "own_seconds": max(0.0, seconds - generation),
                         "missing_groups": int((~out.valid.cpu()).view(-1, batch.group_size).all(-1).sum())}
    order = [name for name, _ in rewards]
    return {k: advantages[k] for k in order}, {k: outputs[k] for k in order}


def is_builtin_reward(name: str) -> bool:
    """Whether ``name`` is one of gradprobe's own rewards: registered (:data:`~gradprobe.rewards.base.REWARDS`) to a
    function defined in the ``gradprobe`` package, inside its reward wrappers (a user's function registered through
    :func:`~gradprobe.rewards.sequence_reward` is the user's; a process reward model registered with
    :func:`~gradprobe.rewards.prm_reward` is gradprobe's).

    Why: :func:`reward_outputs` calls every other reward (the user's code, which may raise) before these, which
    may spend Monte Carlo continuations or a reward model's forwards. By name, not by function: the probe calls an
    ``extra_rewards`` function through :func:`caller_reward`, and a registered name holds one function only
    (:func:`gradprobe.rewards.base.registered_elsewhere`). Raises nothing: wrappers that loop read as the user's."""
    registered = REWARDS.get(name)
    if registered is None:  # a plug-in's import path, an extra or Python reward under a name of its own
        return False
    try:
        module = getattr(user_function(registered), "__module__", None)
    except ValueError:  # wrappers that loop: no gradprobe reward's
        return False
    return isinstance(module, str) and (module == "gradprobe" or module.startswith("gradprobe."))


def reward_advantages(config: ProbeConfig, policy, task, batch: RolloutBatch, rewards, sampler, ledger: Ledger,
                      times: StageTimes) -> tuple[DeviceBatch, dict, dict]:
    """Stage 2: every reward's per-token advantages; MC continuations drawn once, charged once.

    Parameters
    ----------
    rewards : list of (str, Reward)
    sampler
        The continuation stream (:attr:`Samplers.continuation`).

    Returns
    -------
    (DeviceBatch, dict[str, Tensor], dict[str, dict])
        The batch on the model's device, reward -> A^R (N, T) float64 on that device, and
        :func:`reward_outputs`'s metadata. The continuations' generation seconds go to
        ``times.continuation``.
    """
    model = policy.model
    ctx = RewardContext(task=task, sampler=sampler, sampling=config.sampling, mc=config.mc, ledger=ledger,
                        tokenizer=policy.tokenizer, eos_token_ids=policy.eos_token_ids)
    gen_before = ledger.device_seconds.get("generation", 0.0)
    advantages, outputs = reward_outputs(batch, rewards, ctx)
    times.continuation = ledger.device_seconds.get("generation", 0.0) - gen_before
    release_memory()  # the MC continuations' KV caches
    batch = batch.to(model.device)
    advantages = {k: v.to(model.device) for k, v in advantages.items()}
    outcome_adv = advantages.get("outcome")
    if outcome_adv is None:
        outcome_adv = get_reward("outcome")(batch, ctx).advantages.to(torch.float64).to(model.device)
    # Memory (issue 14): every pass over a batch runs in micro-batches of at most `mb` rows, bounded so
    # one micro-batch's activations fit about one parameter copy (values do not depend on it)
    mb = memory_bounded_rows(model, batch, config.update.micro_batch_size)
    run = DeviceBatch(model=model, batch=batch, outcome_advantages=outcome_adv, micro_batch_size=mb,
                      max_completion_length=config.sampling.max_new_tokens)
    return run, advantages, outputs


def guided_stage(config: ProbeConfig, run: DeviceBatch, ledger: Ledger, times: StageTimes) -> DeviceBatch:
    """Stage 2b of a guided probe: the importance weights W of the guided update (:mod:`gradprobe.probe.guided`;
    the hinted forward's seconds into ``times.guided_scoring``); ``run`` itself without guidance."""
    if config.guidance is None:
        return run
    weights = importance_weights(config, run.model, run.batch, ledger, micro_batch_size=run.micro_batch_size)
    times.guided_scoring = weights.scoring_seconds
    release_memory()
    return dataclasses.replace(run, guided=weights)


def update_yardstick(config: ProbeConfig, run: DeviceBatch, times: StageTimes) -> None:
    """Stage 3, the cost yardstick: one update's forward + backward (``config.update.loss_type``, GRPO's advantages)
    on the probe batch, timed into ``times.update`` / ``times.update_cpu``; the gradients are dropped. A guided
    probe's is the guided update: truncated importance sampling with the hinted log-probabilities."""
    model = run.model
    model.zero_grad(set_to_none=True)
    t0, c0 = time.perf_counter(), time.process_time()
    guided = {} if run.guided is None else {"importance_sampling": "tis", "is_cap": run.guided.cap}
    loss_and_backward(model, run.batch, run.outcome_advantages,
                      UpdateConfig(loss_type=config.update.loss_type, micro_batch_size=run.micro_batch_size,
                                   max_completion_length=run.max_completion_length, **guided),
                      sampler_logp=None if run.guided is None else run.guided.sampler_logp)
    times.update, times.update_cpu = time.perf_counter() - t0, time.process_time() - c0
    model.zero_grad(set_to_none=True)
    release_memory()  # the yardstick's gradients and activations
