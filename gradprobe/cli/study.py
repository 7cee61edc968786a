"""``gradprobe study PLAN --out DIR [--executor local|ray] [--restart]``,
``gradprobe study --analyze-only --out DIR [--overwrite-analysis]``, ``gradprobe study --power PLAN
[--pilot DIR]`` and ``gradprobe study --replicate DIR --out NEW``."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from ..config import EXECUTOR_NAMES
from ..tracking import TrackerUnavailableError, require_tracker
from ..training.budget import reach_unrecorded, reach_warned_once
from ..training.plan import PlanError, load_plan, replicate_plan
from ..outputs import OutputDirError, prepare_output_dir, removed_if_left_empty, shell_word
from ..tables import shown
from .args import HelpFormatter, add_report_to, home, in_path, integer, out_path


def add_study_parser(subparsers) -> None:
    """Register ``gradprobe study`` on an argparse sub-parser collection."""
    p = subparsers.add_parser(
        "study", help="run a preregistered study: every arm x seed of a plan, the probe, then the analysis",
        formatter_class=HelpFormatter,
        description="Freeze the plan into DIR (sha256), run every arm x seed (a killed study resumes: finished runs "
                    "are never redone), probe every arm's reward on the initial policy, write runs.csv, "
                    "analysis.json and figures/. --power PLAN: the seeds and held-out size the plan's [power] "
                    "target needs, from a pilot study (nothing is run or written). --replicate DIR: the plan of a "
                    "finished study on fresh seeds and a fresh held-out set. Exit status: 0 all done, 1 a "
                    "run/probe/analysis failed (the others are kept), 2 bad input, 130 interrupted (Ctrl-C: "
                    "no further run starts, running ones stop; the same command resumes), 143 the same on SIGTERM.")
    # each path option expands a leading ~ (.args.home): bash leaves the ~ of --replicate=~/x as it is, and a
    # caller passing a list of words (subprocess) leaves that of a positional PLAN
    p.add_argument("plan", nargs="?", type=home,
                   help="plan TOML file (e.g. plans/tiny.toml); not needed with --analyze-only")
    p.add_argument("--out", type=out_path, default=None,
                   help="study folder (a new one for a changed plan, or --restart while none of its runs finished)")
    p.add_argument("--executor", choices=list(EXECUTOR_NAMES), default="local",
                   help="local: process pool; ray: one Ray task per run; inline: serially in this process")
    p.add_argument("--workers", type=integer, default=None,
                   help="parallel runs (default: min(runs, usable cores)); each gets OMP_NUM_THREADS torch threads "
                        "where it is set (at most the usable cores), else max(1, usable cores // workers)")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local ray.init())")
    p.add_argument("--no-probe", action="store_true", help="skip the probe of the arms' rewards")
    p.add_argument("--no-analysis", action="store_true", help="only run; analyse later with --analyze-only")
    add_report_to(p, "every run also logs per-update metrics, evals and its token ledger to this tracker "
                     "(tensorboard/wandb files in DIR/tb/<arm>/seed<N>; wandb offline unless WANDB_MODE is set)")
    p.add_argument("--analyze-only", action="store_true",
                   help="analyse DIR/runs.csv: writes DIR/analysis.json and DIR/figures/ when DIR has no analysis "
                        "yet, else DIR/reanalysis/ (analysis.json, figures/, report.txt), leaving the shipped "
                        "analysis as it is")
    p.add_argument("--overwrite-analysis", action="store_true",
                   help="with --analyze-only: rewrite DIR/analysis.json and DIR/figures/ in place")
    p.add_argument("--restart", action="store_true",
                   help="when DIR holds a study of a different plan of which no run has finished: delete its "
                        "frozen plan and partial outputs and start this plan there (refused once a run finished)")
    p.add_argument("--power", action="store_true",
                   help="print the seeds and held-out size for the plan's [power] min_effect at 80%% power")
    # --pilot "" / --replicate "" (an unset shell variable) are refused by name, not read as "not given" (.args.in_path)
    p.add_argument("--pilot", default=None, type=in_path("a finished study folder as the pilot, or leave --pilot "
                                                         "out for the plan's [power] pilot"),
                   help="with --power: the finished study whose variance to use (default: the plan's [power] pilot)")
    p.add_argument("--replicate", default=None, metavar="DIR", type=in_path("the finished study folder to replicate"),
                   help="re-run the finished study DIR's plan on fresh seeds and a fresh held-out set into --out")
    p.add_argument("--seed-offset", type=integer, default=None,
                   help="with --replicate: added to every seed and the held-out seed (default: the smallest "
                        "offset that gives fresh seeds)")
    p.add_argument("--reuse-runs", action="append", default=[], metavar="DIR",
                   type=in_path("a finished study folder whose runs this plan may reuse"),
                   help="copy the finished runs of the study folder DIR (repeatable) that this plan would train "
                        "identically instead of training them again. A run is reused only when its config.json "
                        "records the same resolved configuration, gradprobe/torch/transformers versions, task data "
                        "files (task_data), plug-in reward code (reward_plugin) and initial weights (model_weights: "
                        "what the model's tier, folder or .gguf file holds now, with its config.json and tokenizer "
                        "files; a rebuilt tier differs), compared "
                        "by content; a run that did not record one that applies is not reused. Each copy records "
                        "its source in reused_from.json")
    p.add_argument("--quiet", action="store_true",
                   help="no progress lines on stderr (by default one per finished run: runs done/total, elapsed, ETA)")
    p.add_argument("--no-progress", action="store_true",
                   help="hide progress bars (the model's \"Loading weights\" and downloads, on stderr and in each "
                        "run's train.log), as for probe, rank-prompts and difficulty-eval; --quiet hides the per-run "
                        "lines")


def _err(msg: str) -> int:
    """Print ``msg`` as the command's error on stderr (:func:`_terminal`); the exit status of bad input, 2."""
    print(f"gradprobe study: error: {_terminal(msg)}", file=sys.stderr)
    return 2


def _terminal(msg: str) -> str:
    """``msg`` with the control characters of each line escaped (:func:`shown`: ``\\x1b``), its line breaks kept: a
    name that an error quotes raw (a plug-in reward file ``e\\x1b[31m.py``, a reward's own exception text) cannot
    drive the terminal, whichever code built the message."""
    return "\n".join(shown(line) for line in msg.split("\n"))


def _resume_command(args) -> str:
    """The command line that resumes an interrupted study (the options it was started with), each word as bash reads
    it back (:func:`_word`)."""
    parts = ["gradprobe", "study"] + ([_Path(args.plan)] if args.plan else []) + ["--out", _Path(args.out)]
    if getattr(args, "replicate", None):
        parts += ["--replicate", _Path(args.replicate)]
        if args.seed_offset is not None:
            parts += ["--seed-offset", str(args.seed_offset)]
    if args.executor != "local":
        parts += ["--executor", args.executor]
    if args.workers is not None:
        parts += ["--workers", str(args.workers)]
    if args.ray_address:
        parts += ["--ray-address", args.ray_address]
    parts += ["--report-to", args.report_to] if getattr(args, "report_to", "none") != "none" else []
    for src in getattr(args, "reuse_runs", None) or []:
        parts += ["--reuse-runs", _Path(src)]
    parts += [flag for flag, on in (("--no-probe", args.no_probe), ("--no-analysis", args.no_analysis),
                                    ("--quiet", args.quiet), ("--no-progress", getattr(args, "no_progress", False)))
              if on]
    return " ".join(_word(x) for x in parts)


class _Path(str):
    """A word of :func:`_resume_command` that is a path (the plan, ``--out``, ``--replicate``, ``--reuse-runs``)."""


def _word(word) -> str:
    """``word`` quoted as :func:`shlex.quote` does where that reads back as given, else as :func:`shell_word` quotes
    a path (bash's ``$'...'`` for a control character or an undecodable byte, which the printed line would otherwise
    hold raw; ``./`` before a relative path that starts with ``-``, which the command would read as an option)."""
    import shlex

    text = str(word)
    if isinstance(word, _Path) and (not text.isprintable() or text.startswith("-")):
        return shell_word(text)
    return shlex.quote(text) if text.isprintable() else shell_word(text)


def _interrupted(args, e: BaseException) -> int:
    """Ctrl-C or SIGTERM: say what was kept and how to resume, no traceback; 130 (128 + SIGINT) or 143
    (128 + SIGTERM, as ``gradprobe train`` and ``gradprobe probe``), as a shell reports them."""
    from ..study.result import StudyTerminated

    terminated = isinstance(e, StudyTerminated) or getattr(e, "terminated", False)
    what = _terminal(str(e)) if str(e) else f"study {shown(str(args.out))} interrupted before any run started"
    how = "terminated (SIGTERM): " if terminated else ""
    print(f"gradprobe study: {how}{what}.\nResume with: {_resume_command(args)}", file=sys.stderr)
    return 143 if terminated else 130


def terminate_as_interrupt():
    """Within the block SIGTERM raises :class:`~gradprobe.study.result.StudyTerminated`, a KeyboardInterrupt, so
    that a study stops as on Ctrl-C (no further run, running workers stopped, the end in ``study.json``); the
    handler is :func:`gradprobe.cli.probe.terminate_cleanly`'s (once; restored after; a no-op outside the main
    thread)."""
    from ..study.result import StudyTerminated
    from .probe import terminate_cleanly

    return terminate_cleanly(StudyTerminated)


def _power(args) -> int:
    from ..study.power import PowerError, format_power, power_analysis
    from ..study.reading import AnalysisError

    if not args.plan:
        return _err("--power needs the plan: gradprobe study --power PLAN [--pilot DIR]")
    if args.analyze_only or args.replicate:
        return _err("--power only reads a plan and a pilot; drop --analyze-only / --replicate")
    try:
        res = power_analysis(load_plan(args.plan, check_reference=True), args.pilot, workers=args.workers)
    except (PlanError, PowerError, AnalysisError, OSError) as e:
        return _err(str(e))
    print(format_power(res))
    return 0


def _check_replicate(args):
    """(source folder, replicate Plan) after every check, before anything is written; raises ValueError, or
    OutputDirError when --out holds another command's output (:func:`gradprobe.study.folder.refuse_other_output`)."""
    from ..study.folder import refuse_other_output
    from ..study.reading import finished_study

    if args.plan:
        raise ValueError("--replicate DIR takes the plan from DIR/plan.toml; drop the PLAN argument")
    if not args.out:
        raise ValueError("--replicate needs --out NEW_DIR, the replicate's own study folder")
    src = finished_study(args.replicate, key="--replicate")
    if Path(args.out).resolve() == src.resolve():
        raise ValueError(f"--out {shown(str(args.out))} is the study being replicated; give a new folder")
    refuse_other_output(args.out)  # a training run's folder: refused before replicate_of.json is written
    plan = load_plan(src / "plan.toml")
    offset = args.seed_offset if args.seed_offset is not None else max(plan.seeds) - min(plan.seeds) + 1
    return src, replicate_plan(plan, seed_offset=offset)


def _replicate(args, say) -> int:
    from ..study import runner

    try:
        src, plan = _check_replicate(args)
    except (ValueError, OutputDirError) as e:
        return _err(str(e))
    replicate_study = getattr(runner, "replicate_study", None)
    if replicate_study is None:
        return _err("--replicate: this gradprobe cannot run a replication yet (gradprobe.study.runner has no "
                    "replicate_study)")
    try:
        with terminate_as_interrupt():  # SIGTERM stops the study as Ctrl-C does
            res = replicate_study(src, args.out, plan=plan, executor=args.executor, workers=args.workers,
                                  ray_address=args.ray_address, probe=not args.no_probe,
                                  analyze=not args.no_analysis, say=say, report_to=getattr(args, "report_to", "none"))
    except (runner.StudyError, ValueError) as e:
        return _err(str(e))
    except KeyboardInterrupt as e:
        return _interrupted(args, e)
    print(res.summary())
    return 0 if res.ok else 1


REANALYSIS = "reanalysis"  # gradprobe.study.folder.REANALYSIS (that package imports pandas: not imported here)


def analysis_target(out: str | Path, overwrite: bool = False) -> Path:
    """Where ``--analyze-only`` writes: ``out`` itself when it has no ``analysis.json`` yet or
    ``overwrite``, else ``out/reanalysis`` (the shipped analysis is never replaced unless asked)."""
    out = Path(out)
    return out if overwrite or not (out / "analysis.json").exists() else out / REANALYSIS


def _json_kind(value) -> str:
    """JSON's name of the type of a parsed JSON ``value`` (null, boolean, number, string, array, object)."""
    kinds = ((type(None), "null"), (bool, "boolean"), ((int, float), "number"), (str, "string"), (list, "array"))
    return next((name for t, name in kinds if isinstance(value, t)), "object")


def _warn_stale_analysis(out: Path) -> None:
    """Warn (stderr) when ``out/analysis.json`` is damaged (not valid JSON, or JSON but no object) or no longer
    matches ``out/runs.csv`` (:func:`gradprobe.study.coverage.stale_analysis`); an unreadable runs.csv is left to the
    analysis."""
    from ..study.coverage import stale_analysis
    from ..study.reading import AnalysisError, load_runs

    said, rewrite = shown(str(out)), f"`gradprobe study --analyze-only --out {shell_word(out)} --overwrite-analysis`"
    try:  # a damaged analysis.json (a write cut short) was kept with no word: calib refuses the study then
        data = json.loads((out / "analysis.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        print(f"gradprobe study: warning: {said}/analysis.json is damaged (not valid JSON: {e}), so calib refuses "
              f"this study; run {rewrite} to rewrite it", file=sys.stderr)
        return
    except OSError:
        data = {}
    if not isinstance(data, dict):  # valid JSON but no analysis (null, [], a number): calib refuses it too
        print(f"gradprobe study: warning: {said}/analysis.json is damaged (it holds a JSON {_json_kind(data)}, not "
              f"an object), so calib refuses this study; run {rewrite} to rewrite it", file=sys.stderr)
        return
    try:
        with warnings.catch_warnings(), reach_unrecorded():  # runs.csv's and the plan's warnings come once, from
            warnings.simplefilter("ignore")  # the analysis that follows (this hidden read does not count as given)
            diffs = stale_analysis(out, load_runs(out))
    except (AnalysisError, OSError, ValueError):
        return
    if diffs:
        print(f"gradprobe study: warning: {said}/analysis.json does not match {said}/runs.csv ({'; '.join(diffs)}): "
              f"runs.csv (or the plan) changed after the analysis, and calib refuses this study until it is "
              f"re-analysed; the re-analysis goes to {said}/{REANALYSIS}/, not {said}/analysis.json: run {rewrite} "
              "to rewrite it", file=sys.stderr)


def _analyze_only(args) -> int:
    """``--analyze-only``: analyse DIR and write to :func:`analysis_target`.

    :func:`gradprobe.study.analysis.analyze` writes ``analysis.json`` and ``figures/`` into the
    target; into ``DIR/reanalysis/`` also ``report.txt``, the printed report.
    """
    from ..study.analysis import AnalysisError, analyze, format_rankings
    from ..study.folder import REANALYSIS_REPORT, StudyError, check_frozen_plan

    out = Path(args.out)
    try:  # an edited plan.toml first: compared with it, even the frozen PLAN would look like another plan
        check_frozen_plan(out)
    except StudyError as e:
        return _err(str(e))
    if args.plan and (why := _other_plan(args.plan, out)) is not None:
        return _err(why)
    target = analysis_target(out, args.overwrite_analysis)
    try:
        if target == out:
            result = analyze(out)
        else:
            _warn_stale_analysis(out)
            with removed_if_left_empty(target):  # a refused analysis leaves no empty reanalysis/ behind
                prepare_output_dir(target)
                result = analyze(out, out_dir=target)
            (target / REANALYSIS_REPORT).write_text(format_rankings(result) + "\n")
    except (AnalysisError, PlanError, OSError, OutputDirError, ValueError) as e:
        return _err(str(e))
    for r in result.get("missing_runs") or []:
        print(f"gradprobe study: warning: run {r['arm']} seed {r['seed']} of the plan is missing from "
              f"{shown(str(out))}/runs.csv: {r['reason']}; the analysis reads {r['arm']} without it (analysis.json "
              "missing_runs)", file=sys.stderr)
    print(format_rankings(result))
    said, into = shown(str(out)), shown(str(target))  # a newline or tab in the path escaped: one line
    if target == out:
        print(f"\nwrote {said}/analysis.json and {said}/figures/")
    else:
        print(f"\n{said}/analysis.json exists (the study's own analysis; kept as it is): wrote the re-analysis to "
              f"{into}/analysis.json, {into}/figures/ and {into}/report.txt (--overwrite-analysis rewrites "
              f"{said}/analysis.json instead)")
    return 0


def _contradiction(args) -> str | None:
    """Options given together that cannot both hold, named with the fix (checked before anything is read or
    written), else None."""
    if args.analyze_only and args.no_analysis:
        return ("--analyze-only and --no-analysis contradict each other (--analyze-only only analyses; --no-analysis "
                "runs the study without analysing it): drop one of them")
    if args.ray_address and args.analyze_only:
        return "--ray-address goes with --executor ray, and --analyze-only runs nothing: drop --ray-address"
    from ..study.orchestrator import ray_address_refusal

    return ray_address_refusal(args.ray_address, args.executor)


def _other_plan(plan: str, out: Path) -> str | None:
    """Why ``--analyze-only`` refuses the PLAN argument ``plan``: it is not ``out``'s frozen plan (another sha256
    than ``out/plan.toml``, the file the analysis reads, or, without one, than the study's recorded plan sha256,
    :func:`gradprobe.study.folder.study_plan_sha`) or cannot be read; None when it is the frozen plan or ``out``
    records none (the analysis then names what is missing)."""
    from ..layout import PLAN_COPY
    from ..study.folder import sha256, study_plan_sha

    fix = f"--analyze-only analyses {out} with its own frozen {out / PLAN_COPY}: drop the PLAN argument"
    try:
        given = sha256(Path(plan).read_bytes())
    except OSError as e:
        return f"PLAN {plan} cannot be read ({type(e).__name__}: {e.strerror or e}); {fix}"
    frozen = out / PLAN_COPY
    try:  # the plan the analysis reads comes first (one edited after freezing is refused before this)
        have = sha256(frozen.read_bytes()) if frozen.is_file() else study_plan_sha(out)[0]
    except OSError:  # plan.toml unreadable: the analysis says why
        have = None
    if have is None or have == given:
        return None
    return (f"PLAN {plan} (sha256 {given[:12]}) is not the plan of the study {out} (sha256 {have[:12]}); {fix} "
            f"(or give --out the study folder of {plan})")


def study_main(args) -> int:
    """Run ``gradprobe study``; returns the exit status (0 done, 1 something failed, 2 bad input, 130 Ctrl-C,
    143 SIGTERM); both interrupts print the command that resumes the study. A frozen plan whose token budget is out
    of reach of its updates is warned about once, however often the command reads it
    (:func:`~gradprobe.training.budget.reach_warned_once`)."""
    with reach_warned_once():
        return _study_command(args)


def _study_command(args) -> int:
    """``gradprobe study`` within :func:`study_main`'s one warning per frozen plan."""
    from ..study.analysis import format_rankings
    from ..study.runner import StudyError, run_study

    if (why := _contradiction(args)) is not None:
        return _err(why)
    if args.power:
        return _power(args)
    if args.pilot:
        return _err("--pilot goes with --power: gradprobe study --power PLAN --pilot DIR")
    if args.seed_offset is not None and not args.replicate:
        return _err("--seed-offset goes with --replicate DIR")
    say = (lambda m: None) if args.quiet else None
    if args.overwrite_analysis and not args.analyze_only:
        return _err("--overwrite-analysis goes with --analyze-only: gradprobe study --analyze-only --out DIR "
                    "--overwrite-analysis")
    if getattr(args, "reuse_runs", None) and (args.analyze_only or args.replicate):
        return _err("--reuse-runs goes with a plan: gradprobe study PLAN --out DIR --reuse-runs OTHER_STUDY")
    if args.restart and (args.analyze_only or args.replicate):
        return _err("--restart goes with a plan: gradprobe study PLAN --out DIR --restart")
    if getattr(args, "report_to", "none") != "none" and not args.analyze_only:  # before anything is written
        try:
            require_tracker(args.report_to)
        except TrackerUnavailableError as e:
            return _err(str(e))
    if args.replicate:
        return _replicate(args, say)
    if not args.out:
        return _err("give the study folder: --out DIR")
    if args.analyze_only:
        return _analyze_only(args)
    if not args.plan:
        return _err("give the plan file: gradprobe study PLAN --out DIR (or --analyze-only)")
    try:
        with terminate_as_interrupt():  # SIGTERM stops the study as Ctrl-C does
            res = run_study(args.plan, args.out, executor=args.executor, workers=args.workers,
                            ray_address=args.ray_address, probe=not args.no_probe, analyze=not args.no_analysis,
                            say=say, restart=args.restart, report_to=getattr(args, "report_to", "none"),
                            reuse_from=getattr(args, "reuse_runs", None) or (),
                            progress=not getattr(args, "no_progress", False))
    except (PlanError, StudyError, OutputDirError, ValueError) as e:
        return _err(str(e))
    except KeyboardInterrupt as e:  # runner.StudyInterrupted (Ctrl-C or SIGTERM): runs stopped, lock released
        return _interrupted(args, e)
    print(res.summary())
    if (not args.no_analysis) and res.analysis_error is None and res.done:
        import json

        analysis = json.loads((Path(args.out) / "analysis.json").read_text())
        print()
        print(format_rankings(analysis))
        out = shown(str(args.out))  # a newline or tab in the path escaped: one line
        print(f"\nwrote {out}/runs.csv, {out}/analysis.json, {out}/figures/")
    return 0 if res.ok else 1
