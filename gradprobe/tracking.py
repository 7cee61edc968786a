"""Experiment tracking: a training run's ``metrics.jsonl`` lines, sent to TensorBoard, Trackio or W&B as well.

``gradprobe train ... --report-to tensorboard|trackio|wandb|none`` and ``gradprobe study ... --report-to ...``
(default ``none``). ``metrics.jsonl`` stays the record every analysis reads; a tracker only mirrors it,
line by line, as it is written (:class:`gradprobe.training.metrics.MetricsFile`), so what a dashboard
shows is exactly what the file holds.

What is logged, at step = the line's ``update`` (updates done; 0 is the initial eval):

- an update line: every number under ``train/`` (``train/reward_mean``, ``train/loss``, ``train/kl_init``,
  nested dicts flattened with ``/``: ``train/update_generated_tokens/rollout``, ``train/reward_stats/...``),
  and the run's token ledger under ``ledger/`` (``ledger/generated_tokens/rollout`` (tokens),
  ``ledger/charged_generated_tokens``, ``ledger/flops/training``, ``ledger/device_seconds/generation``...);
- an eval line (``"eval": true``): every number under ``eval/`` (``eval/greedy_accuracy`` (fraction),
  ``eval/generated_tokens`` (charged tokens at the eval), ``eval/eval_tokens``...).

Booleans, strings, lists and missing values (None, NaN) are not logged (:func:`metrics_scalars`).

Back-ends, each imported only when chosen (:data:`REPORT_TO`):

``tensorboard`` ``torch.utils.tensorboard.SummaryWriter`` writing event files into the run's tracking
                folder (``RUN/tb``; in a study ``STUDY/tb/<arm>/seed<N>``, so ``tensorboard --logdir STUDY/tb``
                shows every run by name). Scalars are stored in double precision (token and FLOP counts
                exceed float32's 24-bit mantissa). A resumed run purges the events after its checkpoint
                (``purge_step``), so re-done updates are not shown twice. Offline by nature.
``trackio``     ``trackio.init(project, name, group, config)`` / ``trackio.log(..., step=)``: a local SQLite
                store (Trackio's own folder, ``TRACKIO_DIR``), offline unless a Space is configured.
``wandb``       ``wandb.init(..., dir=tracking folder, mode="offline")``: offline unless ``WANDB_MODE`` is set
                (then W&B's own setting applies); ``wandb sync`` uploads an offline run later.

Project = the plan's name, run name = ``<arm>-seed<N>``, group = the first 12 hex digits of the plan's
sha256 (the runs of one frozen plan, i.e. one study).

A chosen tracker that is not installed raises :class:`TrackerUnavailableError` (naming the flag and
the pip command) from :func:`require_tracker`, which ``gradprobe train`` and ``gradprobe study`` call
before anything is loaded, written or trained.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from pathlib import Path

__all__ = ["REPORT_TO", "Tracker", "TrackerUnavailableError", "metrics_scalars", "require_tracker", "open_tracker"]

#: --report-to values -> (module to import, pip command that installs it); ``none`` logs nothing.
REPORT_TO = {
    "none": (None, None),
    "tensorboard": ("torch.utils.tensorboard", "pip install tensorboard"),
    "trackio": ("trackio", "pip install trackio"),
    "wandb": ("wandb", "pip install wandb"),
}


class TrackerUnavailableError(ImportError, ValueError):
    """The tracker named by ``--report-to`` is unknown or not installed (the message says the fix).

    An ``ImportError`` (a library is missing) and a ``ValueError`` (bad command-line input, which
    ``gradprobe train``/``study`` report as an error with exit status 2)."""


def require_tracker(report_to: str | None) -> None:
    """Check that ``report_to``'s library imports; call before any compute.

    Parameters
    ----------
    report_to : {"none", "tensorboard", "trackio", "wandb"} or None
        None is ``"none"``.

    Raises
    ------
    TrackerUnavailableError
        An unknown name (the valid ones are listed), or a library that is not installed (the
        message names ``--report-to`` and the ``pip install`` command, or ``--report-to none``).
    """
    name = report_to or "none"
    if name not in REPORT_TO:
        raise TrackerUnavailableError(f"--report-to {name!r}: unknown tracker; choose one of {', '.join(REPORT_TO)}")
    module, pip = REPORT_TO[name]
    if module is None:
        return
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise TrackerUnavailableError(
            f"--report-to {name}: {name} is not installed ({e}); install it with `{pip}` into this environment, "
            f"or use --report-to none") from e


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}/{k}", v, out)
    elif isinstance(value, (int, float)):
        if math.isfinite(float(value)):
            out[prefix] = float(value)


def metrics_scalars(line: dict) -> dict[str, float]:
    """The scalars of one ``metrics.jsonl`` line, as a tracker logs them.

    Parameters
    ----------
    line : dict
        An update line or an eval line (``"eval": true``) of
        :func:`gradprobe.training.run.run_training`.

    Returns
    -------
    dict[str, float]
        ``train/<key>`` (update line) or ``eval/<key>`` (eval line) for every finite number, nested
        dicts flattened with ``/``; an update line's ``ledger`` goes to ``ledger/<key>``. Not
        included: ``update`` (it is the step), ``eval`` (the marker), booleans, strings, lists,
        None and non-finite numbers.
    """
    prefix = "eval" if line.get("eval") is True else "train"
    out: dict[str, float] = {}
    for key, value in line.items():
        if key in ("update", "eval"):
            continue
        _flatten("ledger" if key == "ledger" else f"{prefix}/{key}", value, out)
    return out


class Tracker:
    """A destination for a run's metrics: :meth:`log` scalars at a step, :meth:`close` at the end.

    Subclasses implement :meth:`log` and :meth:`close`; :meth:`log_line` turns a ``metrics.jsonl``
    line into scalars (:func:`metrics_scalars`) at step ``line["update"]``.
    """

    def log(self, scalars: dict[str, float], step: int) -> None:  # pragma: no cover - interface
        """Record ``scalars`` (tag -> value) at ``step`` (updates done)."""
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        """Flush and release the back-end; idempotent."""
        raise NotImplementedError

    def log_line(self, line: dict) -> None:
        """Log one ``metrics.jsonl`` line (see the module docstring for the tags)."""
        scalars = metrics_scalars(line)
        if scalars:
            self.log(scalars, int(line["update"]))


class TensorBoardTracker(Tracker):
    """Event files of ``torch.utils.tensorboard.SummaryWriter`` in ``log_dir``.

    Parameters
    ----------
    log_dir : path
    config : dict
        Written once as the text summary ``config`` (JSON) at step 0.
    start_step : int
        The first step this writer logs: events of an earlier attempt at steps >= it are purged
        (``SummaryWriter(purge_step=...)``): 0 for a fresh run, checkpoint update + 1 on resume.
    """

    def __init__(self, log_dir, *, config: dict, start_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=int(start_step))
        if start_step == 0:
            self.writer.add_text("config", "```\n" + json.dumps(config, indent=1) + "\n```", global_step=0)

    def log(self, scalars: dict[str, float], step: int) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, global_step=step, new_style=True, double_precision=True)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


class TrackioTracker(Tracker):
    """A Trackio run (``trackio.init`` / ``trackio.log(step=)`` / ``trackio.finish``), local by default."""

    def __init__(self, *, project: str, name: str, group: str, config: dict):
        import trackio

        self.trackio = trackio
        trackio.init(project=project, name=name, group=group, config=config)
        self.open = True

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.trackio.log(scalars, step=step)

    def close(self) -> None:
        if self.open:
            self.trackio.finish()
            self.open = False


class WandbTracker(Tracker):
    """A W&B run in ``log_dir``, offline unless ``WANDB_MODE`` is set (``wandb sync`` uploads it later)."""

    def __init__(self, log_dir, *, project: str, name: str, group: str, config: dict):
        import wandb

        Path(log_dir).mkdir(parents=True, exist_ok=True)
        kwargs = {} if os.environ.get("WANDB_MODE") else {"mode": "offline"}
        self.run = wandb.init(project=project, name=name, group=group, config=config, dir=str(log_dir), **kwargs)

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


def open_tracker(report_to: str | None, log_dir, *, run, start_step: int = 0) -> Tracker | None:
    """The tracker of one training run, or None for ``none``.

    Parameters
    ----------
    report_to : {"none", "tensorboard", "trackio", "wandb"} or None
    log_dir : path
        The run's tracking folder (TensorBoard event files, W&B's ``wandb/`` folder); created.
    run : RunConfig
        Names the run (``plan_name``, ``arm``, ``seed``, ``plan_sha256``); logged as its config.
    start_step : int
        The first update whose lines this attempt logs (0 fresh; checkpoint update + 1 resumed).

    Raises
    ------
    TrackerUnavailableError
        As :func:`require_tracker`.
    """
    require_tracker(report_to)
    if (report_to or "none") == "none":
        return None
    config = run.to_dict()
    names = {"project": run.plan_name or "gradprobe", "name": f"{run.arm}-seed{run.seed}",
             "group": (run.plan_sha256 or "")[:12] or None, "config": config}
    if report_to == "tensorboard":
        return TensorBoardTracker(log_dir, config=config, start_step=start_step)
    if report_to == "trackio":
        return TrackioTracker(**names)
    return WandbTracker(log_dir, **names)
