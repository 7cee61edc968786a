"""What a training run holds while it runs: its parts (built once) and its counters (checkpointed).

:class:`RunState` is every counter a checkpoint saves and a resume restores (the ledger, the update
count, the eval schedule's position, the byte lengths of the run's JSONL files); :class:`RunSession`
bundles it with the run's parts (policy, optimizer, samplers, reward, open files) so that the steps
of the loop (:mod:`gradprobe.training.update`, :mod:`gradprobe.training.records`) take one argument.
Budget arithmetic on the counters: :func:`spent`, :func:`exhausted`, :func:`crossed_eval_points`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..ledger import Ledger
from .metrics import MetricsFile
from .specs import BudgetSpec, EvalSpec, RunConfig

__all__ = ["spent", "exhausted", "crossed_eval_points", "resumed_invocations", "RunState", "RunSession",
           "INVOCATION_END"]

#: In the run folder: how the invocation running (or last run) there ended, ``{"from_update", "ended"}``, written
#: with ``ended`` null when it starts training and rewritten when it ends (:func:`gradprobe.training.records.
#: end_invocation`); still null on resume, the invocation was killed (SIGKILL, a power cut), as a study records.
INVOCATION_END = ".invocation.json"


def spent(ledger: Ledger, updates: int) -> dict[str, float]:
    """Compute spent so far, by budget kind (charged tokens, training seconds, FLOPs, updates).

    Every kind of work training needs counts (:data:`gradprobe.ledger.CHARGED_WORK`): generation,
    the update, prompt selection's own work (:mod:`gradprobe.difficulty.select`) and the reward's
    own compute (:func:`gradprobe.training.update.charged_reward`; a PRM's FLOPs)."""
    return {"generated_tokens": ledger.charged_tokens, "device_seconds": ledger.charged_seconds,
            "flops": ledger.charged_flops, "updates": updates}


def exhausted(budget: BudgetSpec, ledger: Ledger, updates: int) -> str | None:
    """The first budget kind (:data:`~gradprobe.training.specs.BUDGET_KINDS` order) already spent, or None."""
    now = spent(ledger, updates)
    for kind, limit in budget.given().items():
        if now[kind] >= limit:
            return kind
    return None


def crossed_eval_points(ev: EvalSpec, budget: BudgetSpec, spent: dict[str, float]) -> set[str]:
    """The budget-fraction eval points (``"KIND:FRACTION"``) that ``spent`` has reached.

    Parameters
    ----------
    ev : EvalSpec
        ``at_fractions`` of each set budget.
    budget : BudgetSpec
    spent : dict
        Compute spent so far by budget kind (:func:`spent`).
    """
    return {f"{kind}:{f:g}" for kind, limit in budget.given().items() for f in ev.at_fractions
            if spent[kind] >= f * limit}


@dataclass
class RunState:
    """The counters of a run, saved in every checkpoint and restored on resume.

    Attributes
    ----------
    ledger : Ledger
        Tokens, device-seconds and FLOPs so far, by category.
    update : int
        Updates done.
    next_eval : float
        Charged generated tokens at which the next ``every_tokens`` eval is due (inf: none).
    last_eval, last_ckpt : int or None
        Update of the last eval and of the last checkpoint.
    last_cost : dict
        Compute of the last update by budget kind (``summary.json``'s ``last_update_cost``).
    passed : set of str
        Budget-fraction eval points already evaluated (:func:`crossed_eval_points`).
    last_kl : float or None
        The last measured ``kl_init`` (carried onto eval lines).
    metrics_bytes, items_bytes : int
        Byte lengths of ``metrics.jsonl`` and ``eval_items.jsonl`` at the last checkpoint (a resume
        truncates the files to them).
    invocations : list of dict
        One entry per invocation of the run, the last being this one: ``from_update`` (the update it
        started from: 0, or the checkpoint it resumed), ``seconds`` (its wall time; this one's is filled
        in when saved), ``to_update`` and ``ended`` for earlier ones (:func:`resumed_invocations`).
    """

    ledger: Ledger = field(default_factory=Ledger)
    update: int = 0
    next_eval: float = 0
    last_eval: int | None = None
    last_ckpt: int | None = None
    last_cost: dict = field(default_factory=dict)
    passed: set = field(default_factory=set)
    last_kl: float | None = None
    metrics_bytes: int = 0
    items_bytes: int = 0
    invocations: list = field(default_factory=lambda: [{"from_update": 0, "seconds": 0.0}])

    def spent(self) -> dict[str, float]:
        """:func:`spent` of this run now."""
        return spent(self.ledger, self.update)

    @classmethod
    def from_checkpoint(cls, st: dict) -> "RunState":
        """The counters of a checkpoint's ``state.pt`` (:func:`gradprobe.training.records.save`)."""
        return cls(ledger=Ledger.from_dict(st["ledger"]), update=st["update"], next_eval=st["next_eval"],
                   last_eval=st["last_eval"], last_ckpt=st["update"], last_cost=st["last_cost"],
                   passed=set(st.get("eval_points_passed", [])), last_kl=st.get("last_kl"),
                   metrics_bytes=st["metrics_bytes"], items_bytes=st.get("items_bytes", 0),
                   invocations=[dict(x) for x in st.get("invocations", [])])

    def earlier_seconds(self) -> float:
        """Wall seconds of the run's earlier invocations (those before this one; unknown ones count 0)."""
        return float(sum(x.get("seconds") or 0.0 for x in self.invocations[:-1]))


def resumed_invocations(ckpt: dict, metrics_path: Path) -> list[dict]:
    """The run's invocations when it resumes from checkpoint state ``ckpt``, this new one last.

    The checkpoint records every invocation up to it, the one that saved it with its seconds at the
    save (``saved_at``: unix time). That invocation went on after the save until it was stopped (Ctrl-C,
    SIGTERM, SIGKILL, an error): its last ``metrics.jsonl`` line (read before the resume truncates
    the file) gives ``to_update`` and, with the file's modification time, the seconds it ran after
    the save, added to its ``seconds``. Its ``ended`` is what :data:`INVOCATION_END` recorded, in a study's words
    (:mod:`gradprobe.study.invocations`): ``"interrupted"`` (Ctrl-C), ``"terminated (SIGTERM)"``, a
    ``stop_reason`` of ``summary.json`` (``"non_finite_loss"``...), ``"stopped"`` (an exception), or ``"killed"``
    when no end was recorded (SIGKILL, a power cut); ``"stopped"`` too when the folder holds no record of that
    invocation (written by an older gradprobe, or by a later invocation killed before its first checkpoint). A
    checkpoint of an older gradprobe (no ``invocations``) gives one entry of unknown seconds (None).

    Parameters
    ----------
    ckpt : dict
        The checkpoint's ``state.pt`` (:func:`gradprobe.training.records.save`).
    metrics_path : Path
        The run's ``metrics.jsonl``.

    Returns
    -------
    list of dict
        Earlier invocations (``from_update``, ``to_update``, ``seconds``, ``ended``), then
        ``{"from_update": ckpt["update"], "seconds": 0.0}``.
    """
    at = int(ckpt["update"])
    earlier = [dict(x) for x in ckpt.get("invocations") or []] or [{"from_update": 0, "seconds": None}]
    last, to_update, after = earlier[-1], at, 0.0
    try:
        tail = metrics_path.read_bytes()[int(ckpt["metrics_bytes"]):].decode("utf-8", "replace")
        updates = [json.loads(x)["update"] for x in tail.splitlines() if x.strip() and '"eval": true' not in x]
        to_update = max([at, *updates])
        saved_at = ckpt.get("saved_at")
        if saved_at is not None and tail.strip():
            after = max(0.0, metrics_path.stat().st_mtime - float(saved_at))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if last.get("seconds") is not None:
        last["seconds"] = float(last["seconds"]) + after
    last.update(to_update=to_update, ended=_recorded_end(metrics_path.parent / INVOCATION_END, last))
    return [*earlier, {"from_update": at, "seconds": 0.0}]


def _recorded_end(path: Path, last: dict) -> str:
    """How invocation ``last`` ended by the record ``path`` (:data:`INVOCATION_END`): its ``ended``, ``"killed"``
    when that is null, ``"stopped"`` when the record is missing, unreadable, another invocation's, or its ``ended``
    is no text."""
    try:
        mark = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "stopped"
    if not isinstance(mark, dict) or mark.get("from_update") != last.get("from_update"):
        return "stopped"
    ended = mark.get("ended")
    if "ended" in mark and ended is None:  # recorded as training, never as ended: killed (SIGKILL, a power cut)
        return "killed"
    return ended if isinstance(ended, str) and ended else "stopped"


@dataclass
class RunSession:
    """One training run in progress: its config, its parts, its counters and its open files.

    Built by :func:`gradprobe.training.run.run_training`; every part is fixed for the run except
    ``state`` (the counters) and the weights inside ``policy`` and ``optimizer``.

    Attributes
    ----------
    run : RunConfig
    out : Path
        The run folder.
    policy, task
        The policy being trained (``policy.model``, ``policy.tokenizer``) and the task.
    reward_fn : callable(RolloutBatch, RewardContext) -> RewardOutput
        The arm's registered reward.
    pool, heldout : list of Problem
        The training pool and the held-out set; ``heldout_ids`` the held-out prompts' token ids.
    optimizer, scheduler
        AdamW and its warmup schedule (one scheduler step per update).
    update_config : UpdateConfig
        Settings of :func:`gradprobe.grpo.step.grpo_step`.
    collect : callable
        Rollout collection (plain, or guided with ``guide``).
    sampler, continuation_sampler
        The rollout stream and the MC continuations' stream (:mod:`gradprobe.streams`).
    selector : PromptSelector
        The arm's prompt-selection rule (:mod:`gradprobe.difficulty.select`); ``plain`` = the plain prompt stream.
    guide : GuidanceConfig or None
        Off-context guidance (:mod:`gradprobe.rollout.guided`).
    init_model : optional
        Frozen copy of the initial weights for ``kl_init`` (None when ``stats_every = 0``).
    push_weights : callable(model) or None
        The sampler's after-update hook (an engine with its own copy of the weights, vLLM).
    say : callable(str)
        Progress lines (stderr, or nothing).
    wall : float
        ``time.perf_counter()`` at the start of this invocation (``summary.json``'s ``invocation_wall_seconds``).
    metrics, items : MetricsFile
        ``metrics.jsonl`` and ``eval_items.jsonl``, open for appending (None until opened).
    """

    run: RunConfig
    out: Path
    policy: Any
    task: Any
    reward_fn: Callable
    pool: list
    heldout: list
    heldout_ids: list
    optimizer: Any
    scheduler: Any
    update_config: Any
    collect: Callable
    sampler: Any
    continuation_sampler: Any
    selector: Any
    guide: Any
    init_model: Any
    push_weights: Callable | None
    say: Callable[[str], None]
    wall: float
    state: RunState = field(default_factory=RunState)
    metrics: MetricsFile | None = None
    items: MetricsFile | None = None

    @property
    def model(self):
        """The policy's ``torch.nn.Module``."""
        return self.policy.model
