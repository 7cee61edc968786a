"""Prompt difficulty (DESIGN.md, "Prompt difficulty"): predicted success per prompt, selection nearest 1/2.

``features``   mean-pooled last hidden state of each prompt (one batched forward, charged as
               ``selection``) and prompt metadata;
``estimator``  logistic model on observed outcomes + decayed Beta-Bernoulli posterior per prompt,
               the ranking by |p_hat - 1/2| and the rule "candidates predicted to fail more often than not";
``config``     an arm's selection settings (``selection = "half" | "random" | "dynamic"``);
``select``     the selection rules inside a training run (select_half, random placebo, DAPO dynamic sampling);
``evaluate``   Brier, AUC, Spearman and the reliability diagram vs empirical success, with baselines;
``rank``       ranking a pool nearest 1/2 first (the work of ``gradprobe rank-prompts`` and
               ``gradprobe.rank_prompts``) and the commands' settings with their defaults;
``cli``        ``gradprobe rank-prompts`` and ``gradprobe difficulty-eval`` (argv parsing, printing).

Importing this package imports neither torch nor scikit-learn.
"""

from .config import SELECTION_KEYS, SELECTION_RULES, SelectionConfig, parse_selection
from .estimator import (DegenerateOutcomesWarning, DifficultyEstimator, DuplicatePromptError, EstimatorConfig,
                        check_unique_ids, rank_half, verdict)

__all__ = ["SELECTION_KEYS", "SELECTION_RULES", "SelectionConfig", "parse_selection", "DegenerateOutcomesWarning",
           "DifficultyEstimator", "DuplicatePromptError", "EstimatorConfig", "check_unique_ids", "rank_half", "verdict"]
