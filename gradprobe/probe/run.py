"""The main job: probe a set of rewards on one batch of a real model and task.

Pipeline (DESIGN.md, "The probe"), every stage timed and charged to a ledger:

1. rollouts: B training prompts x G completions (``rollout`` tokens); with ``guidance`` (a guided arm,
   :mod:`gradprobe.probe.guided`) k of each group from the hinted prompt, as training samples them;
2. rewards: each reward turns the batch into per-token advantages A^R, shape (N, T);
   MC rewards draw their continuations once for all of them (``continuation`` tokens); a guided
   probe then scores the guided rows under the hint: the update's truncated importance weights W
   (N, T), and every estimate below is of the guided update, A^R replaced by W * A^R;
3. reference update v: ``heldout`` (RLOO policy gradient of accuracy on held-out prompts,
   its own ledger, never charged to the rewards) or ``direction:PATH`` (a saved vector);
4. optional Adam preconditioning u = P v (P shared by all rewards);
5. ONE forward-mode pass gives a_ijt = <grad l_ijt, u> for every token; each reward's
   <g_R, u> = sum w A^R a is a weighted sum over it, so the cost is flat in the number of rewards
   (under Adam, one pass per token-weight family of the loss types, step 7);
6. predicted gain per update = 100 * lr * <g_R, u> accuracy points; at a token budget
   T: (T / c_R) * gain, c_R = generated tokens per update of reward R (continuations included);
   bootstrap interval over prompts and signal-to-noise ratio.
7. extra loss types (``ProbeConfig.update.loss_types``): every reward is estimated again under each (only
   the loss's token weights w and, for gspo, the effective advantages change;
   :func:`gradprobe.probe.estimate.group_sums`). Without Adam they share the one alignment a, so a loss
   type costs a weighted sum, not a pass. With Adam each loss type's optimizer has its own second moment
   (from its own loss's gradients), so each token-weight family (:func:`weight_family`) gets its own
   s, u = P v and alignment pass, computed one family after another. Their entries are keyed
   ``REWARD@LOSS_TYPE`` (:mod:`gradprobe.probe_keys`).

The output folder holds ``probe.json`` (config, versions, per-reward results, ledgers,
costs), ``alignment.safetensors`` (a, A^R, masks, ids) and ``tokens.jsonl`` (per
completion: ``tokens``, the vocabulary's pieces, ``texts``, what each adds to the decoded text,
and their alignment, for heat maps).

Each stage is a function of its own, and :func:`run_probe` reads as their sequence: steps 1-2 and the cost
yardstick in :mod:`gradprobe.probe.stages`, steps 3-5 and 7's passes in :mod:`gradprobe.probe.direction`,
steps 6-7's estimates and the result in :mod:`gradprobe.probe.result`, the files and the printed table in
:mod:`gradprobe.probe.output`, the configuration in :mod:`gradprobe.probe.config`. The names users import
from here (:class:`ProbeConfig`, :data:`DEFAULT_TASK`, :func:`format_table`, :func:`token_texts`,
:func:`weight_family`, :func:`add_same_loss_ratios`...) stay importable from this module.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..layout import ALIGNMENT_SAFETENSORS
from ..ledger import Ledger
from ..memory import release_memory  # after each large stage: freed heap pages back to the OS (issue 14)
from ..models import load_policy
from ..outputs import prepare_output_dir, removed_if_left_empty
from ..probe_keys import check_reward_name
from ..rewards import parse_rewards
from ..rewards.base import check_distinct_rewards, registered_elsewhere, reward_origin
from ..rollout import check_backend
from ..rollout.prompt_lengths import sampler_context_limit
from ..tasks import load_task
from .config import DEFAULT_TASK, PRECONDITIONERS, REFERENCES, ProbeConfig, config_dict
from .direction import align, family_alignments, own_second_moment, reference_update, weight_family
from .output import advantages_key, format_table, token_texts
from .prompt_lengths import check_probe_prompts
from .output import write_probe_files as _write
from .reference_update import load_direction
from .result import (REFERENCE_REWARD, add_same_loss_ratios, assemble_result, estimate_all, per_update_costs,
                     probe_notes, reward_cosines, reward_entries, signal_proxy)
from .guided import check_guided_task
from .stages import (StageTimes, caller_reward, guided_stage, native_signature_problem, probe_samplers,
                     progress_printer, reward_advantages, sample_batch, update_yardstick)

__all__ = ["ProbeConfig", "DEFAULT_TASK", "REFERENCES", "PRECONDITIONERS", "SMALL_MODEL_PARAMETERS", "REFERENCE_REWARD",
           "run_probe", "probe_threads", "weight_family", "add_same_loss_ratios", "token_texts", "format_table",
           "notes_log", "rewards_to_probe", "PromptCheck"]

log = logging.getLogger(__name__)
#: The probe's diagnostic notes (also in ``result["warnings"]`` and printed by :func:`format_table`);
#: ``gradprobe probe`` silences this logger so that each note is printed once, in the table.
notes_log = logging.getLogger(__name__ + ".notes")
#: Models with fewer parameters than this run the probe on one torch thread (``ModelSettings.threads``
#: None) unless OpenMP's threads wait passively (``OMP_WAIT_POLICY=PASSIVE``, which ``gradprobe``
#: sets): their operations are too small for spinning threads to pay for the cores they hold.
SMALL_MODEL_PARAMETERS = 20_000_000
_config_dict = config_dict  # the former private name (calib's tests build results with it)


def probe_threads(config: ProbeConfig, model) -> int:
    """torch CPU threads for the probe of ``model``: ``config.model.threads``; else 1 for a model under
    :data:`SMALL_MODEL_PARAMETERS` parameters on the CPU when OpenMP's threads spin while they wait
    (``OMP_WAIT_POLICY`` not ``PASSIVE`` in the environment, e.g. ``run_probe`` called from Python);
    else the current setting.

    Why (README, "Quick start", Threads): on 2 cores, the tiny tier's work on 2 threads that spin
    took 8x the CPU and 6-9x the wall time of 1 thread, alone or beside another 2-thread process; 2
    threads that wait passively cost the CPU of the work, and beside another process they were
    faster than 1 thread."""
    if config.model.threads is not None:
        return config.model.threads
    on_cpu = next(model.parameters()).device.type == "cpu"
    spinning = os.environ.get("OMP_WAIT_POLICY", "").strip().upper() != "PASSIVE"
    if on_cpu and spinning and sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS:
        return 1
    return torch.get_num_threads()


@dataclass
class PromptCheck:
    """What :func:`run_probe`'s prompt-length check (:func:`~gradprobe.probe.prompt_lengths.check_probe_prompts`)
    last passed on, kept by a caller that probes the same prompts again and again: the TRL callback
    (:class:`gradprobe.integrations.trl.GradprobeCallback`) draws the same batch and held-out prompts (the same task,
    counts and seed) at every probe step, and encoding them all again each time finds nothing new. A
    :func:`run_probe` given it skips the check when everything the check reads is what it passed on, and otherwise
    checks and records what it passed on.

    Attributes
    ----------
    passed : tuple or None
        ``(task, tokenizer, settings)``: the task and the policy's tokenizer (the objects, compared by identity) and
        the settings the check reads (:func:`_prompt_settings`); None until a check passed.
    """

    passed: tuple | None = None


def _prompt_settings(config: ProbeConfig, policy, sampler) -> tuple:
    """What :func:`~gradprobe.probe.prompt_lengths.check_probe_prompts` reads besides the task and the tokenizer:
    the batch's prompts and seed, the sampling budget (tokens), whether the held-out prompts are rollouts (and how
    many), the sampler's context limit with its name, and what a guided arm's hinted prompts depend on (the
    guidance, the group size, the task's kind)."""
    return (config.batch.prompts, config.batch.seed, config.sampling.max_new_tokens,
            config.reference.variant.takes_path, config.reference.heldout_prompts,
            sampler_context_limit(sampler, policy.model), config.guidance, config.batch.group, config.task.spec)


def _check_prompts(config: ProbeConfig, policy, task, sampler, prompt_check: PromptCheck | None) -> None:
    """:func:`~gradprobe.probe.prompt_lengths.check_probe_prompts`, unless ``prompt_check`` says it passed on this
    task, tokenizer and settings (:class:`PromptCheck`); a check that passes is recorded there. Raises what the check
    raises (PromptTooLongError, nothing recorded)."""
    if prompt_check is None:
        check_probe_prompts(config, policy, task, sampler)
        return
    settings = _prompt_settings(config, policy, sampler)
    held = prompt_check.passed
    if held is not None and held[0] is task and held[1] is policy.tokenizer and held[2] == settings:
        return
    check_probe_prompts(config, policy, task, sampler)
    prompt_check.passed = (task, policy.tokenizer, settings)


def run_probe(config: ProbeConfig, *, out: str | Path | None = None, policy=None, task=None,
              extra_rewards: dict | None = None, sampler=None, reference_direction=None,
              prompt_check: PromptCheck | None = None) -> dict:
    """Run the probe end to end and (optionally) write the output folder.

    The output folder is checked for writing before any compute, so a bad ``out`` fails at once.

    Parameters
    ----------
    config : ProbeConfig
    out : path, optional
        Folder for ``probe.json``, ``alignment.safetensors`` and ``tokens.jsonl``.
    policy : gradprobe.models.Policy, optional
        An already loaded policy (notebooks); default: ``load_policy(config.model.name)``.
    task : gradprobe.tasks.Task, optional
        An already loaded task; default: ``load_task(config.task.spec)``.
    extra_rewards : dict[str, Reward], optional
        Rewards defined in the caller (e.g. ``sequence_reward(my_fn)``), probed beside
        ``config.rewards`` with the same single alignment pass; each is called as ``reward(batch, ctx)``,
        and what it raises (``sys.exit()`` too) is a RewardFunctionError naming it. A key may not be a
        registered reward's name unless its value is that reward.
    sampler : Sampler, optional
        Rollout backend for rollouts, continuations and held-out rollouts (e.g.
        :class:`gradprobe.rollout.vllm_sampler.VLLMSampler`); default: the backend
        ``config.sampling.backend`` (``--backend``; :func:`gradprobe.rollout.make_sampler`) seeded
        with ``config.batch.seed``.
    reference_direction : gradprobe.probe.batches.ReferenceDirection, optional
        A reference update computed once per policy and reused (several probe batches,
        :func:`gradprobe.probe.batches.run_probe_batches`): when it holds a vector, step 3 uses it
        instead of computing one; when it is empty, step 3 computes v as usual and stores it there.
    prompt_check : PromptCheck, optional
        Where the prompt-length check (each batch and held-out prompt fits the context with ``max_new_tokens``) is
        recorded: skipped when an earlier call passed it on this task, tokenizer and settings (:class:`PromptCheck`),
        else made and recorded. Default None: checked every time.

    Returns
    -------
    dict
        The content of ``probe.json``: ``config``, ``versions``, ``rewards`` (one entry per
        reward and loss type, the probe's ``loss_type`` first, then each of ``loss_types``: ``name``
        (the key, ``REWARD`` or ``REWARD@LOSS_TYPE``, :mod:`gradprobe.probe_keys`), ``reward``,
        ``loss_type``, ``inner_product``, ``predicted_gain_per_update`` (accuracy points),
        ``same_loss_reference`` / ``same_loss_ratio`` (:func:`add_same_loss_ratios`),
        ``tokens_per_update`` (tokens), ``predicted_gain_at_budget`` (points), ``interval``,
        ``snr``, ``alignment_family`` / ``alignment_pass`` (the alignment it used: its token-weight
        family's pass under Adam, pass 0 the probe's own, whose alignment the files hold; None / 0
        without Adam)...), ``ledger`` (the probe batch's, ``generated_tokens`` by category; every
        alignment pass charged to ``probe``), ``reference`` (``alignment_families``: per family its
        loss types, pass, ``precondition`` and seconds; None without Adam), ``batch`` statistics and
        ``costs`` (device-seconds): ``alignment_pass_seconds`` is ONE pass (the probe's own loss
        type's jvp and weighted sums) and ``alignment_to_update_ratio`` it over one update's forward +
        backward; ``extra_alignment_passes``, ``extra_alignment_pass_seconds``,
        ``extra_precondition_seconds`` and ``extra_loss_type_sums_seconds`` are the other families'
        passes, their second moments and directions, and the extra loss types' weighted sums.

    Raises
    ------
    ValueError
        Bad configuration, unknown reward/model/task (the message lists the valid names),
        a reward name containing ``@``, a reward that produced non-finite advantages; an ``extra_rewards`` key
        that is a registered reward's name with another function, a value that cannot be called as
        ``reward(batch, ctx)`` (a TRL-style function not wrapped with ``sequence_reward``; before any compute).
    gradprobe.rewards.RewardFunctionError
        A reward raised (``sys.exit()`` too) or returned an unusable output; its attribute ``reward`` names it.
    GuidanceError (a ValueError)
        With ``config.guidance``: a task without reference solutions (before anything is loaded), a model
        whose prompt format drops the hint (before any rollout), each naming the fix.
    OSError
        ``out`` cannot be written (checked first; :class:`~gradprobe.outputs.OutputDirError`).

    A folder that this call created is removed again if the probe fails before writing into it,
    so refused input leaves nothing behind.
    """
    threads = torch.get_num_threads()  # the probe may change it (probe_threads); the caller's is restored
    try:
        with removed_if_left_empty(out):
            return _run_probe(config, out=out, policy=policy, task=task, extra_rewards=extra_rewards, sampler=sampler,
                              reference_direction=reference_direction, prompt_check=prompt_check)
    finally:
        torch.set_num_threads(threads)


def rewards_to_probe(config: ProbeConfig, extra_rewards: dict | None) -> list:
    """(name, Reward) of ``config.rewards`` then ``extra_rewards``, checked before any compute; each of
    ``extra_rewards`` called through :func:`~gradprobe.probe.stages.caller_reward` (what it raises names it).

    Raises
    ------
    ValueError
        No reward, a name given twice, one reward under two names (``outcome`` and an import path to the built-in's
        own function, a caller's function and a registered name for it:
        :func:`gradprobe.rewards.base.check_distinct_rewards`), an unknown reward (the valid names listed), a name
        with ``@``, two names saved under one key (:func:`~gradprobe.probe.output.advantages_key`); an
        ``extra_rewards`` function under the name of a registered reward that is another function
        (:func:`_check_caller_reward`), or one that cannot be called as ``reward(batch, ctx)`` (a TRL-style function
        not wrapped with ``sequence_reward``).
    """
    given = dict(parse_rewards(list(config.rewards)) if config.rewards else [])
    extra = dict(extra_rewards or {})
    for name, fn in extra.items():
        if name in given:
            raise ValueError(f"reward {name!r} given twice")
        _check_caller_reward(name, fn)
        given[name] = fn
    if not given:
        raise ValueError("no rewards to probe: pass --rewards, e.g. outcome,mc_value")
    keys = {}
    for name in given:  # "@" separates a reward from a loss type in probe.json's keys (gradprobe.probe_keys)
        check_reward_name(name)
        other = keys.setdefault(advantages_key(name), name)
        if other != name:  # one holds a lone surrogate, the other a backslash where the first shows it escaped
            raise ValueError(f"rewards {other!r} and {name!r} would save their advantages under one key "
                             f"({advantages_key(name)!r}) in {ALIGNMENT_SAFETENSORS}: probe them in separate runs, "
                             "or rename one's file")
    check_distinct_rewards(list(given.items()))  # on the functions themselves, before caller_reward wraps them
    rewards = [(name, caller_reward(fn, name) if name in extra else fn) for name, fn in given.items()]
    if config.sampling.top_p < 1 or config.sampling.top_k:
        log.warning("top_p/top_k truncate the sampler: the probe differentiates the untruncated policy at the "
                    "sampling temperature, so advantages and alignments refer to slightly different distributions")
    return rewards


def _check_caller_reward(name: str, fn) -> None:
    """``extra_rewards[name]`` checked before any compute (it is then guarded:
    :func:`~gradprobe.probe.stages.caller_reward`).

    Raises
    ------
    ValueError
        ``name`` is registered to another function (:func:`gradprobe.rewards.base.registered_elsewhere`: a user's
        ``outcome`` would be taken for the built-in one, grpo's reference, with its notes and a calibration's domain),
        or ``fn`` cannot be called as ``reward(batch, ctx)``
        (:func:`~gradprobe.probe.stages.native_signature_problem`); the message names the reward and the fix.
    """
    other = registered_elsewhere(name, fn)
    if other is not None:
        raise ValueError(f"extra_rewards[{name!r}] ({reward_origin(fn)}) is named {name!r}, which is the registered "
                         f"reward {reward_origin(other)}, another function: the probe and everything reading its "
                         "results (grpo's reference, notes, a calibration) would take yours for it; give yours another "
                         f"key (the name {name!r} in config.rewards probes the registered one)")
    problem = native_signature_problem(fn)
    if problem is not None:
        raise ValueError(f"extra_rewards[{name!r}]: {problem}; wrap a TRL-style function as "
                         f"sequence_reward({getattr(fn, '__name__', 'fn')}, name={name!r}) "
                         "(gradprobe.rewards.sequence_reward)")


def _run_probe(config: ProbeConfig, *, out, policy, task, extra_rewards, sampler, reference_direction=None,
               prompt_check: PromptCheck | None = None) -> dict:
    """The stages of :func:`run_probe` in order (module docstring); the order fixes every random draw."""
    torch.manual_seed(config.batch.seed)
    rewards = rewards_to_probe(config, extra_rewards)
    check_guided_task(config, task)  # a guided probe needs reference solutions (before any compute)
    if sampler is None:
        check_backend(config.sampling.backend)  # vllm not installed: before the folder, the task and the model
    if out is not None:
        prepare_output_dir(Path(out))
    wall = time.perf_counter()
    # an unknown task name fails here, before the model is loaded
    task = task or load_task(config.task.spec, **({"skip_malformed": True} if config.task.skip_malformed else {}))
    policy = policy or load_policy(config.model.name, dtype=config.model.dtype, device=config.model.device,
                                   seed=config.batch.seed)
    release_memory()
    torch.set_num_threads(probe_threads(config, policy.model))
    direction = None
    if config.reference.variant.takes_path:  # fail before any generation if the file is missing or mismatched
        direction = load_direction(config.reference.variant.path(config.reference.kind), policy.model)
    samplers = probe_samplers(config, policy, sampler)
    _check_prompts(config, policy, task, samplers.rollout, prompt_check)  # every prompt fits, before any rollout
    ledger, times, say = Ledger(), StageTimes(), progress_printer(config)

    batch = sample_batch(config, policy, task, samplers.rollout, ledger, times)  # 1. rollouts
    run, advantages, outputs = reward_advantages(config, policy, task, batch, rewards, samplers.continuation,
                                                 ledger, times)  # 2. rewards -> per-token advantages
    run = guided_stage(config, run, ledger, times)  # 2b. a guided arm's importance weights W (else unchanged)
    effective = {k: run.weighted(a) for k, a in advantages.items()}  # the update's advantages: W * A^R (guided)
    update_yardstick(config, run, times)  # cost yardstick: one update's forward + backward
    s = own_second_moment(config, run, times, say)  # 4a. s before v: at most three parameter-sized vectors
    v, reference = reference_update(config, policy, task, run, samplers.reference, direction,
                                    reference_direction, say)  # 3. reference update
    alignment, reference_check = align(config, run, s, v, reference, ledger, times, say,
                                       len(advantages))  # 4-5. u = P v, ONE forward-mode pass for all rewards
    s = None
    alignments = family_alignments(config, run, v, alignment, reference, ledger, times, say)  # 7. other families
    cosines = reward_cosines(config, run, effective, v)
    tokens_per_update, seconds_per_update, update_scale = per_update_costs(config, run.batch, outputs, times)
    estimates = estimate_all(config, run, alignments, effective, tokens_per_update, seconds_per_update,
                             times)  # 6-7. per-reward estimates under every loss type
    power = signal_proxy(run, effective, times)
    entries = reward_entries(config, estimates, reference, cosines, power, outputs, run.batch.num_rows,
                             guidance=None if run.guided is None else run.guided.stats)
    notes = probe_notes(config, run.batch, reference, outputs, times)
    for note in notes:
        notes_log.warning(note)
    result = assemble_result(config, task=task, batch=run.batch, entries=entries, ledger=ledger, reference=reference,
                             reference_check=reference_check, notes=notes, update_scale=update_scale, times=times,
                             wall=wall)
    if out is not None:
        _write(out, result, run.batch, alignment, advantages, policy.tokenizer,
               importance_weights=None if run.guided is None else run.guided.weights)
    return result
