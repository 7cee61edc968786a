"""The probe's direction stages (DESIGN.md, "The probe"): reference update v, preconditioner, alignment passes.

:func:`gradprobe.probe.run.run_probe` calls them after :mod:`gradprobe.probe.stages`, in this order:

- :func:`own_second_moment`: under Adam, the second moment s of the probe's own loss type (K backwards of
  minibatch GRPO gradients, weighted by that loss's token weights);
- :func:`reference_update`: v, the RLOO policy gradient of accuracy on held-out prompts (its own ledger,
  never charged to the rewards), a saved direction (``direction:PATH``), or one computed by an earlier
  probe batch and reused;
- :func:`align`: u = P v (P = diag(1 / (sqrt(s) + eps)) under Adam, the identity without), then ONE
  forward-mode pass a_ijt = <grad l_ijt, u> for every token of the batch, shared by all rewards;
- :func:`family_alignments`: under Adam, one more s_f, u_f = P_f v and pass per other token-weight family
  of ``loss_types`` (:func:`weight_family`), as each loss-type arm's Adam has its own second moment.

Memory (issue 14): the steps that hold parameter-sized vectors (gradients, s, v, u) run so that at most
three are alive: s runs before v, u replaces s key by key and is freed after its pass, and the other
families' s_f, u_f and passes follow one family at a time.
"""

from __future__ import annotations

import math
import time
from functools import partial

import torch

from ..grpo.losses import LOSS_TYPES, token_weights
from ..ledger import JVP_FORWARDS, TRAIN_FORWARDS, Ledger, batch_flops_per_token
from ..logprobs import memory_bounded_rows
from ..memory import release_memory
from ..rollout import collect_rollouts
from .alignment import alignment_reference_check, token_alignment
from .config import ProbeConfig
from .reference_update import (adam_preconditioner, apply_preconditioner, heldout_reference,
                               second_moment_from_minibatches)
from .references import norm
from .stages import DeviceBatch, StageTimes

__all__ = ["weight_family", "loss_type_families", "adam_direction", "second_moment", "own_second_moment",
           "reference_update", "align", "family_alignments"]


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
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type {loss_type!r} is not one of {sorted(LOSS_TYPES)}")
    return next(name for name, fn in LOSS_TYPES.items() if fn is LOSS_TYPES[loss_type])


def loss_type_families(config: ProbeConfig) -> dict[str, list[str]]:
    """Token-weight family -> its loss types, over ``loss_type`` then ``loss_types`` (in that order; the
    probe's own family first)."""
    families: dict[str, list[str]] = {}
    for lt in config.update.all_loss_types:
        families.setdefault(weight_family(lt), []).append(lt)
    return families


def adam_direction(s: dict, v: dict) -> tuple[dict, str]:
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
    mean_s = sum(float(x.double().sum()) for x in s.values()) / max(1, sum(x.numel() for x in s.values()))
    if mean_s == 0.0:
        return v, "none (fallback: the outcome gradient of the probe batch is zero)"
    eps = max(1e-8, 1e-3 * math.sqrt(mean_s))
    u = {}
    for key in list(s):  # one parameter at a time, s freed as it goes (memory); the same values
        u.update(apply_preconditioner({key: v[key]}, adam_preconditioner({key: s.pop(key)}, eps=eps)))
    return u, f"adam (eps {eps:.3g})"


def second_moment(config: ProbeConfig, run: DeviceBatch, loss_type: str) -> dict:
    """s of one token-weight family: the mean squared GRPO gradient of K = ``second_moment_minibatches``
    minibatches of the probe batch (K backwards), weighted by ``loss_type``'s token weights
    (:func:`gradprobe.probe.second_moment_from_minibatches`); keyed like the parameters. A guided probe's
    gradients are the guided update's (advantages W * A, :meth:`~gradprobe.probe.stages.DeviceBatch.weighted`)."""
    weights = partial(token_weights, loss_type=loss_type, max_completion_length=run.max_completion_length)
    return second_moment_from_minibatches(
        run.model, run.batch, run.weighted(run.outcome_advantages), weights,  # guided: W * A, the update's
        num_minibatches=min(config.reference.second_moment_minibatches, run.batch.num_prompts),
        micro_batch_size=run.micro_batch_size)


def own_second_moment(config: ProbeConfig, run: DeviceBatch, times: StageTimes, say) -> dict | None:
    """The second moment of the probe's own loss type's Adam preconditioner (None without Adam), computed
    before v so that at most three parameter-sized vectors are alive; seconds into ``times.precondition``."""
    t0, c0 = time.perf_counter(), time.process_time()
    s = None
    if config.reference.preconditioner.second_moment:
        say("Adam preconditioner: second moment of minibatch GRPO gradients")
        s = second_moment(config, run, config.update.loss_type)
        release_memory()  # its gradient buffer and activations; s stays
    times.precondition, times.precondition_cpu = time.perf_counter() - t0, time.process_time() - c0
    return s


def reference_update(config: ProbeConfig, policy, task, run: DeviceBatch, sampler, direction,
                     reference_direction, say) -> tuple[dict, dict]:
    """The reference update v and ``probe.json["reference"]``'s first fields.

    Parameters
    ----------
    sampler
        The reference stream (:attr:`gradprobe.probe.stages.Samplers.reference`) for held-out rollouts.
    direction : dict[str, Tensor] or None
        The vector loaded for ``reference = "direction:PATH"``.
    reference_direction : gradprobe.probe.batches.ReferenceDirection or None
        Holding a vector: v is reused (``reused`` True); empty: v is stored there for the next batches.

    Returns
    -------
    (dict[str, Tensor], dict)
        v keyed like the parameters, and ``kind``, the held-out batch's ``prompts``, ``group``,
        ``heldout_accuracy`` (fraction), ``heldout_group_accuracy`` (fractions, shape (groups,): the standard
        error of :mod:`gradprobe.forecast.start_check`) and ``zero_variance_groups`` (or ``path``), ``seconds``,
        ``norm`` (||v||) and ``ledger`` (the held-out rollouts' and backward passes' tokens and FLOPs).
    """
    ref_ledger = Ledger()
    kind = config.reference.variant
    reference: dict = {"kind": kind.name}
    t0 = time.perf_counter()
    if reference_direction is not None and reference_direction.vector is not None:  # computed once, reused
        v = reference_direction.vector
        reference.update({k: x for k, x in reference_direction.info.items() if k not in ("seconds", "norm", "ledger")},
                         reused=True)
    elif kind.takes_path:
        v = direction
        reference["path"] = kind.path(config.reference.kind)
    else:
        v = _heldout_update(config, policy, task, run.model, sampler, ref_ledger, reference, say)
    reference["seconds"] = time.perf_counter() - t0
    reference["norm"] = norm(v)
    reference["ledger"] = ref_ledger.to_dict()
    if reference_direction is not None and reference_direction.vector is None:  # hand v to the next batches
        reference_direction.vector, reference_direction.info = v, dict(reference)
    return v, reference


def _heldout_update(config: ProbeConfig, policy, task, model, sampler, ref_ledger: Ledger, reference: dict,
                    say) -> dict:
    """v = the RLOO policy gradient of held-out accuracy (:func:`gradprobe.probe.heldout_reference`) on
    ``heldout_prompts`` x ``heldout_group`` fresh rollouts, charged to ``ref_ledger``; the held-out
    batch's figures go into ``reference``."""
    held = task.problems("heldout", config.reference.heldout_prompts, seed=config.batch.seed)
    hbatch = collect_rollouts(policy, task, held, group_size=config.reference.heldout_group, sampler=sampler,
                              sampling=config.sampling, ledger=ref_ledger, category="eval",
                              desc="held-out rollouts").to(model.device)
    release_memory()  # the held-out generation's KV caches
    say("reference update: RLOO policy gradient of held-out accuracy (backward passes)")
    with ref_ledger.timed("reference"):
        v = heldout_reference(model, hbatch, micro_batch_size=memory_bounded_rows(model, hbatch,
                                                                                 config.update.micro_batch_size))
    release_memory()  # the reference's activations (v stays)
    scores = hbatch.scores[torch.isfinite(hbatch.scores)]
    reference.update(prompts=len(held), group=config.reference.heldout_group,
                     heldout_accuracy=float(scores.mean()) if scores.numel() else float("nan"),
                     heldout_group_accuracy=_group_means(hbatch.scores_grouped()),
                     zero_variance_groups=int(sum(1 for row in hbatch.scores_grouped() if row.min() == row.max())))
    hfpt = batch_flops_per_token(model, hbatch)  # held-out generation, then forward + backward
    ref_ledger.add_flops("eval", hbatch.generated_tokens * hfpt)
    ref_ledger.add_flops("reference", TRAIN_FORWARDS * hbatch.generated_tokens * hfpt)
    return v


def align(config: ProbeConfig, run: DeviceBatch, s: dict | None, v: dict, reference: dict, ledger: Ledger,
          times: StageTimes, say, n_rewards: int) -> tuple[torch.Tensor, dict | None]:
    """u = P v of the probe's own loss type (``s`` consumed), then ONE forward-mode pass for all ``n_rewards``.

    Sets ``reference["precondition"]``; charges the pass (``JVP_FORWARDS`` forwards per completion token)
    and every charged generated token (one forward) to ``ledger`` (DESIGN.md, "The compute ledger").

    Returns
    -------
    (Tensor, dict or None)
        The alignment a, shape (N, T), in the model's dtype (0 off the completion mask), and the
        ``reference_check`` of ``config.reference.reference_check_rows`` rows against a higher-precision copy.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    if config.reference.preconditioner.second_moment:
        u, reference["precondition"] = adam_direction(s, v)
    else:
        reference["precondition"] = "none"
        u = v
    s = None
    times.precondition += time.perf_counter() - t0
    times.precondition_cpu += time.process_time() - c0
    release_memory()  # s, consumed by u
    say(f"alignment pass: one forward-mode (jvp) pass for {n_rewards} rewards")
    t0, c0 = time.perf_counter(), time.process_time()
    with ledger.timed("probe"):
        alignment = token_alignment(run.model, run.batch, u, micro_batch_size=run.micro_batch_size)
    times.alignment, times.alignment_cpu = time.perf_counter() - t0, time.process_time() - c0
    reference_check = None
    if config.reference.reference_check_rows:  # the pass in the model's dtype vs a float32 (float64) copy, a slice
        reference_check = alignment_reference_check(run.model, run.batch, u, alignment,
                                                     rows=config.reference.reference_check_rows,
                                                     micro_batch_size=run.micro_batch_size)
    u = None  # memory: only v is needed from here on
    release_memory()  # u and the jvp's activations
    fpt = batch_flops_per_token(run.model, run.batch)
    ledger.add_flops("generation", ledger.charged_tokens * fpt)
    ledger.add_flops("probe", JVP_FORWARDS * run.batch.generated_tokens * fpt)
    return alignment, reference_check


def family_alignments(config: ProbeConfig, run: DeviceBatch, v: dict, alignment: torch.Tensor, reference: dict,
                      ledger: Ledger, times: StageTimes, say) -> dict[str, torch.Tensor]:
    """Every token-weight family's alignment: under Adam one more s_f, u_f = P_f v and pass per family other
    than the probe's own, one family after another (at most v, s_f and a gradient buffer alive; then v and
    u_f, freed after its pass), each pass charged to ``ledger``; without Adam the one ``alignment`` serves all.

    Sets ``reference["alignment_families"]``: family -> its ``loss_types``, ``pass`` (0 the probe's own),
    ``precondition`` and seconds; None without Adam.

    Returns
    -------
    dict[str, Tensor]
        Family -> a_f, shape (N, T) (only the probe's own family without Adam).
    """
    families, own = loss_type_families(config), weight_family(config.update.loss_type)
    alignments = {own: alignment}
    if not config.reference.preconditioner.second_moment:
        reference["alignment_families"] = None  # one pass shared by every loss type
        return alignments
    info = {own: {"loss_types": families[own], "pass": 0, "precondition": reference["precondition"],
                  "precondition_seconds": times.precondition, "precondition_cpu_seconds": times.precondition_cpu,
                  "alignment_seconds": times.alignment, "alignment_cpu_seconds": times.alignment_cpu}}
    fpt = batch_flops_per_token(run.model, run.batch)
    for fam, lts in families.items():
        if fam == own:
            continue
        say(f"alignment pass for {', '.join(lts)}: their own Adam preconditioner ({fam}'s token weights)")
        t0, c0 = time.perf_counter(), time.process_time()
        u_f, prec = adam_direction(second_moment(config, run, lts[0]), v)
        prec_seconds, prec_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        with ledger.timed("probe"):
            alignments[fam] = token_alignment(run.model, run.batch, u_f, micro_batch_size=run.micro_batch_size)
        a_seconds, a_cpu = time.perf_counter() - t0, time.process_time() - c0
        u_f = None  # memory
        release_memory()
        ledger.add_flops("probe", JVP_FORWARDS * run.batch.generated_tokens * fpt)
        times.extra_passes += 1
        times.extra_precondition += prec_seconds
        times.extra_alignment += a_seconds
        times.extra_alignment_cpu += a_cpu
        info[fam] = {"loss_types": lts, "pass": times.extra_passes, "precondition": prec,
                     "precondition_seconds": prec_seconds, "precondition_cpu_seconds": prec_cpu,
                     "alignment_seconds": a_seconds, "alignment_cpu_seconds": a_cpu}
    reference["alignment_families"] = info
    return alignments


def _group_means(grouped: torch.Tensor) -> list[float]:
    """Each held-out group's accuracy (fraction) over its finite scores, shape (groups,); a group without one
    is left out."""
    out = []
    for row in grouped:
        ok = row[torch.isfinite(row)]
        if ok.numel():
            out.append(float(ok.double().mean()))
    return out
