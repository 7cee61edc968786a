"""Prompt difficulty (DESIGN.md, "Prompt difficulty"): predicted success per prompt, selection nearest 1/2.

``features``   mean-pooled last hidden state of each prompt (one batched forward, charged as
               ``selection``) and prompt metadata;
``estimator``  logistic model on observed outcomes + decayed Beta-Bernoulli posterior per prompt,
               the ranking by |p_hat - 1/2| and the rule "candidates predicted to fail more often than not";
``config``     an arm's selection settings and the registry of selection rules
               (:data:`~gradprobe.difficulty.config.SELECTION_RULE_CLASSES`: ``plain``, ``half``,
               ``random``, ``dynamic``, ``greso``);
``select``     the rules inside a training run (:class:`~gradprobe.difficulty.select.PromptSelector`),
               each rule in its own module: ``select_plain`` (the plain prompt stream),
               ``select_estimated`` (select_half and its random placebo),
               ``select_dynamic`` (DAPO dynamic sampling), ``select_greso`` (GRESO pre-rollout
               filtering; the filter in ``greso``), the shared rollout steps in ``select_common``;
``evaluate``   the held-out evaluation of p_hat vs empirical success, with baselines; the scores
               (Brier, AUC, Spearman, each with a bootstrap interval over eval prompts, reliability,
               flat-group AUC) in ``metrics``, the diagram in ``reliability_plot``;
``rank``       ranking a pool nearest 1/2 first (the work of ``gradprobe rank-prompts`` and
               ``gradprobe.rank_prompts``) and the commands' settings with their defaults; its
               compute (torch, pandas) in ``rank_pool``, the pool encoded and its features streamed in
               ``pool_stream``, each p_hat's 90% intervals in ``intervals``, the held-out fit quality in
               ``fit_quality``, rank.json and the console lines in ``rank_report``, the pool-building
               progress line in ``progress``;
``cli``        ``gradprobe rank-prompts`` and ``gradprobe difficulty-eval`` (argv parsing, printing).

Importing this package imports neither torch nor scikit-learn.
"""

from .config import SELECTION_KEYS, SELECTION_RULES, SelectionConfig, parse_selection
from .estimator import (DegenerateOutcomesWarning, DifficultyEstimator, DuplicatePromptError, EstimatorConfig,
                        check_unique_ids, rank_half, verdict)

__all__ = ["SELECTION_KEYS", "SELECTION_RULES", "SelectionConfig", "parse_selection", "DegenerateOutcomesWarning",
           "DifficultyEstimator", "DuplicatePromptError", "EstimatorConfig", "check_unique_ids", "rank_half", "verdict"]
