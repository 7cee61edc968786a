"""What a training run leaves in its folder besides the update lines: evals on the plan's schedule
(``metrics.jsonl`` eval lines and ``eval_items.jsonl``), checkpoints, and ``summary.json``.

Each function takes the run's :class:`~gradprobe.training.state.RunSession`; file names come from
:mod:`gradprobe.layout`.
"""

from __future__ import annotations

import json
import math
import time

from ..layout import METRICS_JSONL, SUMMARY_JSON
from ..outputs import json_safe, write_json_atomic
from .checkpoint import rng_states, save_checkpoint
from .metrics import evaluate
from .state import INVOCATION_END, RunSession, crossed_eval_points, exhausted

__all__ = ["maybe_eval", "save", "finish", "start_invocation", "end_invocation", "record_end"]


def maybe_eval(s: RunSession, force: bool = False) -> None:
    """Evaluate on the held-out set if the schedule says so now (:class:`~gradprobe.training.specs.EvalSpec`).

    Due at update 0, at a listed update, at a newly crossed budget fraction, every ``every_tokens``
    charged tokens, and with ``force`` (the end); never twice at one update. Writes one eval line to
    ``metrics.jsonl`` (with the compute spent so far and the last ``kl_init``) and the per-item results
    to ``eval_items.jsonl``; eval tokens and seconds go to the ledger's ``eval`` category, never to a
    budget. Sampled accuracy is measured at every eval, or only at update 0 and at the end
    (``sampled_at = "ends"``).
    """
    run, st = s.run, s.state
    crossed = crossed_eval_points(run.eval, run.budget, st.spent()) - st.passed
    due = force or crossed or st.update in run.eval.at_updates or st.ledger.charged_tokens >= st.next_eval
    if st.last_eval == st.update or not due:
        st.passed.update(crossed)
        return
    final = force or exhausted(run.budget, st.ledger, st.update) is not None
    res = evaluate(s.policy, s.task, s.heldout, s.heldout_ids, run, st.ledger,
                   sampled=run.eval.sampled_at == "all" or st.update == 0 or final)
    items = res.pop("items")
    spent = st.spent()
    point = {"update": st.update, "generated_tokens": spent["generated_tokens"],
             "device_seconds": spent["device_seconds"], "flops": spent["flops"]}
    s.metrics.write({"eval": True, **point, **res, "kl_init": st.last_kl})
    s.items.write({**point, **items})
    s.say(f"eval at update {st.update}: greedy {res['greedy_accuracy']} sampled {res['sampled_accuracy']}")
    st.last_eval = st.update
    st.passed.update(crossed)
    every = run.eval.every_tokens
    while every and st.next_eval <= st.ledger.charged_tokens:
        st.next_eval += every
    if not every:
        st.next_eval = math.inf


def save(s: RunSession) -> None:
    """Checkpoint the run now (:func:`gradprobe.training.checkpoint.save_checkpoint`): the weights, and
    the optimizer, scheduler, RNG states, sampler counters, prompt selector and every :class:`RunState`
    counter, with both JSONL files fsynced and their byte lengths recorded.

    Raises
    ------
    OutputDirError
        The write failed; the previous checkpoint stays current.
    """
    st = s.state
    state = {"optimizer": s.optimizer.state_dict(), "scheduler": s.scheduler.state_dict(), "rng": rng_states(),
             "sampler_calls": s.sampler.calls, "continuation_sampler_calls": s.continuation_sampler.calls,
             "items_bytes": s.items.sync(), "eval_points_passed": sorted(st.passed), "last_kl": st.last_kl,
             "ledger": st.ledger.to_dict(), "update": st.update,
             "next_eval": st.next_eval, "last_eval": st.last_eval, "last_cost": st.last_cost,
             "metrics_bytes": s.metrics.sync(),
             "selector": s.selector.state_dict() if s.selector is not None else None,
             "invocations": _invocations(s), "saved_at": time.time()}
    save_checkpoint(s.out, st.update, s.model, state)
    st.last_ckpt = st.update


def _invocations(s: RunSession, ended: str | None = None) -> list[dict]:
    """The run's invocations (:attr:`RunState.invocations`) with this one's wall seconds so far (and
    ``to_update``, ``ended`` when given)."""
    *earlier, now = s.state.invocations
    now = {**now, "seconds": time.perf_counter() - s.wall}
    if ended is not None:
        now.update(to_update=s.state.update, ended=ended)
    return [*earlier, now]


def finish(s: RunSession, reason: str, extra: dict | None = None, completed: bool = False) -> dict:
    """Write ``summary.json`` (written last: a folder with a completed one is a finished run) and return it.

    Parameters
    ----------
    reason : str
        ``stop_reason``: ``"budget"``, ``"non_finite_loss"``, ``"policy_diverged"`` (NaN/inf sampling
        probabilities), ``"no_valid_reward"`` (the reward gave no completion of any update a reward:
        :func:`~gradprobe.training.update.check_untrained_stop`; ``"reward_overflow"``: the rewards overflowed and
        nothing trained), ``"budget_smaller_than_one_update"``, ``"write_error"``.
    extra : dict, optional
        Added keys (``budget_spent``, ``error``, ``failed_update``).
    completed : bool
        The run spent its budget (a rerun returns this summary instead of training).

    Returns
    -------
    dict
        Stop reason, updates, first and last eval lines, final greedy and sampled accuracy, the budget
        (and its command-line override), compute spent, overshoot past each budget (same units),
        the last update's cost, the ledger, the last checkpoint, the continuation share of charged
        tokens, and the wall time: ``wall_seconds`` (every invocation of the run together: a run
        stopped and resumed counts the stopped invocations' time too, up to their last
        ``metrics.jsonl`` line), ``invocation_wall_seconds`` (this invocation alone),
        ``resumed_from_update`` (the checkpoint update each resume started from; [] for a run that
        ran in one go) and ``invocations`` (:attr:`~gradprobe.training.state.RunState.invocations`,
        each with ``from_update``, ``to_update``, ``seconds`` and how it ``ended``).
    """
    run, st = s.run, s.state
    spent = st.spent()
    evals = [json.loads(x) for x in (s.out / METRICS_JSONL).read_text().splitlines() if '"eval": true' in x]
    summary = {"completed": completed, "stop_reason": reason, "updates": st.update,
               "initial": evals[0] if evals else None, "final": evals[-1] if evals else None,
               "final_greedy_accuracy": evals[-1]["greedy_accuracy"] if evals else None,
               "final_sampled_accuracy": evals[-1]["sampled_accuracy"] if evals else None,
               "budget": run.budget.given(), "budget_override": run.budget_override, "spent": spent,
               "overshoot": {k: spent[k] - v if spent[k] > v else 0 for k, v in run.budget.given().items()},
               "last_update_cost": st.last_cost, "ledger": st.ledger.to_dict(), "last_checkpoint": st.last_ckpt,
               "continuation_share": st.ledger.share("continuation"),
               **_wall(s, reason), **(extra or {})}
    write_json_atomic(s.out / SUMMARY_JSON, json_safe(summary))
    record_end(s, None if completed else reason)
    return summary


def record_end(s: RunSession, ended: str | None) -> None:
    """Record how this invocation ended in ``DIR/.invocation.json`` (:data:`~gradprobe.training.state.INVOCATION_END`)
    or, with ``ended`` None (a completed run, never resumed), delete it. A write error is ignored: the record only
    names the end in a later resume's ``invocations`` (``"stopped"`` without it)."""
    path = s.out / INVOCATION_END
    try:
        if ended is None:
            path.unlink(missing_ok=True)
        else:
            write_json_atomic(path, {"from_update": s.state.invocations[-1]["from_update"], "ended": ended})
    except OSError:
        pass


def start_invocation(s: RunSession) -> None:
    """Record that this invocation is training (``ended`` null in ``DIR/.invocation.json``): found so by the next
    resume, it was killed (:func:`~gradprobe.training.state.resumed_invocations`)."""
    path = s.out / INVOCATION_END
    try:
        write_json_atomic(path, {"from_update": s.state.invocations[-1]["from_update"], "ended": None})
    except OSError:
        pass


def end_invocation(s: RunSession, error: BaseException) -> None:
    """Record how this invocation ended on ``error`` (raised out of the training loop), in a study's words
    (:mod:`gradprobe.study.invocations`): ``"interrupted"`` (Ctrl-C), ``"terminated (SIGTERM)"`` (the CLI's
    ``Terminated``), else ``"stopped"`` (an exception: a reward's error, a test's simulated kill); an end
    :func:`finish` recorded first (a ``stop_reason``) is kept."""
    try:
        if json.loads((s.out / INVOCATION_END).read_text(encoding="utf-8")).get("ended"):
            return
    except (OSError, ValueError, AttributeError):
        pass
    if isinstance(error, KeyboardInterrupt):
        ended = "interrupted"
    elif type(error).__name__ == "Terminated":  # gradprobe.cli.probe.Terminated: the CLI's SIGTERM
        ended = "terminated (SIGTERM)"
    else:
        ended = "stopped"
    record_end(s, ended)


def _wall(s: RunSession, reason: str) -> dict:
    """``summary.json``'s wall-time keys (see :func:`finish`)."""
    invocations = _invocations(s, ended=reason)
    mine = invocations[-1]["seconds"]
    return {"wall_seconds": s.state.earlier_seconds() + mine, "invocation_wall_seconds": mine,
            "resumed_from_update": [x["from_update"] for x in invocations[1:]], "invocations": invocations}
