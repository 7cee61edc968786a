"""Preregistered matched-compute studies: many arms and seeds of a plan under one budget.

``runner``    :func:`run_study` (``gradprobe study PLAN --out DIR``): frozen plan, executors, probe, ``runs.csv``;
``analysis``  :func:`analyze`: accuracy at matched updates/tokens/FLOPs/device-seconds read within the promised
              eval interval, paired t and exact sign-flip tests over seeds, a bootstrap over seeds x held-out
              items, Holm-corrected hypotheses, ScaleRL sigmoid fits, side effects, rankings, figures;
``stats``     the statistics; ``power``: :func:`power_analysis` (``gradprobe study --power PLAN``).
"""

from .analysis import AnalysisError, analyze, fit_sigmoid, format_rankings, interpolate, load_eval_items
from .power import power_analysis
from .runner import PlanChangedError, StudyError, StudyResult, freeze_plan, run_dir, run_study, write_runs_csv
from .stats import paired_t, sign_flip_test, two_way_bootstrap

__all__ = ["AnalysisError", "PlanChangedError", "StudyError", "StudyResult", "analyze", "fit_sigmoid",
           "format_rankings", "freeze_plan", "interpolate", "load_eval_items", "paired_t", "power_analysis", "run_dir",
           "run_study", "sign_flip_test", "two_way_bootstrap", "write_runs_csv"]
