"""The main job: probe a set of rewards on one batch of a real model and task.

Pipeline (DESIGN.md, "The probe"), every stage timed and charged to a ledger:

1. rollouts: B training prompts x G completions (``rollout`` tokens);
2. rewards: each reward turns the batch into per-token advantages A^R, shape (N, T);
   MC rewards draw their continuations once for all of them (``continuation`` tokens);
3. reference update v: ``heldout`` (RLOO policy gradient of accuracy on held-out prompts,
   its own ledger, never charged to the rewards) or ``direction:PATH`` (a saved vector);
4. optional Adam preconditioning u = P v (P shared by all rewards);
5. ONE forward-mode pass gives a_ijt = <grad l_ijt, u> for every token; each reward's
   <g_R, u> = sum w A^R a is a weighted sum over it, so the cost is flat in the number of rewards
   (under Adam, one pass per token-weight family of the loss types, step 7);
6. predicted gain per update = 100 * lr * <g_R, u> accuracy points; at a token budget
   T: (T / c_R) * gain, c_R = generated tokens per update of reward R (continuations included);
   bootstrap interval over prompts and signal-to-noise ratio.
7. extra loss types (``ProbeConfig.loss_types``): every reward is estimated again under each (only
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
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..config import MCConfig, SamplingConfig
from ..ledger import Ledger
from ..tiers import TINY_FRONTIER_TASK

log = logging.getLogger(__name__)
#: The probe's diagnostic notes (also in ``result["warnings"]`` and printed by :func:`format_table`);
#: ``gradprobe probe`` silences this logger so that each note is printed once, in the table.
notes_log = logging.getLogger(__name__ + ".notes")

REFERENCES = ("heldout", "direction:PATH")
PRECONDITIONERS = ("adam", "none")
#: The default job's task: the shipped tiny tier's frontier (:data:`gradprobe.tiers.TINY_FRONTIER_TASK`,
#: chain sums of 3-4 one-digit terms), where its groups have mixed rewards.
DEFAULT_TASK = "chain_sum:" + ",".join(f"{k}={v}" for k, v in TINY_FRONTIER_TASK.items())
#: Models with fewer parameters than this run the probe on one torch thread (``ProbeConfig.threads``
#: None) unless OpenMP's threads wait passively (``OMP_WAIT_POLICY=PASSIVE``, which ``gradprobe``
#: sets): their operations are too small for spinning threads to pay for the cores they hold.
SMALL_MODEL_PARAMETERS = 20_000_000


@dataclass(frozen=True)
class ProbeConfig:
    """Everything that defines a probe run (saved in ``probe.json``).

    Attributes
    ----------
    model, task : str
        See :func:`gradprobe.models.load_policy` and :func:`gradprobe.tasks.load_task`.
    rewards : tuple[str, ...]
        Registered reward names (:data:`gradprobe.rewards.REWARDS`).
    prompts, group : int
        B and G of the probe batch.
    reference : str
        ``heldout`` or ``direction:PATH`` (a ``.safetensors`` parameter-space vector).
    heldout_prompts, heldout_group : int
        Size of the held-out batch of the ``heldout`` reference (G >= 2; default 16).
    precondition : {"adam", "none"}
        ``adam``: u = P v with P = diag(1 / (sqrt(s) + eps)), s the mean squared minibatch
        GRPO (outcome) gradient of the probe batch weighted by the loss type's token weights, so the
        prediction is for an Adam step (one P per token-weight family of ``loss_type`` and ``loss_types``);
        ``none``: SGD, u = v.
    lr : float
        Learning rate of the update whose gain is predicted.
    loss_type : {"grpo", "dapo", "dr_grpo", "bnpo", "cispo", "gspo"}
        The loss of the predicted update (:data:`gradprobe.grpo.losses.LOSS_TYPES`). It also sets the
        cost yardstick's update and, with ``precondition="adam"``, the token weights of the second
        moment s, so the direction u = P v is this loss's.
    loss_types : tuple[str, ...]
        Extra loss types (``--loss-types``): every reward is also estimated under each, giving entries
        keyed ``REWARD@LOSS_TYPE`` (:func:`gradprobe.probe_keys.entry_key`; e.g. ``outcome@bnpo``) with
        the same fields as the entry ``REWARD``; such an entry equals a separate probe with ``loss_type``
        = that loss type on the same batch and seed. Under ``precondition="none"`` all loss types share
        the one alignment pass (a few multiply-adds per token each). Under ``adam`` each token-weight
        family (:func:`weight_family`: grpo/gspo, dapo/bnpo/cispo, dr_grpo) gets its own second moment,
        P and alignment pass, as each loss-type arm's Adam in training has its own second moment: one
        more second moment (K backwards) and one more jvp pass per family besides ``loss_type``'s
        (``costs.extra_alignment_passes``). Each entry records its ``alignment_family`` and
        ``alignment_pass``. Tokens and seconds per update are the reward's (the yardstick update is
        ``loss_type``'s). Must not repeat ``loss_type`` or itself.
    budget_tokens : int
        Generated-token budget of the extrapolation (tokens).
    budget_seconds : float or None
        Device-seconds budget of the extrapolation, if any.
    update_prompts, update_group : int or None
        B and G of the training update whose gain is predicted, when it differs from the probe
        batch (None: the probe batch's). The expected per-update gain does not depend on the batch
        size (the update follows the batch-mean gradient), but its generated tokens and seconds do:
        ``tokens_per_update`` and ``seconds_per_update`` are the probe batch's scaled by
        (update_prompts x update_group) / (prompts x group), and so is the extrapolation to the budget.
    skip_malformed : bool
        GSM8K, ``jsonl:`` and ``hf:`` tasks only: skip (count and warn about) malformed rows instead of raising
        :class:`~gradprobe.tasks.DatasetFormatError`; the count is ``skipped_rows`` in ``probe.json``.
    threads : int or None
        torch CPU threads during the probe (the caller's setting is restored afterwards). None: 1 for
        a model under :data:`SMALL_MODEL_PARAMETERS` parameters unless ``OMP_WAIT_POLICY=PASSIVE``
        (as the ``gradprobe`` command sets), else torch's own setting (:func:`probe_threads`).

    The defaults are the default job (``gradprobe probe`` with no options, under a minute on 2 CPU
    cores): the shipped ``tiny`` tier on its frontier task :data:`DEFAULT_TASK`, rewards ``outcome``,
    ``mc_value`` and ``hybrid_0.5``, a 16 x 8 probe batch, an 8 x 16 held-out reference and K = 2 MC
    continuations per step boundary, predicting the tier's training (``plans/tiny.toml``: lr 1e-4, a
    budget of 250k generated tokens).
    """

    model: str = "tiny"
    task: str = DEFAULT_TASK
    rewards: tuple[str, ...] = ("outcome", "mc_value", "hybrid_0.5")
    prompts: int = 16
    group: int = 8
    reference: str = "heldout"
    heldout_prompts: int = 8
    heldout_group: int = 16
    precondition: str = "adam"
    lr: float = 1e-4
    loss_type: str = "grpo"
    loss_types: tuple[str, ...] = ()
    budget_tokens: int = 250_000
    budget_seconds: float | None = None
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    mc: MCConfig = field(default_factory=lambda: MCConfig(continuations=2))
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    cosine: bool = False
    n_bootstrap: int = 1000
    micro_batch_size: int = 8
    second_moment_minibatches: int = 4
    progress: bool = True
    reference_check_rows: int = 0
    skip_malformed: bool = False
    update_prompts: int | None = None
    update_group: int | None = None
    threads: int | None = None

    def __post_init__(self):
        from ..grpo.losses import LOSS_TYPES

        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type (--loss-type) {self.loss_type!r} is not one of {', '.join(sorted(LOSS_TYPES))}")
        if isinstance(self.loss_types, str):  # "bnpo,cispo" (a plan's [probe] table, a caller) -> a tuple
            object.__setattr__(self, "loss_types", tuple(x.strip() for x in self.loss_types.split(",") if x.strip()))
        object.__setattr__(self, "loss_types", tuple(self.loss_types))
        unknown = [x for x in self.loss_types if x not in LOSS_TYPES]
        if unknown:
            raise ValueError(f"loss_types (--loss-types) {', '.join(map(repr, unknown))}: not a loss type; choose from "
                             f"{', '.join(sorted(LOSS_TYPES))} (gradprobe.grpo.losses.LOSS_TYPES)")
        if self.loss_type in self.loss_types:
            raise ValueError(f"loss_types (--loss-types) repeats the probe's own loss_type {self.loss_type!r}: its "
                             "entries are the plain REWARD keys already; list only the extra loss types")
        dup = sorted({x for x in self.loss_types if self.loss_types.count(x) > 1})
        if dup:
            raise ValueError(f"loss_types (--loss-types) lists {', '.join(dup)} more than once; list each once")
        if self.update_prompts is not None and self.update_prompts < 1:
            raise ValueError(f"update_prompts (--update-prompts) must be >= 1, got {self.update_prompts}")
        if self.update_group is not None and self.update_group < 2:
            raise ValueError(f"update_group (--update-group) must be >= 2 (a GRPO group of one completion has zero "
                             f"advantage), got {self.update_group}")
        if self.prompts < 1:
            raise ValueError(f"prompts must be >= 1, got {self.prompts}")
        if self.group < 2:
            raise ValueError(f"group must be >= 2 (group-relative advantages need two completions), got {self.group}")
        if self.heldout_group < 2:
            raise ValueError(f"heldout_group must be >= 2 (RLOO baseline), got {self.heldout_group}")
        if not (self.reference == "heldout" or self.reference.startswith("direction:")):
            raise ValueError(f"reference {self.reference!r} must be one of {REFERENCES}")
        if self.precondition not in PRECONDITIONERS:
            raise ValueError(f"precondition {self.precondition!r} must be one of {PRECONDITIONERS}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.budget_tokens < 1:
            raise ValueError(f"budget_tokens (--budget-tokens) must be >= 1, got {self.budget_tokens}")
        if self.budget_seconds is not None and not self.budget_seconds > 0:
            raise ValueError(f"budget_seconds (--budget-seconds) must be > 0, got {self.budget_seconds}")
        if self.heldout_prompts < 1:
            raise ValueError(f"heldout_prompts (--heldout-prompts) must be >= 1, got {self.heldout_prompts}")
        if self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size (--micro-batch-size) must be >= 1, got {self.micro_batch_size}")
        if self.seed < 0:
            raise ValueError(f"seed (--seed) must be >= 0, got {self.seed}")
        if self.reference_check_rows < 0:
            raise ValueError(f"reference_check_rows must be >= 0 (0 = off), got {self.reference_check_rows}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads (--threads) must be >= 1 (or None: automatic), got {self.threads}")


def probe_threads(config: ProbeConfig, model) -> int:
    """torch CPU threads for the probe of ``model``: ``config.threads``; else 1 for a model under
    :data:`SMALL_MODEL_PARAMETERS` parameters on the CPU when OpenMP's threads spin while they wait
    (``OMP_WAIT_POLICY`` not ``PASSIVE`` in the environment, e.g. ``run_probe`` called from Python);
    else the current setting.

    Why (README, "Quick start", Threads): on 2 cores, the tiny tier's work on 2 threads that spin
    took 8x the CPU and 6-9x the wall time of 1 thread, alone or beside another 2-thread process; 2
    threads that wait passively cost the CPU of the work, and beside another process they were
    faster than 1 thread."""
    if config.threads is not None:
        return config.threads
    on_cpu = next(model.parameters()).device.type == "cpu"
    spinning = os.environ.get("OMP_WAIT_POLICY", "").strip().upper() != "PASSIVE"
    if on_cpu and spinning and sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS:
        return 1
    return torch.get_num_threads()


def _reward_outputs(batch, rewards, ctx) -> tuple[dict, dict]:
    """Advantages (N, T) and output metadata of every reward; a failing reward names itself."""
    advantages, outputs = {}, {}
    for name, fn in rewards:
        start = time.perf_counter()
        out = fn(batch, ctx)
        adv = out.advantages.to(torch.float64)
        if not torch.isfinite(adv).all():
            raise ValueError(f"reward {name!r} produced non-finite advantages; it must mask missing rewards instead")
        advantages[name] = adv
        outputs[name] = {"generated_tokens": dict(out.generated_tokens), "valid": int(out.valid.sum()),
                         "stats": out.stats, "seconds": time.perf_counter() - start,
                         "missing_groups": int((~out.valid.bool().cpu()).view(-1, batch.group_size).all(-1).sum())}
    return advantages, outputs


def run_probe(config: ProbeConfig, *, out: str | Path | None = None, policy=None, task=None,
              extra_rewards: dict | None = None, sampler=None, reference_direction=None) -> dict:
    """Run the probe end to end and (optionally) write the output folder.

    The output folder is checked for writing before any compute, so a bad ``out`` fails at once.

    Parameters
    ----------
    config : ProbeConfig
    out : path, optional
        Folder for ``probe.json``, ``alignment.safetensors`` and ``tokens.jsonl``.
    policy : gradprobe.models.Policy, optional
        An already loaded policy (notebooks); default: ``load_policy(config.model)``.
    task : gradprobe.tasks.Task, optional
        An already loaded task; default: ``load_task(config.task)``.
    extra_rewards : dict[str, Reward], optional
        Rewards defined in the caller (e.g. ``sequence_reward(my_fn)``), probed beside
        ``config.rewards`` with the same single alignment pass.
    sampler : Sampler, optional
        Rollout backend for rollouts, continuations and held-out rollouts (e.g.
        :class:`gradprobe.rollout.vllm_sampler.VLLMSampler`); default: the backend
        ``config.sampling.backend`` (``--backend``; :func:`gradprobe.rollout.make_sampler`) seeded
        with ``config.seed``.
    reference_direction : gradprobe.probe.batches.ReferenceDirection, optional
        A reference update computed once per policy and reused (several probe batches,
        :func:`gradprobe.probe.batches.run_probe_batches`): when it holds a vector, step 3 uses it
        instead of computing one; when it is empty, step 3 computes v as usual and stores it there.

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
        a reward name containing ``@``, a reward that produced non-finite advantages.
    OSError
        ``out`` cannot be written (checked first; :class:`~gradprobe.outputs.OutputDirError`).

    A folder that this call created is removed again if the probe fails before writing into it,
    so refused input leaves nothing behind.
    """
    from ..outputs import removed_if_left_empty

    threads = torch.get_num_threads()  # the probe may change it (probe_threads); the caller's is restored
    try:
        with removed_if_left_empty(out):
            return _run_probe(config, out=out, policy=policy, task=task, extra_rewards=extra_rewards, sampler=sampler,
                              reference_direction=reference_direction)
    finally:
        torch.set_num_threads(threads)


def _run_probe(config: ProbeConfig, *, out, policy, task, extra_rewards, sampler, reference_direction=None) -> dict:
    from functools import partial

    from ..grpo.losses import probe_advantages, token_weights
    from ..grpo.step import UpdateConfig, loss_and_backward
    from ..ledger import JVP_FORWARDS, TRAIN_FORWARDS, batch_flops_per_token
    from ..logprobs import memory_bounded_rows
    from ..models import load_policy
    from ..outputs import prepare_output_dir, versions
    from ..probe_keys import check_reward_name, entry_key
    from ..rewards import RewardContext, get_reward, parse_rewards
    from ..rollout import collect_rollouts, make_sampler
    from ..streams import stream_sampler
    from ..tasks import load_task
    from . import (dot, estimate_rewards, heldout_reference, load_direction, norm, reward_gradient,
                   second_moment_from_minibatches, token_alignment)
    from ..memory import release_memory  # after each large stage: freed heap pages back to the OS (issue 14)

    torch.manual_seed(config.seed)
    rewards = parse_rewards(list(config.rewards)) if config.rewards else []
    for name, fn in (extra_rewards or {}).items():
        if name in dict(rewards):
            raise ValueError(f"reward {name!r} given twice")
        rewards.append((name, fn))
    if not rewards:
        raise ValueError("no rewards to probe: pass --rewards, e.g. outcome,mc_value")
    for name, _ in rewards:  # "@" separates a reward from a loss type in probe.json's keys (gradprobe.probe_keys)
        check_reward_name(name)
    if config.sampling.top_p < 1 or config.sampling.top_k:
        log.warning("top_p/top_k truncate the sampler: the probe differentiates the untruncated policy at the "
                    "sampling temperature, so advantages and alignments refer to slightly different distributions")
    if out is not None:
        prepare_output_dir(Path(out))
    wall = time.perf_counter()
    task = task or load_task(config.task, **({"skip_malformed": True} if config.skip_malformed else {}))  # an unknown task name fails here, before the model is loaded
    policy = policy or load_policy(config.model, dtype=config.dtype, device=config.device, seed=config.seed)
    model = policy.model
    release_memory()
    torch.set_num_threads(probe_threads(config, model))
    direction = None
    if config.reference != "heldout":  # fail before any generation if the file is missing or mismatched
        direction = load_direction(config.reference.split(":", 1)[1], model)
    sampler = sampler if sampler is not None else make_sampler(config.sampling.backend, policy, seed=config.seed,
                                                               progress=config.progress)  # --backend
    # one random stream per source (gradprobe.streams): a reward's figures do not depend on which
    # other rewards draw continuations, nor the held-out reference on the continuations drawn
    continuation_sampler = stream_sampler(sampler, config.seed, "continuation")
    reference_sampler = stream_sampler(sampler, config.seed, "reference")
    ledger = Ledger()

    # 1. rollouts on training prompts
    problems = task.problems("train", config.prompts, seed=config.seed)
    batch = collect_rollouts(policy, task, problems, group_size=config.group, sampler=sampler,
                             sampling=config.sampling, ledger=ledger, category="rollout", desc="rollouts")
    rollout_seconds = float(batch.metadata.get("generation_seconds", 0.0))
    release_memory()  # the generation's KV caches

    # 2. rewards -> per-token advantages (MC continuations drawn once, charged once)
    ctx = RewardContext(task=task, sampler=continuation_sampler, sampling=config.sampling, mc=config.mc, ledger=ledger,
                        tokenizer=policy.tokenizer, eos_token_ids=policy.eos_token_ids)
    gen_before = ledger.device_seconds.get("generation", 0.0)
    advantages, outputs = _reward_outputs(batch, rewards, ctx)
    continuation_seconds = ledger.device_seconds.get("generation", 0.0) - gen_before
    release_memory()  # the MC continuations' KV caches
    batch = batch.to(model.device)
    advantages = {k: v.to(model.device) for k, v in advantages.items()}
    outcome_adv = advantages.get("outcome")
    if outcome_adv is None:
        outcome_adv = get_reward("outcome")(batch, ctx).advantages.to(torch.float64).to(model.device)

    say = (lambda msg: print(f"[gradprobe] {msg}", file=sys.stderr, flush=True)) if config.progress else (lambda msg: None)

    # Memory (issue 14): every pass over a batch runs in micro-batches of at most `mb` rows, bounded so
    # one micro-batch's activations fit about one parameter copy (values do not depend on it), and the
    # steps that hold parameter-sized vectors (gradients, s, v, u) run so that at most three are alive:
    # the cost yardstick and the second moment s run before the reference v, u replaces s key by key;
    # under Adam the other token-weight families' s_f, u_f and passes follow one family at a time (step 5b).
    mb = memory_bounded_rows(model, batch, config.micro_batch_size)
    # dr_grpo's constant normaliser L_max is the sampling limit, as in training (Liu et al. 2025)
    l_max = config.sampling.max_new_tokens

    # cost yardstick: one GRPO update's forward + backward on the same batch
    model.zero_grad(set_to_none=True)
    t0, c0 = time.perf_counter(), time.process_time()
    loss_and_backward(model, batch, outcome_adv, UpdateConfig(loss_type=config.loss_type, micro_batch_size=mb,
                                                              max_completion_length=l_max))
    update_seconds, update_cpu = time.perf_counter() - t0, time.process_time() - c0
    model.zero_grad(set_to_none=True)
    release_memory()  # the yardstick's gradients and activations

    # token-weight families of the loss types (the probe's own first): under Adam each gets its own second
    # moment s_f, direction u_f = P_f v and alignment pass (step 5b); without Adam all share one pass
    loss_types = (config.loss_type, *config.loss_types)  # the probe's own, then the extra ones
    families: dict[str, list[str]] = {}  # weight family -> its loss types, in loss_types' order
    for lt in loss_types:
        families.setdefault(weight_family(lt), []).append(lt)
    own_family, adam = weight_family(config.loss_type), config.precondition == "adam"

    def second_moment(loss_type: str) -> dict:  # s of one family: K backwards, the family's token weights
        return second_moment_from_minibatches(
            model, batch, outcome_adv, partial(token_weights, loss_type=loss_type, max_completion_length=l_max),
            num_minibatches=min(config.second_moment_minibatches, batch.num_prompts), micro_batch_size=mb)

    # 4a. second moment of the probe's own loss type's Adam preconditioner (applied to v in step 4)
    t0, c0 = time.perf_counter(), time.process_time()
    s = None
    if adam:
        say("Adam preconditioner: second moment of minibatch GRPO gradients")
        s = second_moment(config.loss_type)
        release_memory()  # its gradient buffer and activations; s stays
    precondition_seconds, precondition_cpu = time.perf_counter() - t0, time.process_time() - c0

    # 3. reference update
    ref_ledger = Ledger()
    reference: dict = {"kind": "heldout" if config.reference == "heldout" else "direction"}
    t0 = time.perf_counter()
    if reference_direction is not None and reference_direction.vector is not None:  # computed once, reused
        v = reference_direction.vector
        reference.update({k: x for k, x in reference_direction.info.items() if k not in ("seconds", "norm", "ledger")},
                         reused=True)
    elif config.reference == "heldout":
        held = task.problems("heldout", config.heldout_prompts, seed=config.seed)
        hbatch = collect_rollouts(policy, task, held, group_size=config.heldout_group, sampler=reference_sampler,
                                  sampling=config.sampling, ledger=ref_ledger, category="eval",
                                  desc="held-out rollouts").to(model.device)
        release_memory()  # the held-out generation's KV caches
        say("reference update: RLOO policy gradient of held-out accuracy (backward passes)")
        with ref_ledger.timed("reference"):
            v = heldout_reference(model, hbatch, micro_batch_size=memory_bounded_rows(model, hbatch,
                                                                                     config.micro_batch_size))
        release_memory()  # the reference's activations (v stays)
        scores = hbatch.scores[torch.isfinite(hbatch.scores)]
        reference.update(prompts=len(held), group=config.heldout_group,
                         heldout_accuracy=float(scores.mean()) if scores.numel() else float("nan"),
                         zero_variance_groups=int(sum(1 for row in hbatch.scores_grouped() if row.min() == row.max())))
        hfpt = batch_flops_per_token(model, hbatch)  # held-out generation, then forward + backward
        ref_ledger.add_flops("eval", hbatch.generated_tokens * hfpt)
        ref_ledger.add_flops("reference", TRAIN_FORWARDS * hbatch.generated_tokens * hfpt)
    else:
        v = direction
        reference["path"] = config.reference.split(":", 1)[1]
    reference["seconds"] = time.perf_counter() - t0
    reference["norm"] = norm(v)
    reference["ledger"] = ref_ledger.to_dict()
    if reference_direction is not None and reference_direction.vector is None:  # hand v to the next batches
        reference_direction.vector, reference_direction.info = v, dict(reference)

    # 4. preconditioner of the probe's own loss type, shared by every reward (s was computed before v)
    t0, c0 = time.perf_counter(), time.process_time()
    if adam:
        u, reference["precondition"] = _adam_direction(s, v)
    else:
        reference["precondition"] = "none"
        u = v
    s = None
    precondition_seconds += time.perf_counter() - t0
    precondition_cpu += time.process_time() - c0
    release_memory()  # s, consumed by u

    # 5. ONE forward-mode pass for all rewards (the probe's own family's; its alignment is the one saved)
    say(f"alignment pass: one forward-mode (jvp) pass for {len(advantages)} rewards")
    t0, c0 = time.perf_counter(), time.process_time()
    with ledger.timed("probe"):
        alignment = token_alignment(model, batch, u, micro_batch_size=mb)
    alignment_seconds, alignment_cpu = time.perf_counter() - t0, time.process_time() - c0
    reference_check = None
    if config.reference_check_rows:  # the pass in the model's dtype vs a float32 (float64) copy, on a slice
        from .alignment import alignment_reference_check

        reference_check = alignment_reference_check(model, batch, u, alignment, rows=config.reference_check_rows,
                                                    micro_batch_size=mb)
    u = None  # memory: only v is needed from here on
    release_memory()  # u and the jvp's activations
    # FLOPs (DESIGN.md, "The compute ledger"): every charged generated token (rollouts and MC
    # continuations) one forward; the jvp pass JVP_FORWARDS forwards per completion token
    fpt = batch_flops_per_token(model, batch)
    ledger.add_flops("generation", ledger.charged_tokens * fpt)
    ledger.add_flops("probe", JVP_FORWARDS * batch.generated_tokens * fpt)

    # 5b. under Adam, one more second moment, direction and pass per other token-weight family, one family
    # after another so that at most three parameter-sized vectors are alive (v, s_f and a gradient buffer;
    # then v and u_f, which replaces s_f key by key and is freed after its pass); each pass is charged
    alignments = {own_family: alignment}  # weight family -> its alignment a_f, shape (N, T)
    family_info = None  # probe.json reference.alignment_families (None: one pass shared by every loss type)
    # the extra families' passes and the seconds of their steps 4 and 5
    extra_cost = {"passes": 0, "precondition": 0.0, "alignment": 0.0, "alignment_cpu": 0.0}
    if adam:
        family_info = {own_family: {"loss_types": families[own_family], "pass": 0,
                                    "precondition": reference["precondition"],
                                    "precondition_seconds": precondition_seconds,
                                    "precondition_cpu_seconds": precondition_cpu,
                                    "alignment_seconds": alignment_seconds, "alignment_cpu_seconds": alignment_cpu}}
        for fam, lts in families.items():
            if fam == own_family:
                continue
            say(f"alignment pass for {', '.join(lts)}: their own Adam preconditioner ({fam}'s token weights)")
            t0, c0 = time.perf_counter(), time.process_time()
            u_f, prec = _adam_direction(second_moment(lts[0]), v)
            prec_seconds, prec_cpu = time.perf_counter() - t0, time.process_time() - c0
            t0, c0 = time.perf_counter(), time.process_time()
            with ledger.timed("probe"):
                alignments[fam] = token_alignment(model, batch, u_f, micro_batch_size=mb)
            a_seconds, a_cpu = time.perf_counter() - t0, time.process_time() - c0
            u_f = None  # memory
            release_memory()
            ledger.add_flops("probe", JVP_FORWARDS * batch.generated_tokens * fpt)
            extra_cost["passes"] += 1
            extra_cost["precondition"] += prec_seconds
            extra_cost["alignment"] += a_seconds
            extra_cost["alignment_cpu"] += a_cpu
            family_info[fam] = {"loss_types": lts, "pass": extra_cost["passes"], "precondition": prec,
                                "precondition_seconds": prec_seconds, "precondition_cpu_seconds": prec_cpu,
                                "alignment_seconds": a_seconds, "alignment_cpu_seconds": a_cpu}
    reference["alignment_families"] = family_info

    cosines = {}  # entry key -> cosine
    if config.cosine:  # one backward per reward and loss type: g_R explicitly, cosine with v (not P v)
        v_norm = norm(v)
        for lt in loss_types:
            weights = token_weights(batch.completion_mask, lt, max_completion_length=l_max)
            for name, adv in advantages.items():
                g = reward_gradient(model, batch, probe_advantages(adv, batch.completion_mask, lt), weights,
                                    micro_batch_size=mb)  # gspo: sequence-mean advantages
                g_norm = norm(g)
                cosines[entry_key(name, lt, config.loss_type)] = (dot(g, v) / (g_norm * v_norm)
                                                                  if g_norm > 0 and v_norm > 0 else 0.0)

    # 6. per-reward estimates
    tokens_per_update, seconds_per_update = {}, {}
    update_scale = ((config.update_prompts or config.prompts) * (config.update_group or config.group)
                    / (config.prompts * config.group))  # the training update's batch / the probe batch
    for name in advantages:
        extra = int(sum(outputs[name]["generated_tokens"].values()))
        tokens_per_update[name] = max(1, round((batch.generated_tokens + extra) * update_scale))
        seconds_per_update[name] = update_scale * (rollout_seconds + (continuation_seconds if extra else 0.0)
                                                   + update_seconds)
    estimates = []  # (reward, loss type, RewardEstimate named by its entry key), the probe's loss type first
    sums = {}  # loss type -> (seconds, CPU seconds) of its weighted sums and bootstrap
    for lt in loss_types:  # its family's alignment (the one alignment without Adam), the same seed and costs
        t0, c0 = time.perf_counter(), time.process_time()
        for est in estimate_rewards(
                alignments[weight_family(lt)] if adam else alignment, advantages,
                completion_mask=batch.completion_mask, group_size=batch.group_size,
                loss_type=lt, lr=config.lr, tokens_per_update=tokens_per_update, max_completion_length=l_max,
                budget_tokens=config.budget_tokens, n_bootstrap=config.n_bootstrap, seed=config.seed,
                seconds_per_update=seconds_per_update, budget_seconds=config.budget_seconds):
            reward, est.name = est.name, entry_key(est.name, lt, config.loss_type)
            estimates.append((reward, lt, est))
        sums[lt] = (time.perf_counter() - t0, time.process_time() - c0)
    sums_seconds, sums_cpu = sums[config.loss_type]  # ONE pass's sums: the probe's own loss type's
    # verl's forward-only gradient-signal proxy E[A^2 W] (a forecast baseline, gradprobe.forecast.proxies):
    # one no-grad forward for pi(y_t) and sum pi^2, outside the alignment pass
    from .estimate import signal_proxy_group_sums, token_probability_stats

    t0 = time.perf_counter()
    pi, sum_pi_sq = token_probability_stats(model, batch, micro_batch_size=mb)
    names = list(advantages)
    power = signal_proxy_group_sums(torch.stack([advantages[n] for n in names]), pi, sum_pi_sq,
                                    batch.completion_mask, batch.group_size).cpu().numpy()  # (R, B)
    power = dict(zip(names, power))  # the proxy uses the masked-mean advantage: the same for every loss type
    proxy_seconds = time.perf_counter() - t0

    entries = []
    for reward, lt, est in estimates:
        d = est.to_dict()
        d["reward"] = reward  # the reward's name; d["name"] is the entry key, d["loss_type"] the estimate's loss
        # the alignment it used: its token-weight family's pass under Adam (0: the probe's own, the saved one)
        d["alignment_family"] = weight_family(lt) if adam else None
        d["alignment_pass"] = family_info[weight_family(lt)]["pass"] if adam else 0
        d["cosine"] = cosines.get(est.name)
        d["signal_proxy"] = float(power[reward].sum()) / batch.num_rows  # verl's proxy2_total_power, (1/N) sum A^2 W
        d["signal_proxy_per_group"] = [float(x) for x in power[reward]]
        d.update(generated_tokens=outputs[reward]["generated_tokens"], valid_completions=outputs[reward]["valid"],
                 reward_stats=outputs[reward]["stats"], reward_seconds=outputs[reward]["seconds"])
        entries.append(d)
    add_same_loss_ratios(entries, config.loss_type)
    mask = batch.completion_mask
    scores = batch.scores[torch.isfinite(batch.scores)]
    notes = _diagnose(batch, reference, outputs)
    reference["preconditioner_loss_type"] = config.loss_type if adam else None  # that of reference["precondition"]
    if extra_cost["passes"]:
        others = [f"{fam} ({', '.join(lts)})" for fam, lts in families.items() if fam != own_family]
        notes.append(f"loss types with other token weights than --loss-type {config.loss_type} got their own Adam "
                     f"preconditioner and alignment pass, one per token-weight family: {'; '.join(others)} "
                     f"({extra_cost['passes']} extra pass(es): costs.extra_alignment_pass_seconds), as each loss "
                     "type's Adam has its own second moment in training; loss types with the same weights share one")
    for note in notes:
        notes_log.warning(note)
    result = {
        "config": _config_dict(config),
        "versions": versions(),
        "rewards": entries,
        "ledger": ledger.to_dict(),
        "reference": reference,
        "reference_check": reference_check,
        "warnings": notes,
        "batch": {
            "prompts": batch.num_prompts, "group": batch.group_size, "completions": batch.num_rows,
            "generated_tokens": batch.generated_tokens,
            "mean_completion_tokens": float(mask.sum(-1).double().mean()),
            "mean_reward": float(scores.mean()) if scores.numel() else float("nan"),
            "truncation_rate": float(batch.truncated.double().mean()),
            "format_rate": sum(task.format_rate(c) for c in batch.completions) / batch.num_rows,
            "score_errors": batch.metadata.get("score_errors", 0),
            "empty_completions": int((mask.sum(-1) == 0).sum()),
            "skipped_rows": int(getattr(task, "skipped", 0)),
            "update_scale": update_scale,
        },
        "costs": {
            "rollout_seconds": rollout_seconds, "continuation_seconds": continuation_seconds,
            "reference_seconds": reference["seconds"], "precondition_seconds": precondition_seconds,
            # ONE alignment pass (the probe's own loss type's: its jvp and its weighted sums for every reward)
            # against ONE update's forward + backward, however many loss types or families are estimated
            "update_forward_backward_seconds": update_seconds, "alignment_pass_seconds": alignment_seconds + sums_seconds,
            "alignment_to_update_ratio": (alignment_seconds + sums_seconds) / update_seconds if update_seconds else None,
            # the same two passes on this process's CPU clock (all its threads), which other processes on
            # shared cores do not inflate, as benchmarks/probe_cost.py --clock cpu measures the target
            "update_forward_backward_cpu_seconds": update_cpu, "alignment_pass_cpu_seconds": alignment_cpu + sums_cpu,
            "alignment_to_update_cpu_ratio": (alignment_cpu + sums_cpu) / update_cpu if update_cpu > 0 else None,
            "signal_proxy_seconds": proxy_seconds,
            # Adam with loss types of other token weights: the extra families' passes (reference.alignment_families)
            "extra_alignment_passes": extra_cost["passes"], "extra_alignment_pass_seconds": extra_cost["alignment"],
            "extra_alignment_pass_cpu_seconds": extra_cost["alignment_cpu"],
            "extra_precondition_seconds": extra_cost["precondition"],  # their second moments and u_f = P_f v
            "extra_loss_type_sums_seconds": sum(sec for lt, (sec, _) in sums.items() if lt != config.loss_type),
            "wall_seconds": time.perf_counter() - wall,
        },
    }
    if out is not None:
        _write(out, result, batch, alignment, advantages, policy.tokenizer)
    return result


def weight_family(loss_type: str) -> str:
    """The token-weight family of a loss type: the first loss type of :data:`gradprobe.grpo.losses.LOSS_TYPES`
    with the same per-token weights (:func:`gradprobe.grpo.losses.token_weights`).

    ``grpo`` (grpo, gspo), ``dapo`` (dapo, bnpo, cispo) or ``dr_grpo``. Loss types of one family have the
    same Adam second moment in the probe (:func:`gradprobe.probe.second_moment_from_minibatches` weights
    the outcome gradient by the loss's token weights), so they share one preconditioned direction and one
    alignment pass; ``probe.json`` records each entry's family as ``alignment_family``.

    Raises
    ------
    ValueError
        Unknown ``loss_type`` (the message lists the valid ones).
    """
    from ..grpo.losses import LOSS_TYPES

    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type {loss_type!r} is not one of {sorted(LOSS_TYPES)}")
    return next(name for name, fn in LOSS_TYPES.items() if fn is LOSS_TYPES[loss_type])


def _adam_direction(s: dict, v: dict) -> tuple[dict, str]:
    """u = P v with P = diag(1 / (sqrt(s) + eps)) (:func:`gradprobe.probe.adam_preconditioner`), and how.

    ``s`` (second moment, keyed like the parameters) is consumed key by key, so u replaces it in memory.
    eps is floored at 1e-3 x the RMS gradient sqrt(mean s), so coordinates the outcome gradient never
    touched do not get P = 1/eps (Adam would not move them on its first steps either). s all zero (no
    gradient signal; P = 1/eps would inflate gains ~1e8-fold): u = v, an SGD step.

    Returns
    -------
    (dict[str, Tensor], str)
        u, and ``reference.precondition``'s text: ``"adam (eps ...)"`` or the fallback's.
    """
    from . import adam_preconditioner, apply_preconditioner

    mean_s = sum(float(x.double().sum()) for x in s.values()) / max(1, sum(x.numel() for x in s.values()))
    if mean_s == 0.0:
        return v, "none (fallback: the outcome gradient of the probe batch is zero)"
    eps = max(1e-8, 1e-3 * math.sqrt(mean_s))
    u = {}
    for key in list(s):  # one parameter at a time, s freed as it goes (memory); the same values
        u.update(apply_preconditioner({key: v[key]}, adam_preconditioner({key: s.pop(key)}, eps=eps)))
    return u, f"adam (eps {eps:.3g})"


def _diagnose(batch, reference: dict, outputs: dict) -> list[str]:
    """Plain-language warnings about inputs that make the probe uninformative.

    Among them, per reward: completions whose reward is missing (the reward returned None/NaN or
    raised; masked: advantage 0, left out of their group's mean and std, never scored 0), and
    groups in which every reward is missing (they contribute nothing to that reward's estimate).
    """
    notes = []
    if str(reference.get("precondition", "")).startswith("none (fallback"):
        notes.append("Adam preconditioning was skipped: the outcome gradient of the probe batch is zero (all groups "
                     "flat), so gains are predicted for an SGD step; use more --prompts or a larger --group")
    if reference.get("norm", 1.0) == 0.0:
        notes.append("the reference update is zero (every held-out group had equal rewards, e.g. accuracy 0 or 1): "
                     "all inner products are 0; use more --heldout-prompts, a larger --heldout-group or an easier task")
    for name, out in outputs.items():
        stats = out["stats"] or {}
        groups = stats.get("groups") or batch.num_prompts
        if stats.get("zero_variance_groups", 0) >= groups and name.startswith("outcome"):
            notes.append(f"reward {name!r}: every group of the probe batch has equal rewards, so its advantages are "
                         "all zero; use more --prompts or a larger --group")
        missing, dead = int(stats.get("missing") or 0), int(out.get("missing_groups") or 0)
        if missing:
            notes.append(f"reward {name!r}: {missing} of {batch.num_rows} completions got no reward (it returned "
                         "None/NaN or raised); they are masked (advantage 0, left out of their group's mean and std), "
                         "not scored 0")
        if dead:
            notes.append(f"reward {name!r}: {dead} of {batch.num_prompts} groups have no reward at all (every "
                         "completion's reward is missing), so they add nothing to its estimate; check the reward "
                         "function on those prompts")
    trunc = float(batch.truncated.double().mean())
    if trunc > 0.5:
        notes.append(f"{trunc:.0%} of completions hit --max-new-tokens without EOS (truncated); raise --max-new-tokens")
    if int((batch.completion_mask.sum(-1) == 0).sum()):
        notes.append(f"{int((batch.completion_mask.sum(-1) == 0).sum())} completions are empty")
    return notes


def _config_dict(config: ProbeConfig) -> dict:
    d = asdict(config)
    d["rewards"] = list(config.rewards)
    d["loss_types"] = list(config.loss_types)
    return d


#: The reward the forecast compares against (grpo's), whose entry under the same loss type is the
#: denominator of each entry's ``same_loss_ratio`` (:func:`add_same_loss_ratios`).
REFERENCE_REWARD = "outcome"


def add_same_loss_ratios(entries: list[dict], probe_loss_type: str, reference_reward: str = REFERENCE_REWARD) -> None:
    """Give every entry its ratio to the reference reward under the same loss type, in place.

    For the entry of reward R under loss type L (key ``R`` or ``R@L``, :mod:`gradprobe.probe_keys`):
    ``same_loss_reference`` = the key of ``reference_reward`` under L (``outcome`` or ``outcome@L``) and
    ``same_loss_ratio`` = <g_R,L, u> / <g_outcome,L, u> (dimensionless; R's per-update efficiency vs
    GRPO's advantages trained with the same loss, first order). Both are None when the reference reward
    was not probed; the ratio is None when its inner product is 0. The forecast's rho is another ratio:
    vs the reference reward under the probe's own loss type (the reference curve's), so that an arm
    that changes only the loss gets rho != 1 (:func:`gradprobe.forecast.forecast_rewards`).

    Parameters
    ----------
    entries : list of dict
        ``probe.json["rewards"]``: each with ``name``, ``inner_product`` and (else taken from the key)
        ``loss_type``.
    probe_loss_type : str
        ``probe.json["config"]["loss_type"]``.
    reference_reward : str
        Default ``outcome``.
    """
    from ..probe_keys import entry_key, split_entry_key

    by_key = {e["name"]: e for e in entries}
    for e in entries:
        reward, lt = split_entry_key(e["name"], probe_loss_type)
        ref = by_key.get(entry_key(reference_reward, e.get("loss_type") or lt, probe_loss_type))
        e["same_loss_reference"] = None if ref is None else ref["name"]
        den = None if ref is None else float(ref["inner_product"])
        e["same_loss_ratio"] = float(e["inner_product"]) / den if den else None


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def token_texts(tokenizer, ids: list[int]) -> list[str]:
    """The text each token adds to the decoded completion (what a person reads), one string per id.

    ``convert_ids_to_tokens`` gives the vocabulary's raw pieces (``"Ġthe"``, ``"Ċ"``, byte
    fragments); this decodes prefixes instead, so ``"".join(token_texts(tok, ids)) ==
    tok.decode(ids)``. A token that ends inside a multi-byte character adds ``""`` and the token
    that completes it adds the character. Cost: one decode per token (completions are short).
    """
    out, prev = [], ""
    for k in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:k], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if text.endswith("\ufffd") and k < len(ids):  # an incomplete UTF-8 sequence: wait for the next token
            out.append("")
            continue
        out.append(text[len(prev):] if text.startswith(prev) else text)
        prev = text
    return out


def _write(out, result, batch, alignment, advantages, tokenizer) -> None:
    """Write probe.json (atomically), alignment.safetensors and tokens.jsonl."""
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {"alignment": alignment.detach().cpu().contiguous(),
               "completion_mask": batch.completion_mask.cpu().contiguous(),
               "completion_ids": batch.completion_ids.cpu().contiguous()}
    for name, adv in advantages.items():
        tensors[f"advantages.{name}"] = adv.cpu().contiguous()
    save_file(tensors, str(out / "alignment.safetensors"))
    with open(out / "tokens.jsonl", "w") as f:
        for n in range(batch.num_rows):
            m = batch.completion_mask[n].cpu()
            ids = batch.completion_ids[n].cpu()[m].tolist()
            f.write(json.dumps({
                "row": n, "prompt_id": batch.problems[n // batch.group_size].id,
                "score": _json_safe(float(batch.scores[n])), "truncated": bool(batch.truncated[n]),
                "tokens": tokenizer.convert_ids_to_tokens(ids),  # the vocabulary's raw pieces
                "texts": token_texts(tokenizer, ids),  # what each token adds to the decoded text
                "alignment": alignment[n].cpu()[m].tolist(),
                "advantages": {k: v[n].cpu()[m].tolist() for k, v in advantages.items()},
            }) + "\n")
    tmp = out / "probe.json.tmp"
    tmp.write_text(json.dumps(_json_safe(result), indent=2))
    tmp.replace(out / "probe.json")


def format_table(result: dict) -> str:
    """A plain-text table of the per-reward results (what ``gradprobe probe`` prints)."""
    cfg = result["config"]
    lines = [
        f"model {cfg['model']}  task {cfg['task']}  batch {cfg['prompts']}x{cfg['group']}  reference {cfg['reference']}"
        f"  precondition {cfg['precondition']}  lr {cfg['lr']:g}  budget {cfg['budget_tokens']:,} tokens",
        f"batch mean reward {result['batch']['mean_reward']:.3f}  truncation {result['batch']['truncation_rate']:.2f}"
        f"  generated tokens {result['ledger']['generated_tokens']}",
        "",
    ]
    rows = []
    for r in result["rewards"]:
        iv = r.get("interval")
        ivs = f"[{iv[0]:+.3e}, {iv[1]:+.3e}]" if iv else "-"
        snr = r.get("snr")
        snr_s = "-" if snr is None else (f"{snr:.2f}" if isinstance(snr, float) else str(snr))
        rows.append([r["name"], f"{r['inner_product']:+.3e}", ivs, snr_s, f"{r['predicted_gain_per_update']:+.4f}",
                     f"{r['tokens_per_update']:,}", f"{r['predicted_gain_at_budget']:+.3f}"])
    from ..tables import format_columns  # columns as wide as their longest entry (long reward names)

    lines += format_columns(["reward", "<g_R,u>", "95% interval", "SNR", "gain/update", "tokens/update",
                             "gain@budget"], rows, "<>>>>>>")
    extra = (cfg.get("loss_types") or [])
    if extra:
        passes = (result.get("costs") or {}).get("extra_alignment_passes")
        source = ("its token-weight family's alignment pass, each family with its own Adam preconditioner" if passes
                  else "the same alignment pass")
        lines.append(f"REWARD@LOSS: the reward's gradient under that loss type (from {source}); plain REWARD: "
                     f"under the probe's --loss-type {cfg.get('loss_type')}")
    lines += [f"warning: {w}" for w in result.get("warnings", [])]
    c = result["costs"]
    ratio = c.get("alignment_to_update_ratio")
    fc = result.get("forecast")
    lines += ["", "gain/update and gain@budget: accuracy points, the RAW first-order extrapolation (no diminishing returns: "
                  "expected to overestimate)" + ("; read the forecast below" if fc and fc.get("available") else ""),
              f"alignment pass {c['alignment_pass_seconds']:.2f}s = "
              f"{ratio:.2f}x one update's forward+backward ({c['update_forward_backward_seconds']:.2f}s)"
              + (f" on the wall clock, {c['alignment_to_update_cpu_ratio']:.2f}x on the process's CPU clock (unaffected "
                 "by other processes)" if c.get("alignment_to_update_cpu_ratio") is not None else "") + "; "
              f"rollouts {c['rollout_seconds']:.1f}s, continuations {c['continuation_seconds']:.1f}s, "
              f"reference {c['reference_seconds']:.1f}s" if ratio is not None else ""]
    if fc:
        from ..forecast.forecaster import format_forecast

        lines.append(format_forecast(fc))
    return "\n".join(lines)
