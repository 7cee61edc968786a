"""Preregistered matched-compute studies: many arms and seeds of a plan under one budget.

``runner``    :func:`run_study` (``gradprobe study PLAN --out DIR``): frozen plan, executors, probe, ``runs.csv``;
``analysis``  :func:`analyze`: accuracy at matched updates/tokens/device-seconds, paired bootstrap over
              seeds, ScaleRL sigmoid fits, rankings, hypotheses, figures.
"""

from .analysis import AnalysisError, analyze, fit_sigmoid, format_rankings, interpolate, paired_bootstrap
from .runner import PlanChangedError, StudyError, StudyResult, freeze_plan, run_dir, run_study, write_runs_csv

__all__ = ["AnalysisError", "PlanChangedError", "StudyError", "StudyResult", "analyze", "fit_sigmoid",
           "format_rankings", "freeze_plan", "interpolate", "paired_bootstrap", "run_dir", "run_study",
           "write_runs_csv"]
