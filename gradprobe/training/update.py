"""One update of a training run: rollout -> reward -> step -> record (:func:`run_update`).

Rollout: the batch of the arm's prompt-selection rule (:mod:`gradprobe.difficulty.select`): B pool
prompts x G completions (``rollout`` tokens) under ``plain``, the rule of an arm without ``selection``;
other rules charge ``selection`` too. Reward: the arm's registered reward with
all of its wall time on the ledger (:func:`charged_reward`). Step: mu optimizer steps of
:func:`gradprobe.grpo.step.grpo_step` on the batch (:func:`policy_step`). Record: FLOPs charged
(:func:`charge_flops`), one ``metrics.jsonl`` line (:func:`record_update`). After the first update,
:func:`check_first_update` stops a run whose budget is smaller than one update; after every update,
:func:`check_untrained_stop` stops a run that has trained nothing, keyed by the cause: its reward has given no
completion a reward, or its rewards overflowed float64 group statistics and no group trained
(:data:`NO_VALID_REWARD_UPDATES`); :func:`warn_untrained` warns when :data:`UNTRAINED_WARN_UPDATES` updates in a row
trained no group (:mod:`gradprobe.training.untrained`), and the run goes on.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..forecast.overflow_parts import overflow_parts, part_overflow_text, part_rescale_text
from ..grpo import step as grpo_update  # grpo_update.grpo_step at call time: a test's spy sees every step
from ..layout import METRICS_JSONL
from ..ledger import CHARGED, Ledger, forward_flops_per_token
from ..rewards import RewardContext
from ..rewards.base import ROLLOUT_ONLY, checked_output, rollout_only_refusal
from ..rollout.guided import guidance_stats, guided_logprobs
from .errors import BudgetTooSmallError, NonFiniteRunError, NoValidRewardError, RewardOverflowError
from .metrics import batch_stats, mean_context
from .records import finish
from .budget import too_small_message
from .state import RunSession, exhausted
from .untrained import advice, cause, describe, max_abs_reward, stop_history, trained, untrained_tail

__all__ = ["run_update", "charged_reward", "collect_batch", "policy_step", "charge_flops", "record_update",
           "check_first_update", "check_untrained_stop", "warn_untrained", "NO_VALID_REWARD_UPDATES",
           "UNTRAINED_WARN_UPDATES"]

#: Updates from the run's start in which the reward gave no completion a reward (None, NaN or +-inf for every
#: one: nothing trained) after which the run stops with ``stop_reason`` ``"no_valid_reward"``
#: (:func:`check_untrained_stop`): a broken reward function costs three updates, not the budget, while one or two
#: updates that the reward masks whole (by chance) do not stop a run.
NO_VALID_REWARD_UPDATES = 3

#: Updates in a row in which no group trained (every advantage 0: every group flat, every completion truncated, or the
#: rewards overflowed) after which the run warns once on stderr, naming the cause and the fix
#: (:func:`warn_untrained`); said once more at ten times as many in a row, never on every update. The run goes on:
#: GRPO trains nothing on a task too hard (or too easy) for the policy, and that can be a result.
UNTRAINED_WARN_UPDATES = 3


def run_update(s: RunSession) -> dict:
    """One update: rollout -> reward -> step -> record; returns the ``metrics.jsonl`` line written.

    Raises
    ------
    NonFiniteRunError
        A NaN/inf loss (``summary.json`` written with ``stop_reason = "non_finite_loss"``).
    NoValidRewardError
        No update of the run so far gave any completion a reward, for :data:`NO_VALID_REWARD_UPDATES` updates or
        until the budget ran out (:func:`check_untrained_stop`; ``stop_reason = "no_valid_reward"``); its subclass
        RewardOverflowError: no update so far trained any group and the rewards overflowed float64 group statistics
        (:func:`check_untrained_stop`; ``stop_reason = "reward_overflow"``).

    Warns
    -----
    RuntimeWarning
        :data:`UNTRAINED_WARN_UPDATES` updates in a row trained no group (:func:`warn_untrained`).
    """
    st = s.state
    before, gen_before = st.spent(), dict(st.ledger.generated_tokens)
    batch, selection = collect_batch(s)  # rollout
    ctx = RewardContext(task=s.task, sampler=s.continuation_sampler, sampling=s.run.sampling, mc=s.run.mc,
                        ledger=st.ledger, tokenizer=s.policy.tokenizer, eos_token_ids=s.policy.eos_token_ids)
    rout = charged_reward(s.reward_fn, batch, ctx, st.ledger, s.run.reward)  # reward
    batch = batch.to(s.model.device)
    adv = rout.advantages.to(torch.float64).to(s.model.device)  # (N, T)
    lr, step = policy_step(s, batch, adv)  # step
    new_gen = charge_flops(s, batch, step, gen_before)  # record
    line = record_update(s, batch, adv, rout, step, lr=lr, before=before, new_gen=new_gen, selection=selection)
    check_untrained_stop(s, line)
    warn_untrained(s, line)
    return line


def collect_batch(s: RunSession):
    """The update's scored rollouts (N = B * G rows) and the selection rule's record (None under ``plain``).

    Every rule is called the same way (:meth:`gradprobe.difficulty.select.PromptSelector.next_batch`):
    ``plain`` takes B prompts of the pool in the seed's order (:func:`gradprobe.streams.pool_indices`) and
    charges ``rollout`` tokens; the other rules charge their own selection tokens, FLOPs and seconds.
    """
    return s.selector.next_batch(s.state.update, s.state.ledger)


def charged_reward(reward_fn, batch, ctx, ledger: Ledger, name: str = "reward"):
    """``reward_fn(batch, ctx)``, its output checked, with all of its wall time and tokens on the ledger.

    MC rewards charge their continuations' tokens and seconds (``generation``) and a process
    reward model its FLOPs and seconds (``reward``) themselves; the rest of the call (a
    verifier parsing and checking answers or steps) is added to ``device_seconds["reward"]``, so
    every second of the reward counts once against a seconds budget (:data:`gradprobe.ledger.CHARGED_WORK`).
    The output is checked where it enters training, as where it enters the probe
    (:func:`gradprobe.rewards.base.checked_output`: a float valid or a bad count refused, rows marked not valid
    zeroed), and the tokens it reports generating (``generated_tokens``, the charged categories
    :data:`gradprobe.ledger.CHARGED`) beyond what it charged the ledger itself are charged too: the probe counts
    them in tokens per update, so a native reward that generates without charging trained for free before.

    Raises
    ------
    RewardFunctionError
        The output is refused (:func:`~gradprobe.rewards.base.checked_output`; ``name`` is the reward named), or a
        reward registered with ``rollout_only=True`` charged generated tokens to the ledger itself
        (:func:`_refuse_rollout_only_charges`).
    """
    before = sum(ledger.device_seconds.values())
    tokens_before = dict(ledger.generated_tokens)
    start = time.perf_counter()
    out = reward_fn(batch, ctx)
    _refuse_rollout_only_charges(name, ledger, tokens_before)
    out = checked_output(out, name, batch)
    elapsed = time.perf_counter() - start
    ledger.add_seconds("reward", max(0.0, elapsed - (sum(ledger.device_seconds.values()) - before)))
    for category, n in out.generated_tokens.items():
        charged = ledger.generated_tokens.get(category, 0) - tokens_before.get(category, 0)
        if category in CHARGED and n > charged:
            ledger.add_generated(category, n - charged)
    return out


def _refuse_rollout_only_charges(name: str, ledger: Ledger, tokens_before: dict) -> None:
    """Refuse a call of the reward ``name``, registered with ``rollout_only=True``
    (:data:`~gradprobe.rewards.base.ROLLOUT_ONLY`), that charged generated tokens to ``ledger`` itself (through
    ``ctx.sampler``: MC continuations), beyond ``tokens_before`` (the ledger's ``generated_tokens`` before the call):
    the plan's budget check bounds an update of its arms by B * G * max_new_tokens tokens on that declaration
    (:func:`gradprobe.training.budget.most_tokens_per_update`), as :func:`~gradprobe.rewards.base.checked_output`
    refuses the tokens such a reward reports.

    Raises
    ------
    RewardFunctionError
        One line naming the reward, the tokens charged and the fix."""
    if name not in ROLLOUT_ONLY:
        return
    spent = {c: ledger.generated_tokens.get(c, 0) - tokens_before.get(c, 0) for c in CHARGED}
    if not any(spent.values()):
        return
    said = ", ".join(f"{c!r}: {n:,}" for c, n in spent.items() if n)
    raise rollout_only_refusal(name, f"generated {{{said}}} tokens in this update (ctx.sampler)")


def policy_step(s: RunSession, batch, adv: torch.Tensor) -> tuple[float, dict]:
    """mu = ``train.iterations`` optimizer steps on ``batch`` with advantages ``adv`` (N, T), then the
    scheduler step, the update count and the sampler's weight push (a sampler with its own copy of the
    weights, vLLM: its record, seconds, bytes and weight version, becomes the step's ``weight_push``;
    the seconds are charged to training).

    With mu > 1, pi_old's log-probabilities (one no-grad forward, charged to training) enter every
    step; with guidance, the hinted rows' log-probabilities under the hint are the sampler's
    (truncated importance weights). ``kl_init`` and entropy come from the first step's own forward
    (timed as ``metrics``) every ``stats_every`` updates.

    Returns
    -------
    (float, dict)
        The learning rate of the step, and the first step's record with ``trained_tokens`` and
        ``seconds`` summed over the mu steps (plus ``iteration_losses``/``iteration_grad_norms`` when mu > 1).

    Raises
    ------
    NonFiniteRunError
        A NaN/inf loss; ``summary.json`` is written first (data kept).
    """
    t, st, ledger, model = s.run.train, s.state, s.state.ledger, s.model
    guided_logp = None if s.guide is None else guided_logprobs(  # l(y | x, hint); NaN on unguided rows
        model, batch, micro_batch_size=t.micro_batch_size, attention=s.update_config.attention, ledger=ledger)
    lr = s.scheduler.get_last_lr()[0]
    try:  # kl_init and entropy from the loss's own forward (+ one of pi_init), timed as "metrics"
        with_stats = s.init_model is not None and (st.update + 1) % t.stats_every == 0
        old_logp, old_seconds = None, 0.0
        if t.iterations > 1:  # pi_old for steps 2..mu (one no-grad forward, charged to training)
            t0 = time.perf_counter()
            old_logp = grpo_update.old_policy_logprobs(model, batch, s.update_config)
            old_seconds = time.perf_counter() - t0
            ledger.add_seconds("training", old_seconds)
        steps = [grpo_update.grpo_step(model, s.optimizer, batch, adv, s.update_config, ledger=ledger,
                                       old_logp=old_logp, sampler_logp=guided_logp,
                                       init_model=s.init_model if with_stats and k == 0 else None)
                 for k in range(t.iterations)]
    except grpo_update.NonFiniteLossError as e:
        msg = f"update {st.update + 1}: non-finite loss ({e}); the run stopped, data kept in {s.out}"
        finish(s, "non_finite_loss", {"failed_update": st.update + 1, "error": msg})
        raise NonFiniteRunError(msg, st.update + 1) from e
    step = {**steps[0], "trained_tokens": sum(x["trained_tokens"] for x in steps),
            "seconds": old_seconds + sum(x["seconds"] for x in steps)}
    if t.iterations > 1:
        step["iteration_losses"] = [x["loss"] for x in steps]
        step["iteration_grad_norms"] = [x["grad_norm"] for x in steps]
    s.scheduler.step()
    st.update += 1
    if s.push_weights is not None:  # the next rollouts come from the updated policy
        with ledger.timed("training"):
            push = s.push_weights(model)
        if isinstance(push, dict):  # VLLMSampler.push_weights' record (seconds are inside training's)
            step["weight_push"] = {k: push[k] for k in ("seconds", "bytes", "weight_version") if k in push}
    return lr, step


def charge_flops(s: RunSession, batch, step: dict, gen_before: dict[str, int]) -> dict[str, int]:
    """Charge the update's generation and training FLOPs; returns its generated tokens by category.

    FLOPs per token: :func:`gradprobe.ledger.forward_flops_per_token` at the batch's mean context.
    Generation: every new generated token but selection's (a selector charges its own FLOPs).
    Training: mu forward + backward passes (3x forward per trained token) and, with mu > 1, pi_old's forward.
    """
    ledger, iterations = s.state.ledger, s.run.train.iterations
    fpt = forward_flops_per_token(s.model, mean_context(batch))
    new_gen = {c: ledger.generated_tokens[c] - gen_before[c] for c in CHARGED}
    ledger.add_flops("generation", (sum(new_gen.values()) - new_gen["selection"]) * fpt)  # selection: own FLOPs
    ledger.add_flops("training", (3.0 * step["trained_tokens"] + (batch.generated_tokens if iterations > 1 else 0))
                     * fpt)
    return new_gen


def record_update(s: RunSession, batch, adv, rout, step: dict, *, lr: float, before: dict, new_gen: dict,
                  selection) -> dict:
    """Write the update's ``metrics.jsonl`` line (definitions: :mod:`gradprobe.training.metrics`) and
    return it; updates ``last_kl`` and ``last_cost`` (the update's compute by budget kind)."""
    run, st = s.run, s.state
    kl, entropy = step.get("kl_init"), step.get("entropy")
    st.last_kl = kl if kl is not None else st.last_kl
    spent = st.spent()
    st.last_cost = {k: spent[k] - before[k] for k in spent}
    stats = batch_stats(batch, s.task, adv, rout.valid)
    line = {
        "update": st.update, "lr": lr, **stats, "loss": step["loss"], "grad_norm": step["grad_norm"],
        "kl_init": kl, "kl_clamped_tokens": step.get("kl_clamped_tokens"), "entropy": entropy,
        **({k: step[k] for k in ("iteration_losses", "iteration_grad_norms")} if run.train.iterations > 1 else {}),
        "reward_stats": rout.stats, "update_generated_tokens": new_gen,
        "update_charged_tokens": st.last_cost["generated_tokens"],
        "update_device_seconds": st.last_cost["device_seconds"],
        "generated_tokens": spent["generated_tokens"], "device_seconds": spent["device_seconds"],
        "flops": spent["flops"], "ledger": st.ledger.to_dict(),
        **({"selection": selection} if selection is not None else {}),
        **({"guidance": guidance_stats(batch, step)} if s.guide is not None else {}),
        **({"weight_push": step["weight_push"]} if "weight_push" in step else {})}
    s.metrics.write(line)
    _warn_missing(run.reward, st.update, stats["reward_missing"], batch.num_rows)
    _warn_overflow(run.reward, st.update, rout.stats or {})
    # the batch's mean outcome score (the task's verifier), whatever reward is trained: a process reward's
    # advantages have no per-completion scalar to print
    outcome = "none" if stats["reward_mean"] is None else f"{stats['reward_mean']:.3f}"
    s.say(f"update {st.update}: outcome score {outcome} tokens {spent['generated_tokens']:,} "
          f"loss {step['loss']:.4g}" + (f" kl {kl:.3g}" if kl is not None else ""))
    return line


def _warn_missing(reward: str, update: int, missing: int, rows: int) -> None:
    """Warn (``RuntimeWarning``, one line per update) when the trained reward gave ``missing`` of the update's
    ``rows`` completions no reward (None, NaN or +-inf): they are masked, as ``gradprobe probe`` says of them
    (:func:`gradprobe.probe.result.diagnose`): advantage 0, so they add nothing to the update; ``metrics.jsonl``
    counts them in ``reward_missing``."""
    if missing:
        every = " (every completion: all of its advantages are 0)" if missing == rows else ""
        warnings.warn(f"update {update}: reward {reward!r}: {missing} of {rows} completions got no reward (None, NaN "
                      f"or +-inf, or masked by the reward){every}; they are masked (advantage 0, left out of their "
                      "group's mean and std), not scored 0; check the reward function", RuntimeWarning, stacklevel=2)


def _warn_overflow(reward: str, update: int, stats: dict) -> None:
    """Warn (``RuntimeWarning``) when some groups' rewards differed but overflowed float64 group statistics
    (:func:`gradprobe.grpo.advantages.group_normalize` gave them advantage 0: they did not train). For a hybrid that
    records its parts (:func:`gradprobe.forecast.overflow_parts.overflow_parts`) the warning names the part that
    overflowed: only its advantage is 0 in those groups, and the other part still trains those where its own values
    differ."""
    bad = int(stats.get("nonfinite_groups") or 0)
    if not bad:
        return
    parts = overflow_parts(stats)
    if parts is not None:
        big = stats.get("overflow_max_abs_reward")
        warnings.warn(f"update {update}: reward {reward!r}: "
                      f"{part_overflow_text(parts, stats.get('groups'), None if big is None else float(big))}; "
                      f"{part_rescale_text(parts)}", RuntimeWarning, stacklevel=2)
    else:
        warnings.warn(f"update {update}: reward {reward!r}: in {bad} of {stats.get('groups')} group(s) the rewards "
                      "differ but are too large for float64 group statistics (|reward| up to "
                      f"{stats.get('overflow_max_abs_reward')}); those groups got advantage 0 and did not train: "
                      "rescale the reward", RuntimeWarning, stacklevel=2)


@dataclass(frozen=True)
class _Stop:
    """How :func:`check_untrained_stop` stops a run for one cause (a key of
    :data:`gradprobe.training.untrained.CAUSES`): the ``stop_reason`` of ``summary.json``, the error raised, what the
    updates did (a format string: ``{which}`` the updates, ``{big}`` the largest |reward| that overflowed), what
    :data:`NO_VALID_REWARD_UPDATES` updates of it are, what ``metrics.jsonl`` keeps, and the fix (of the reward; given
    the reward's name and the update lines read, which name the parts of a hybrid that overflowed)."""
    reason: str
    error: type
    did: str
    updates: str
    kept: str
    fix: Callable[[str, list[dict]], str]


#: the causes that stop a run, in the order they are checked (:func:`check_untrained_stop`)
_STOPS = {
    "no_reward": _Stop(
        "no_valid_reward", NoValidRewardError,
        "returned None, NaN or +-inf for every completion (or marked none valid) of {which}: every advantage was 0 "
        "and nothing was trained, so", "updates without any reward", "reward_valid 0 on every update",
        lambda reward, lines: "fix the reward function (it must return a finite number for the completions it "
        "scores)"),
    "overflowed": _Stop(
        "reward_overflow", RewardOverflowError,
        "gave rewards too large for float64 group statistics (|reward| up to {big:.3g}): in {which} every group "
        "whose rewards differ overflowed (advantage 0) and no group trained, so nothing was trained and",
        "updates that train no group, with rewards that overflow,",
        "reward_stats: nonfinite_groups, overflow_max_abs_reward",
        lambda reward, lines: advice("overflowed", reward, lines=lines))}


def check_untrained_stop(s: RunSession, line: dict) -> None:
    """After an update (its ``metrics.jsonl`` line ``line`` written): stop a run that has trained nothing since its
    start, keyed by the cause (:data:`gradprobe.training.untrained.CAUSES`), once it has made
    :data:`NO_VALID_REWARD_UPDATES` updates or its budget is spent (updates counted from the run's start, those of
    earlier invocations of a resumed run included): every advantage was 0, and its evals would pass for a trained
    result. Two causes stop it, checked in this order (a run that shows both stops with ``"no_valid_reward"``):

    ``"no_reward"``   no update gave any completion a reward (:func:`gradprobe.training.untrained.unrewarded`:
                      ``reward_valid`` 0 on every update line); checked when ``line``'s ``reward_valid`` is 0.
    ``"overflowed"``  no update trained any group (``advantage_abs_mean`` 0 on every update line) and on some the
                      rewards overflowed float64 group statistics (:func:`gradprobe.training.untrained.cause`:
                      ``reward_stats.nonfinite_groups`` > 0, each group whose rewards differed got advantage 0,
                      :func:`gradprobe.grpo.advantages.group_normalize`); checked when ``line`` trained nothing and
                      either overflowed, is update :data:`NO_VALID_REWARD_UPDATES` or spent the budget.

    ``metrics.jsonl`` is read once, only when a cause is checked, up to its first line that rules both out
    (:func:`gradprobe.training.untrained.stop_history`); a file that cannot be read stops nothing, nor does one with a
    damaged line before the update of ``line`` (it may have been an update that trained: module docstring of
    :mod:`gradprobe.training.untrained`), and neither raises. A run in which some update had a reward and some
    update trained a group is never stopped here.

    Raises
    ------
    NoValidRewardError
        Cause ``"no_reward"``: one line naming the update, the reward, what the folder keeps and the fix (the reward
        function); ``summary.json`` is written first (``stop_reason = "no_valid_reward"``, ``failed_update``,
        ``error``; data kept).
    RewardOverflowError
        Cause ``"overflowed"`` (a NoValidRewardError): one line naming the update, the reward, the largest |reward|
        that overflowed, what the folder keeps and the fix (rescale the reward); ``summary.json`` is written first
        (``stop_reason = "reward_overflow"``, ``failed_update``, ``error``; data kept).
    """
    found = _untrained_cause(s, line)
    if found is None:
        return
    why, lines = found
    stop, run, u = _STOPS[why], s.run, s.state.update
    which = "update 1" if u == 1 else f"updates 1-{u}"
    done = stop.did.format(which=which, big=max_abs_reward(lines))
    n = NO_VALID_REWARD_UPDATES
    rule = "its budget is spent" if u < n else f"{n} {stop.updates} stop a run"
    msg = (f"update {u}: reward {run.reward!r} of arm {run.arm!r} {done} the run stopped ({rule}); {s.out} keeps "
           f"metrics.jsonl ({stop.kept}) and summary.json (stop_reason \"{stop.reason}\"); "
           f"{stop.fix(run.reward, lines)} and rerun with a new --out")
    finish(s, stop.reason, {"failed_update": u, "error": msg})
    raise stop.error(msg, u)


def _untrained_cause(s: RunSession, line: dict) -> tuple[str, list[dict]] | None:
    """The cause (a key of :data:`_STOPS`) that stops the run after the update of ``line``, with the update lines of
    ``metrics.jsonl`` read (:func:`gradprobe.training.untrained.stop_history`, one read); None when the run goes on
    (conditions: :func:`check_untrained_stop`)."""
    st, run = s.state, s.run
    unrewarded_now = not line.get("reward_valid", 1) > 0
    spent = exhausted(run.budget, st.ledger, st.update) is not None
    if st.update < NO_VALID_REWARD_UPDATES and not spent:
        return None
    overflow_now = trained(line) is False and (
        spent or st.update == NO_VALID_REWARD_UPDATES or cause([line]) == "overflowed")
    if not (unrewarded_now or overflow_now):
        return None
    history = stop_history(s.out / METRICS_JSONL)
    if history is None:
        return None
    lines, no_reward, untrained = history
    if unrewarded_now and no_reward:
        return "no_reward", lines
    if overflow_now and untrained and lines and cause(lines) == "overflowed":
        return "overflowed", lines
    return None


def warn_untrained(s: RunSession, line: dict) -> None:
    """After an update (its ``metrics.jsonl`` line ``line`` written): warn (``RuntimeWarning``, on stderr) when the
    last :data:`UNTRAINED_WARN_UPDATES` updates in a row trained no group, and once more when the row reaches ten
    times as many (the file's tail is read, :func:`gradprobe.training.untrained.untrained_tail`, so a resumed run
    counts its earlier updates); the warning names the cause (:func:`gradprobe.training.untrained.describe`: every
    group flat, every completion truncated at ``max_new_tokens``, the rewards overflowed, no reward) and what to
    change (:func:`gradprobe.training.untrained.advice`). The run goes on."""
    if trained(line) is not False:
        return
    k = UNTRAINED_WARN_UPDATES
    tail = untrained_tail(s.out / METRICS_JSONL, 10 * k + 1)
    if len(tail) not in (k, 10 * k):
        return
    n, u, tokens = len(tail), s.state.update, s.run.sampling.max_new_tokens
    again = f"said once more if it lasts {10 * k} updates" if n == k else "not said again for these updates"
    first = tail[0].get("update", u - n + 1)
    warnings.warn(f"updates {first}-{u}: no group trained in {n} updates in a row (every advantage 0): "
                  f"{describe(tail, tokens)}; {advice(cause(tail), s.run.reward, tokens, tail)}; the run goes on (GRPO "
                  f"learns only from groups whose rewards differ), {again}", RuntimeWarning, stacklevel=2)


def check_first_update(s: RunSession) -> None:
    """After update 1: stop a run whose token or FLOP budget is smaller than that one update's cost
    (a budget smaller than one update cannot compare arms).

    Raises
    ------
    BudgetTooSmallError
        Naming the budget (the command-line flag when it was shortened there) and the update's cost;
        ``summary.json`` is written first (``stop_reason = "budget_smaller_than_one_update"``, data kept).
    """
    run, spent = s.run, s.state.spent()
    over = {k: (v, spent[k]) for k, v in run.budget.given().items()
            if k in ("generated_tokens", "flops") and spent[k] > v}
    if not over:
        return
    msg = too_small_message(run, over, s.out)
    finish(s, "budget_smaller_than_one_update", {"error": msg})
    raise BudgetTooSmallError(msg)
