"""``gradprobe.Study``, ``gradprobe.load_study`` and ``gradprobe.train``: matched-compute runs as typed results.

:class:`Study` wraps :func:`gradprobe.study.runner.run_study` (what ``gradprobe study PLAN --out DIR``
runs), :func:`load_study` reads a study folder back (``plan.toml``, ``runs.csv``, ``analysis.json``,
``probe/``) and :func:`train` wraps :func:`gradprobe.training.run.run_training` (``gradprobe train``).

Importing this module imports neither torch nor pandas (they load on first use).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import inspect
import json
import numbers
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..config import MAX_SEED
from ..study.report import format_rankings
from ..study.stats import clip_accuracy
from ..training.budget import named_as_arguments, reach_warned_once
from ..training.coerce import echo_value
from ..training.plan import Plan, PlanError, RunConfig, load_plan, run_in_folder, shorten_budget
from ..training.run_folder import refuse_other_output
from .probe import PROBE_JSON, load_probe
from ..outputs import api_out, home_path, naming_out, removed_if_left_empty, shell_word


__all__ = ["Study", "StudyResult", "StudyAnalysis", "RunResult", "load_study", "train"]


def _interval(v) -> tuple[float, float]:
    lo, hi = v if isinstance(v, (list, tuple)) and len(v) == 2 else (None, None)
    return (float("nan") if lo is None else float(lo), float("nan") if hi is None else float(hi))


def _accuracy_interval(v) -> tuple[float, float]:
    """An arm's accuracy interval ``v`` as (low, high) within [0, 100] points, as the analysis writes it
    (:func:`gradprobe.study.stats.accuracy_interval`): an ``analysis.json`` written before accuracy intervals were
    clipped may hold a t bound past 100 or below 0, which no mean accuracy takes. NaN where there is none."""
    return tuple(clip_accuracy(x) for x in _interval(v))


@dataclass
class StudyAnalysis:
    """A study's ``analysis.json`` (DESIGN.md, "Matched-compute training": Analysis).

    Attributes
    ----------
    control_arm : str
        The arm gains are measured against (``grpo``).
    rankings : dict[str, list[str]]
        Compute axis (``updates``, ``generated_tokens``, ``flops``, ``device_seconds``) -> arms, best
        first, at the matched budget of that axis.
    accuracy : pandas.DataFrame
        One row per (arm, axis read by the study): ``accuracy`` (greedy held-out accuracy, points, mean over seeds),
        ``ci_low``/``ci_high`` (its t interval, clipped to [0, 100]), ``gain_vs_control`` (points), ``gain_ci_low``/
        ``gain_ci_high``, ``seeds``.
    hypotheses : pandas.DataFrame
        One row per preregistered hypothesis: ``name``, ``treatment``, ``control``, ``at`` (axis),
        ``budget``, ``estimate`` (points), ``ci_low``/``ci_high``, ``p_value``, ``p_adjusted`` (Holm),
        ``passed``, ``status``, ``statement``.
    raw : dict
        The whole ``analysis.json``.
    """

    control_arm: str
    rankings: dict
    accuracy: object
    hypotheses: object
    raw: dict = field(repr=False, default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict) -> StudyAnalysis:
        import pandas as pd

        rows = []
        for arm, entry in (raw.get("arms") or {}).items():
            for axis, v in entry.items():
                if not (isinstance(v, dict) and v.get("accuracy") is not None):
                    continue  # an axis the study did not read (e.g. no FLOPs budget)
                lo, hi = _accuracy_interval(v.get("ci"))
                glo, ghi = _interval(v.get("gain_ci"))
                gain = v.get("gain_vs_grpo", v.get("gain_vs_control"))
                rows.append({"arm": arm, "axis": axis, "accuracy": v.get("accuracy"), "ci_low": lo, "ci_high": hi,
                             "gain_vs_control": gain, "gain_ci_low": glo, "gain_ci_high": ghi,
                             "seeds": v.get("seeds")})
        hyps = []
        for h in raw.get("hypotheses") or []:
            lo, hi = _interval(h.get("ci"))
            hyps.append({"name": h.get("name"), "treatment": h.get("treatment"), "control": h.get("control"),
                         "at": h.get("at"), "budget": h.get("budget"), "estimate": h.get("estimate"), "ci_low": lo,
                         "ci_high": hi, "p_value": h.get("p_value"), "p_adjusted": h.get("p_adjusted"),
                         "passed": h.get("passed"), "status": h.get("status"), "statement": h.get("statement")})
        return cls(control_arm=raw.get("control_arm", "grpo"), rankings=dict(raw.get("rankings") or {}),
                   accuracy=pd.DataFrame(rows), hypotheses=pd.DataFrame(hyps), raw=raw)

    def report(self) -> str:
        """The analysis as the text ``gradprobe study`` prints (rankings, reads, gains with their intervals,
        hypotheses, side effects, the detectable effect): :func:`gradprobe.study.report.format_rankings`.

        Raises
        ------
        KeyError
            ``raw`` lacks a part of an analysis (an ``analysis.json`` written by another version).
        """
        return format_rankings(self.raw)


@dataclass
class StudyResult:
    """A study folder read back (:func:`load_study`) or just run (:meth:`Study.run`).

    Attributes
    ----------
    folder : Path
    plan : gradprobe.training.plan.Plan
        The frozen plan (``plan.toml``).
    runs : pandas.DataFrame
        ``runs.csv``: one row per (arm, seed, eval point): ``update``, ``generated_tokens``
        (tokens), ``flops``, ``device_seconds``, ``accuracy`` and ``accuracy_sampled`` (fractions),
        side effects (``response_length`` tokens, ``format_rate``, ``kl_init``).
    analysis : StudyAnalysis or None
        None when the folder has no ``analysis.json`` (``gradprobe study --analyze-only`` writes it).
    probe : gradprobe.api.probe.ProbeResult or None
        The probe of every arm's reward on the initial policy (``probe/``), None without one.
    status : gradprobe.study.runner.StudyResult or None
        What :meth:`Study.run` did (``ok``, ``failed``, ``summary()``); None for :func:`load_study`.
    """

    folder: Path
    plan: object
    runs: object
    analysis: StudyAnalysis | None = None
    probe: object | None = None
    status: object | None = None

    def __repr__(self) -> str:
        """One line: the plan's name, arms and seeds, the runs read (distinct (arm, seed) in ``runs``),
        whether there is an analysis and the folder (the tables themselves: ``runs``, ``analysis``)."""
        runs = self.runs
        n = (len(runs[["arm", "seed"]].drop_duplicates())
             if hasattr(runs, "columns") and {"arm", "seed"} <= set(runs.columns) else None)
        return (f"StudyResult(plan={getattr(self.plan, 'name', None)!r}, arms={list(getattr(self.plan, 'arms', []))}, "
                f"seeds={list(getattr(self.plan, 'seeds', []))}, runs={n}, analysis={self.analysis is not None}, "
                f"folder={str(self.folder)!r})")


def load_study(dir: str | Path) -> StudyResult:
    """Read a study folder (``gradprobe study PLAN --out DIR``, or a shipped one under ``data/``); a leading ``~`` or
    ``~user`` in ``dir`` is that home folder, as in a shell (:func:`gradprobe.outputs.home_path`).

    A frozen plan whose token budget is out of reach of its updates (frozen before such plans were refused) is read as
    it was run, with one :class:`~gradprobe.training.budget.OutOfReachWarning` at the caller's line, however often the
    folder's readers read it (:func:`~gradprobe.training.budget.reach_warned_once`). An ``analysis.json`` that no
    longer matches ``runs.csv`` (:func:`gradprobe.study.coverage.stale_analysis`, the check the CLI warns with and
    calib refuses by) is read with a :class:`UserWarning` naming the differences and the fix (re-analyse with
    ``gradprobe study --analyze-only``).

    Raises
    ------
    gradprobe.study.reading.AnalysisError (a ValueError)
        No ``runs.csv``, or it lacks the core columns or rows (named), or ``plan.toml`` was edited after the study
        froze it (its sha256 is not ``study.json``'s ``plan_sha256``; both named, with the fix:
        :func:`gradprobe.study.folder.check_frozen_plan`).
    gradprobe.training.plan.PlanError (a ValueError)
        No readable ``plan.toml`` (named), or ``dir`` is a file (e.g. the study's ``study.json``; its folder named
        when it is a study's).
    ValueError
        ``analysis.json`` or ``probe/probe.json`` is not valid JSON (named), or ``analysis.json`` is no analysis
        (no object with ``rankings`` and ``arms``; the fix: ``gradprobe study --analyze-only --out DIR
        --overwrite-analysis``), or ``probe/probe.json`` is no probe's
        record: the message names the file and how to re-create the study's probe (delete that ``probe.json`` and
        resume the study with ``gradprobe study DIR/plan.toml --out DIR``; finished runs are kept; for a study
        without ``runs/``, restore it from a copy: :func:`gradprobe.layout.restore_advice`), or ``dir`` is empty
        (``''``).
    TypeError
        ``dir`` is not a path.
    """
    from ..study.folder import check_frozen_plan
    from ..study.reading import AnalysisError, load_runs

    folder = api_out(dir, "dir")  # a leading ~ is the home folder, as on the command line
    if folder.is_file():  # a file of the study (study.json, runs.csv) given for its folder
        up = folder.parent
        parent = f" (its folder, {str(up)!r}, is one)" if (up / "plan.toml").is_file() else ""
        raise PlanError(f"{folder} is a file, not a study folder: load_study expects the folder holding plan.toml, "
                        f"runs.csv and analysis.json{parent}; pass the folder")
    if not (folder / "plan.toml").is_file():
        raise PlanError(f"{folder / 'plan.toml'} not found: {str(folder)!r} is not a study folder "
                        "(`gradprobe study PLAN --out DIR` writes one)")
    check_frozen_plan(folder, error=AnalysisError)  # an edited plan.toml would relabel the study's numbers
    with reach_warned_once():  # load_runs reads the plan again
        plan = load_plan(folder / "plan.toml", check_schedule=False)  # frozen plans predate later schedule checks
        runs = load_runs(folder)
    analysis = _study_analysis(folder, runs) if (folder / "analysis.json").is_file() else None
    probe = _study_probe(folder) if (folder / "probe" / PROBE_JSON).is_file() else None
    return StudyResult(folder=folder, plan=plan, runs=runs, analysis=analysis, probe=probe)


def _study_analysis(folder: Path, runs) -> StudyAnalysis:
    """``folder/analysis.json`` read back, with a :class:`UserWarning` (at the caller of :func:`load_study`) naming
    each difference from ``runs`` (``runs.csv`` as read now) when it no longer matches it: the CLI's and calib's
    comparison, :func:`gradprobe.study.coverage.stale_analysis`, so its numbers are not silently runs.csv's.

    Raises
    ------
    ValueError
        ``analysis.json`` is not valid JSON, or not an analysis (no object with ``rankings`` and ``arms``): named,
        with the fix (rewrite it with ``gradprobe study --analyze-only --out DIR --overwrite-analysis``).
    """
    import warnings

    from ..study.coverage import stale_analysis

    path, word = folder / "analysis.json", shell_word(folder)
    rewrite = f"`gradprobe study --analyze-only --out {word} --overwrite-analysis`"
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e}); rewrite it with {rewrite}") from e
    lacks = [k for k in ("rankings", "arms") if not isinstance(raw, dict) or not isinstance(raw.get(k), dict)]
    if lacks:
        raise ValueError(f"{path} is no study analysis (a JSON {type(raw).__name__} without "
                         f"{' and '.join(repr(k) for k in lacks)}: damaged or another file); rewrite it with {rewrite}")
    with warnings.catch_warnings():  # runs.csv's own warnings came from load_runs already
        warnings.simplefilter("ignore")
        diffs = stale_analysis(folder, runs)
    if diffs:
        warnings.warn(f"{path} does not match {folder / 'runs.csv'} ({'; '.join(diffs)}): runs.csv (or the plan) "
                      f"changed after the analysis, so .analysis holds the old numbers (calib refuses this study); "
                      f"re-analyse with {rewrite} (without --overwrite-analysis the re-analysis goes to "
                      f"{folder / 'reanalysis'}/)", UserWarning, stacklevel=3)
    return StudyAnalysis.from_dict(raw)


def _study_probe(folder: Path):
    """The study's probe (``folder/probe``) read by :func:`load_probe`, whose refusals carry the study's fix as they
    are: each check derives its one fix from the probe's folder (:func:`gradprobe.layout.rerun_advice` for a file to
    write again, :func:`gradprobe.layout.restore_advice` for an edited or damaged one), and a study's probe folder
    is told apart there, so nothing is rewritten here.

    Raises
    ------
    ValueError
        ``probe/probe.json`` is not valid JSON or not a probe's record, or an entry was edited (named, with the
        study's fix: delete the file and resume the study; for a study without ``runs/``, restore it from a copy of
        the study).
    """
    return load_probe(folder / "probe")


def _plan_path(plan) -> Path:
    """The file of a plan given as a path or a :class:`~gradprobe.training.plan.Plan` (unchanged since loaded)."""
    if isinstance(plan, (str, Path)):
        return home_path(plan)  # a leading ~ is the home folder, as on the command line
    path, sha = getattr(plan, "path", None), getattr(plan, "sha256", None)
    if path is None or sha is None:
        raise TypeError(f"plan must be a path or a gradprobe.load_plan(...) result, got {type(plan).__name__}")
    p = Path(path)
    try:
        now = hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError as e:
        raise PlanError(f"plan {path!r} cannot be read ({e.strerror or e}); a study freezes the plan's file, so "
                        "save the plan to a .toml file and pass its path") from None
    if now != sha:
        raise PlanError(f"plan file {path} changed since it was loaded (sha256 {sha[:12]} -> {now[:12]}); "
                        "load it again with gradprobe.load_plan")
    return p


class Study:
    """A preregistered matched-compute study: every arm x seed of a plan at equal budget, the probe,
    ``runs.csv`` and the analysis (DESIGN.md, "Matched-compute training").

    Parameters
    ----------
    plan : path or Plan
        The plan TOML, or :func:`gradprobe.load_plan`'s result (its file is frozen into ``out``).
    out : path
        The study folder; an interrupted study resumes there (finished runs are never redone). A leading ``~`` or
        ``~user`` (in ``plan`` too) is that home folder, as in a shell (:func:`gradprobe.outputs.home_path`).

    Raises
    ------
    ValueError
        ``out`` is empty (``''``: it would be the current folder), refused as ``gradprobe study --out ''`` is.
    TypeError
        ``out`` is not a path, or ``plan`` is neither a path nor a :func:`gradprobe.load_plan` result.
    PlanError
        ``plan``'s file cannot be read, or changed since it was loaded.
    """

    def __init__(self, plan, out: str | Path):
        self.out = api_out(out)  # '' (the current folder) refused as `--out ''` is; ~ expanded
        self.plan_path = _plan_path(plan)

    def __repr__(self) -> str:
        return f"Study(plan={str(self.plan_path)!r}, out={str(self.out)!r})"

    @naming_out("out")  # Study(plan, out): its output fixes name the argument, not --out
    def run(self, *, executor: str = "local", workers: int | None = None, probe: bool = True,
            analyze: bool = True, restart: bool = False, quiet: bool = False, **options) -> StudyResult:
        """Run (or resume) the study, then read it back.

        Parameters
        ----------
        executor : {"local", "ray", "inline"}
            ``local``: a process pool; ``ray``: one Ray task per run; ``inline``: serially here.
        workers : int, optional
            Parallel runs (default ``min(runs, usable cores)``; threads per run:
            :func:`gradprobe.study.executors.worker_threads`).
        probe, analyze, restart : bool
            As ``gradprobe study`` without ``--no-probe`` / ``--no-analysis``, with ``--restart``.
        quiet : bool
            No progress lines on stderr.
        **options
            Other keyword arguments of :func:`gradprobe.study.runner.run_study` (``ray_address``,
            ``report_to``, ``reuse_from``, ``probe_overrides``).

        Returns
        -------
        StudyResult
            With ``status`` (the runner's record: ``status.ok`` is False when a run, the probe or the
            analysis failed; finished runs are kept either way).

        Raises
        ------
        TypeError
            ``workers`` is neither an integer nor None (before anything runs).
        PlanError, StudyError, OutputDirError, ValueError
            As :func:`gradprobe.study.runner.run_study` (bad plan, another plan's folder, unwritable
            folder, unknown executor, ``workers`` < 1); :class:`~gradprobe.study.runner.StudyError` also when no run
            finished, so there is nothing to read back (the runner's summary is in the message), and,
            before anything runs, for ``executor="local"`` called from a script without an
            ``if __name__ == "__main__":`` guard (:func:`unguarded_main_script`).
        """
        from ..study.runner import StudyError, run_study

        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, numbers.Integral)):
            raise TypeError(f"workers must be an integer or None, got {workers!r} ({type(workers).__name__})")
        script = unguarded_main_script() if executor == "local" else None
        if script:
            raise StudyError(f"executor='local' starts worker processes that re-import your script {script} "
                             "(Python multiprocessing's spawn start method), and the script has no "
                             "`if __name__ == \"__main__\":` guard, so every worker would run it again from the top "
                             "and die. Put the code that runs the study under that guard, or pass "
                             "executor='inline' (one run at a time, in this process). Nothing was run.")
        with reach_warned_once():  # the study's plan out of reach: one warning for the run and the read back
            status = run_study(self.plan_path, self.out, executor=executor, workers=workers, probe=probe,
                               analyze=analyze, restart=restart, say=(lambda m: None) if quiet else None, **options)
            runs_csv = self.out / "runs.csv"
            if not runs_csv.is_file() or not runs_csv.read_text().strip().count("\n"):
                raise StudyError(f"no run of the study finished, so there is nothing to read:\n{status.summary()}")
            result = load_study(self.out)
        result.status = status
        return result


_MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__""")


def unguarded_main_script() -> str | None:
    """The script that spawned worker processes would re-run from the top, if it has no main guard.

    Python's ``spawn`` start method (the local executor's) re-imports the parent's ``__main__`` in every
    worker: by path for ``python script.py``, by name for ``python -m module`` (not for a package's
    ``__main__``), never in a notebook or an interactive session (no ``__file__``). A script without an
    ``if __name__ == "__main__":`` guard then runs its study again in each worker, which dies
    (``multiprocessing`` refuses to start processes while bootstrapping). This mirrors
    ``multiprocessing.spawn.get_preparation_data`` and reads the script's text for the guard.

    Returns
    -------
    str or None
        The script's path when it would be re-run and its text has no such guard; otherwise None.
    """
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None and (name == "__main__" or name.endswith(".__main__")):
        return None
    path = getattr(main, "__file__", None)
    if not path or not os.path.isfile(path):
        return None
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    return None if _MAIN_GUARD.search(text) else str(path)


@dataclass
class RunResult:
    """One training run (:func:`train`).

    Attributes
    ----------
    folder : Path
        The run folder (``config.json``, ``metrics.jsonl``, ``summary.json``, checkpoints).
    summary : dict
        ``summary.json``: ``updates``, ``stop_reason``, ``budget_spent``, ``final_greedy_accuracy``
        (fraction), ``overshoot``, the ledger.
    metrics : pandas.DataFrame
        ``metrics.jsonl``, one row per update and one per eval (column ``eval`` True).
    """

    folder: Path
    summary: dict
    metrics: object


def _seed(value, name: str = "seed") -> int:
    """``value`` when it is an integer in [0, 2**63 - 1] (what ``--seed`` takes), checked before any model loads.

    Raises
    ------
    ValueError
        ``seed must be an integer in [0, 2**63 - 1] ..., got -1`` (a value longer than 80 characters shown by its
        first 40 and its length, :func:`~gradprobe.training.coerce.echo_value`).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= MAX_SEED:
        raise ValueError(f"{name} must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), "
                         f"got {echo_value(value)}")  # 10**5000 or 5000 characters: shortened
    return int(value)


def _edits(a: str, b: str) -> int:
    """The edit distance between ``a`` and ``b``: the fewest insertions, deletions, substitutions and swaps of two
    adjacent characters that turn one into the other (optimal string alignment, Damerau-Levenshtein's restricted
    form), e.g. 1 for ``arn``/``arm``, 2 for ``arn``/``run``."""
    d = [list(range(len(b) + 1))] + [[i] + [0] * len(b) for i in range(1, len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def _closest_keywords(keyword: str, accepted: list[str]) -> list[str]:
    """The accepted keywords a misspelt ``keyword`` most likely meant: of those :func:`difflib.get_close_matches`
    finds close (ratio >= 0.6), the ones the fewest edits away (:func:`_edits`), in ``accepted``'s order; [] when
    none is close. difflib's ratio alone ties ``arn`` with ``run`` and ``arm`` (0.67 each) and named ``run``, the
    first; one edit (``arn`` -> ``arm``) beats two (-> ``run``), and a tie names them all."""
    close = difflib.get_close_matches(keyword, accepted, n=len(accepted), cutoff=0.6)
    if not close:
        return []
    best = min(_edits(keyword, k) for k in close)
    return [k for k in accepted if k in close and _edits(keyword, k) == best]


def _keywords_checked(fn):
    """``fn``, refusing keyword arguments it does not take before the call with one TypeError that names every
    unknown keyword, each with the closest accepted ones (:func:`_closest_keywords`), then every accepted one
    once (Python's own message names only the first unknown keyword); a keyword longer than 80 characters is quoted by
    its first 40 and its length (:func:`~gradprobe.training.coerce.echo_value`). The signature, name and docstring
    stay ``fn``'s (:func:`functools.wraps`)."""
    accepted = [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    def named(keyword: str) -> tuple[str, str]:
        close = _closest_keywords(keyword, accepted)
        return echo_value(keyword), f"did you mean {' or '.join(k + '=' for k in close)}?" if close else ""

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        unknown = [named(k) for k in kwargs if k not in accepted]
        if len(unknown) == 1:
            (shown, hint), = unknown
            raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {shown}{'; ' + hint if hint else ''} "
                            f"(it accepts: {', '.join(accepted)})")
        if unknown:
            each = ", ".join(f"{shown} ({hint or 'no accepted keyword is close'})" for shown, hint in unknown)
            raise TypeError(f"{fn.__name__}() got {len(unknown)} unexpected keyword arguments: {each} (it accepts: "
                            f"{', '.join(accepted)})")
        return fn(*args, **kwargs)
    return checked


def _train_run(plan, resumed_flags, *, arm: str | None, seed, device: str | None, budgets: dict) -> RunConfig:
    """The run :func:`train` trains: ``plan`` (a Plan or a RunConfig) at ``arm`` and ``seed``, on ``device``, with
    the shortened ``budgets`` (kind -> value or None; ``resumed_flags`` as
    :func:`~gradprobe.training.budget.shorten_budget` takes them: :func:`~gradprobe.training.plan.run_in_folder`).
    Raises PlanError for a plan without ``arm``, ValueError for a seed out of range (:func:`train`'s)."""
    if isinstance(plan, RunConfig):
        run = plan
    else:
        if arm is None:
            raise PlanError(f"train(plan, out) needs arm=, one of: {', '.join(plan.arms)}")
        run = plan.arm(arm, seed=_seed(seed))
    _seed(run.seed, "the RunConfig's seed")
    if device:
        run = dataclasses.replace(run, model=dataclasses.replace(run.model, device=device))
    return shorten_budget(run, budgets, python=True, resumed_flags=resumed_flags)  # named updates=, not --updates


@_keywords_checked
@naming_out("out")  # its output fixes say "choose another out", the argument, not --out
def train(run, out: str | Path, *, arm: str | None = None, seed: int = 0, device: str | None = None,
          updates: int | None = None, budget_tokens: int | str | None = None, budget_flops: float | None = None,
          budget_seconds: float | None = None, progress: bool = False, report_to: str = "none") -> RunResult:
    """One GRPO run until its budget is spent (``gradprobe train``), resuming from ``out``'s checkpoint.

    Parameters
    ----------
    run : RunConfig, Plan or path
        A resolved run (``plan.arm(name, seed)``), or a plan (object or TOML path) with ``arm``.
    out : path
        The run folder. A leading ``~`` or ``~user`` (in a plan's path too) is that home folder, as in a shell
        (:func:`gradprobe.outputs.home_path`).
    arm : str, optional
        The plan's arm (required when ``run`` is a plan).
    seed : int
        The run seed when ``run`` is a plan.
    device : str, optional
        Override of the plan's ``[model] device``.
    updates, budget_tokens, budget_flops, budget_seconds : optional
        Lower the plan's budget for this run only (``--updates``, ``--budget-tokens`` (generated
        tokens; a string such as ``"250k"`` as the flag takes it), ``--budget-flops`` (FLOPs), ``--budget-seconds``
        (device-seconds); recorded in ``config.json``; :func:`gradprobe.training.plan.shorten_budget`).
    progress : bool
        One line per update on stderr.
    report_to : {"none", "tensorboard", "trackio", "wandb"}

    Returns
    -------
    RunResult

    Raises
    ------
    PlanError
        Bad plan, unknown arm, or a plan given without ``arm``; a budget argument that is not > 0, above the
        plan's budget or in conflict with another (naming it: ``updates= must be a whole number > 0 ...``).
    ValueError
        ``out`` is empty (``''``: it would be the current folder), ``seed`` (or
        the RunConfig's) is not an integer in [0, 2**63 - 1], or ``arm`` is given with a RunConfig; before anything
        is loaded or written.
    TypeError
        ``out`` is not a path, or ``run`` is neither a RunConfig, a Plan nor a path (before anything is loaded); an
        unknown keyword (``updatez=1``: named with the closest accepted one, ``updates``, and the list of them; with
        several, every one is named with its closest accepted one).
    NonFiniteRunError, OutputDirError, RunConfigMismatchError, TrackerUnavailableError
        As :func:`gradprobe.training.run.run_training` (NonFiniteRunError with its subclasses PolicyDivergedError
        and NoValidRewardError: a reward that scored no completion); OutputDirError also when ``out`` is a file or
        holds another command's output or a model (a tier, ``save_pretrained`` weights), before any lock file is
        written. A refused run leaves no empty folder.
    BudgetTooSmallError
        Update 1 alone spent more than a token or FLOP budget (data kept in ``out``); the message names the
        argument given (``budget_tokens=``) or the plan's budget, and the fix (a new ``out=`` and a larger budget).
    StudyError
        Another live process trains in ``out`` (:func:`gradprobe.study.folder.hold_run_folder`); nothing is written.
    """
    import pandas as pd

    from ..study.folder import hold_run_folder
    from ..training.run import run_training

    out = api_out(out)  # '' (the current folder) refused as `--out ''` is; ~ expanded
    if not isinstance(run, (RunConfig, Plan, str, os.PathLike)):
        raise TypeError(f"run must be a RunConfig (plan.arm(name, seed)), a Plan (gradprobe.load_plan(PATH)) or the "
                        f"path of a plan TOML file, got {run!r} ({type(run).__name__})")
    if isinstance(run, RunConfig) and arm is not None:
        raise ValueError("arm= goes with a plan; a RunConfig already names its arm")
    budgets = {"updates": updates, "generated_tokens": budget_tokens, "flops": budget_flops,
               "device_seconds": budget_seconds}
    # a plan or budget arguments out of reach: refused, but warned where out holds this very run (started before)
    run = run_in_folder(run, out, functools.partial(_train_run, arm=arm, seed=seed, device=device, budgets=budgets))
    refuse_other_output(out, outside_studies=True)  # as `gradprobe train`: not inside a study
    with removed_if_left_empty(out), hold_run_folder(out):  # a folder another live process trains in: refused
        with named_as_arguments():  # a budget smaller than one update is told as budget_tokens=, not --budget-tokens
            summary = run_training(run, out, progress=progress, report_to=report_to)
    lines = [json.loads(x) for x in (Path(out) / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return RunResult(folder=Path(out), summary=summary, metrics=pd.DataFrame.from_records(lines))
