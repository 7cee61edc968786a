"""Run a preregistered matched-compute study (``gradprobe study PLAN --out DIR``): the names of the study
runner in one place, each defined in the module of its one job (issue 15):

===========================================  ==================================================================
:mod:`~gradprobe.study.orchestrator`         :func:`run_study`: check, freeze, dispatch, record, analyse (the
                                             whole flow is described there)
:mod:`~gradprobe.study.freeze`               :func:`freeze_plan`: the plan frozen in the study folder
:mod:`~gradprobe.study.folder`               :class:`StudyError`, :class:`PlanChangedError`, locks,
                                             :func:`run_status`, :func:`finished_runs`
:mod:`~gradprobe.study.probe_plan`           :func:`probe_settings`, :func:`arms_table`: the plan as a probe
:mod:`~gradprobe.study.worker`               :func:`execute_task`: one run or the probe, in a worker
:mod:`~gradprobe.study.executors`            :data:`EXECUTORS`: local process pool, Ray, inline
:mod:`~gradprobe.study.collect`              :func:`write_runs_csv`, :func:`write_eval_items`
:mod:`~gradprobe.study.result`               :class:`StudyResult`, :class:`StudyInterrupted`,
                                             :func:`progress_line`
:mod:`~gradprobe.study.replicate`            :func:`replicate_study`, :func:`compare_replicate`
:mod:`gradprobe.layout`                      every file name and the ``runs.csv`` schema
===========================================  ==================================================================

Every name is re-exported here, so ``from gradprobe.study.runner import run_study`` (and the others)
keeps working.
"""

from __future__ import annotations

from ..layout import EVAL_ITEMS_GZ, PLAN_COPY, RUNS_CSV, RUNS_CSV_COLUMNS, STUDY_JSON, run_dir
from .collect import collect_runs, write_eval_items, write_runs_csv
from .executors import EXECUTORS, POLL_SECONDS, STOP_GRACE_SECONDS, default_workers
from .folder import PlanChangedError, StudyError, finished_runs, run_status
from .freeze import STUDY_OUTPUTS, freeze_plan
from .orchestrator import run_study
from .probe_plan import PROBE_DEFAULTS, arms_table, probe_settings
from .replicate import REPLICATE_SOURCE, compare_replicate, replicate_plan_text, replicate_study
from .result import StudyInterrupted, StudyResult, progress_line
from .worker import execute_task

__all__ = ["EVAL_ITEMS_GZ", "EXECUTORS", "PLAN_COPY", "POLL_SECONDS", "PROBE_DEFAULTS", "REPLICATE_SOURCE",
           "RUNS_CSV", "RUNS_CSV_COLUMNS", "STOP_GRACE_SECONDS", "STUDY_JSON", "STUDY_OUTPUTS", "PlanChangedError",
           "StudyError", "StudyInterrupted", "StudyResult", "arms_table", "collect_runs", "compare_replicate",
           "default_workers", "execute_task", "finished_runs", "freeze_plan", "probe_settings", "progress_line",
           "replicate_plan_text", "replicate_study", "run_dir", "run_status", "run_study", "write_eval_items",
           "write_runs_csv"]
