"""gradprobe: is an RLVR training intervention worth its compute?

Two answers, as defined in ``DESIGN.md`` of the project:

* a cheap one, the *probe*: per-token alignment of each reward's policy-gradient
  update with a reference update, computed for all tokens and all rewards in one
  forward-mode pass (``torch.func.jvp``);
* an expensive one, matched-compute GRPO runs (ground truth).

Data flows one way: task -> rollouts -> rewards (advantages) -> probe or update ->
records -> analysis. Nothing runs at import time.

Public API (README, "Python API"), imported on first use so that ``import gradprobe`` loads
neither torch nor pandas (PEP 562 module ``__getattr__``):

* :func:`probe` ``(model, task, rewards=[...], **settings) -> ProbeResult`` (``gradprobe probe``;
  ``gradprobe.probe`` is also the probe subpackage, made callable), :class:`ProbeResult`
  (``.table``, ``.alignment`` (N, T), ``.tokens()``, ``.write(dir)``, ``.raw``), :func:`load_probe`;
* :func:`load_plan`, :class:`Study` ``(plan, out).run(executor=...)`` (``gradprobe study``),
  :func:`load_study` ``-> StudyResult`` (``.plan``, ``.runs``, ``.analysis``, ``.probe``),
  :func:`train` (``gradprobe train``);
* :func:`rank_prompts` (``gradprobe rank-prompts``) ``-> DataFrame``;
* :func:`register_reward`, :func:`sequence_reward` (a TRL-style reward function as a reward);
* the pieces a custom reward or a difficulty evaluation is built from: :func:`load_policy` (a model alias,
  folder, ``.gguf`` or hub id -> ``Policy``), :func:`load_task` (a task spec -> ``Task``: ``.problems(split,
  n, seed=)``, ``.score(completion, problem)``), :class:`SamplingConfig`, the task verifier's two halves
  :func:`extract_answer` (the final answer after ``####`` or in ``\\boxed{}``) and :func:`answers_match`
  (exact comparison with the gold answer), and ``gradprobe difficulty-eval``'s three steps
  :func:`prompt_features` ``(policy, problems) -> (M, F)``, :func:`sample_outcomes` ``(policy, task,
  problems, samples=S, sampling=) -> (M, S)`` 0/1 outcomes and :func:`evaluate_difficulty` (Brier, AUC,
  Spearman rho and reliability of p_hat against held-back outcomes;
  ``gradprobe.difficulty.evaluate.evaluate_estimator``).
"""

import importlib as _importlib

__version__ = "0.1.0"

#: Public name -> (module, attribute); attribute None: the module itself.
_LAZY = {
    "probe": ("gradprobe.probe", None),  # the subpackage, callable: gradprobe.api.probe.probe
    "ProbeResult": ("gradprobe.api.probe", "ProbeResult"),
    "load_probe": ("gradprobe.api.probe", "load_probe"),
    "load_plan": ("gradprobe.training.plan", "load_plan"),
    "Study": ("gradprobe.api.study", "Study"),
    "StudyResult": ("gradprobe.api.study", "StudyResult"),
    "StudyAnalysis": ("gradprobe.api.study", "StudyAnalysis"),
    "load_study": ("gradprobe.api.study", "load_study"),
    "train": ("gradprobe.api.study", "train"),
    "RunResult": ("gradprobe.api.study", "RunResult"),
    "rank_prompts": ("gradprobe.api.prompts", "rank_prompts"),
    "register_reward": ("gradprobe.rewards", "register_reward"),
    "sequence_reward": ("gradprobe.rewards", "sequence_reward"),
    "load_policy": ("gradprobe.models", "load_policy"),
    "load_task": ("gradprobe.tasks", "load_task"),
    "SamplingConfig": ("gradprobe.config", "SamplingConfig"),
    "extract_answer": ("gradprobe.tasks.verify", "extract_answer"),
    "answers_match": ("gradprobe.tasks.verify", "answers_match"),
    "prompt_features": ("gradprobe.difficulty.features", "prompt_features"),
    "sample_outcomes": ("gradprobe.difficulty.evaluate", "sample_outcomes"),
    "evaluate_difficulty": ("gradprobe.difficulty.evaluate", "evaluate_estimator"),  # `gradprobe difficulty-eval`
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = _importlib.import_module(module)
        return value if attr is None else getattr(value, attr)
    raise AttributeError(f"module 'gradprobe' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (lazy ones included); submodules stay importable but are not listed."""
    return sorted([*__all__, "__version__"])
