"""Command line: ``calib rows|fit|report|apply``.

    calib rows STUDY_DIR [STUDY_DIR...] --out ROWS.csv      calibration rows across studies (calib.dataset)
    calib fit ROWS.csv [ROWS.csv...] --out CALIBRATION.json  fit and save a calibration + domain (calib.model)
    calib report STUDY_DIR [STUDY_DIR...] --out REPORT_DIR   report.html, figures, metrics.json (calib.report)
    calib apply PROBE_DIR [--calibration default|FILE] [--out FILE]   calibrated.json next to probe.json, or FILE
                                                             (calib.apply; a study's probe: printed, written only
                                                             with --out)

Errors in the input (a missing file or column, a single arm, an incompatible calibration file)
print one line naming the problem and its fix, and exit with status 2. ``calib rows`` and ``calib fit`` never
overwrite a file they did not write: an existing ``--out`` that is one of the command's inputs (a rows file, a study's
runs.csv, study.json, analysis.json or plan.toml) or not an earlier output of the same kind (a rows CSV, a calibration
file) is refused before any work; an earlier output is replaced (atomically), and a line on stderr says so; so is
``calib report --validation-out`` (and the report's own files are refused as it; so is one whose folder refuses a new
file, before the report is made). A standard output closed early (``calib fit ... | head``) is not reported as an
error: the files are still written, and the exit status is 1 (Python's note on SIGPIPE).
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import math
import os
import sys
import tempfile
import warnings
from pathlib import Path

from gradprobe.cli.args import CALIBRATION_PATH, CommandParser, in_path, out_path
from gradprobe.layout import (ANALYSIS_JSON, CALIBRATED_JSON, OUTPUT_KINDS, PLAN_COPY, PROBE_JSON, RUNS_CSV,
                              STUDY_JSON, output_kind)
from gradprobe.outputs import OutputDirError

from .apply import CALIBRATED_FORMAT, calibrate, format_calibrated, load_probe, write_calibrated
from .dataset import (FORECASTERS, REFERENCE_ARM, SkippedEvalsWarning, build_rows_many, read_rows,
                      rows_header)
from .file_check import FIT_CHOICES, FIT_DEFAULTS
from .files import REPORT_FILES, refuse_looping_file, write_json, write_text_atomic
from .integrity import ReferenceLikeArmWarning, check_one_row_per_run, check_reference_rows, concat_rows
from .metrics import p_value_text
from .model import fit_calibration, is_blank_file, is_calibration_file, load_calibration
from .noise_floor import NO_SEEDS, heldout_label
from .probe_input import probe_study, probe_study_dir
from .report import validation_record, write_report


def _add_fit_options(p, *, report: bool) -> None:
    p.add_argument("--forecaster", choices=list(FORECASTERS), default=FIT_DEFAULTS["forecaster"],
                   help="the forecast column to correct (gain vs grpo at the token budget, accuracy points)")
    p.add_argument("--method", choices=list(FIT_CHOICES["method"][:2] if report else FIT_CHOICES["method"]),
                   default=FIT_DEFAULTS["method"],
                   help="Huber regression of realized on forecast gain, isotonic (monotone) regression"
                        + ("" if report else ", or none (the forecast as it is)"))
    p.add_argument("--cv", choices=list(FIT_CHOICES["cv"][:3] if report else FIT_CHOICES["cv"]),
                   default=FIT_DEFAULTS["cv"],
                   help="grouping of the validation and conformal folds: leave one study out, one arm out within its "
                        "study" + ("" if report else ", or one model out (each fold holds out every row of one model, "
                                   "so the intervals allow for a model the rows do not cover; needs rows of 2+ models)")
                        + " (auto: study when there are 2+ studies, else arm)")
    p.add_argument("--interval", choices=list(FIT_CHOICES["interval"]), default=FIT_DEFAULTS["interval"],
                   help="conformal method (MAPIE): CV+ over the groups, or split conformal on half the groups")
    p.add_argument("--confidence", type=float, default=FIT_DEFAULTS["confidence_level"],
                   help="confidence level of the prediction intervals")
    p.add_argument("--include-grpo", action="store_true",
                   help="also fit on the grpo arm's own rows (forecast 0, realized 0 by definition)")


def _settings(args) -> dict:
    return {"forecaster": args.forecaster, "method": args.method, "cv": args.cv, "interval": args.interval,
            "confidence_level": args.confidence, "include_reference": args.include_grpo}


_STUDY = "the --out folder of a finished `gradprobe study` (e.g. data/study_tiny)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calib", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True,
                                parser_class=CommandParser)  # an unknown option: the command's own usage
    p = sub.add_parser("rows", help="join studies' forecasts with their realized gains into calibration rows (CSV)")
    p.add_argument("studies", nargs="+", metavar="STUDY_DIR", type=in_path(_STUDY))
    p.add_argument("--out", type=out_path, required=True, help="rows CSV to write")
    p = sub.add_parser("fit", help="fit a calibrator with conformal intervals and its domain, save it (versioned JSON)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("rows", nargs="+", metavar="ROWS.csv",
                   type=in_path("a rows CSV (`calib rows STUDY_DIR... --out ROWS.csv` writes it)"))
    p.add_argument("--out", type=out_path, required=True, help="calibration file to write (JSON)")
    _add_fit_options(p, report=False)
    p = sub.add_parser("report", help="calibration report: report.html, figures, metrics.json",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("studies", nargs="+", metavar="STUDY_DIR", type=in_path(_STUDY))
    p.add_argument("--out", type=out_path, required=True, help="report folder")
    p.add_argument("--validation-out", default=None, metavar="JSON",
                   type=in_path("a JSON file to write, or omit the option for none"),
                   help="also write the forecaster choice of `gradprobe probe --forecaster auto` (the forecaster with "
                        "the lowest validated error) to this file; the shipped one is "
                        "gradprobe/data/curves/forecast_validation.json (an existing file is replaced only when it "
                        "is an earlier such record)")
    _add_fit_options(p, report=True)
    p = sub.add_parser("apply", help="calibrate a probe result: writes calibrated.json next to its probe.json (a "
                                     "study's probe: printed only, unless --out)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("probe", metavar="PROBE_DIR", help="a `gradprobe probe --out` folder (or its probe.json)",
                   type=in_path("a `gradprobe probe --out` folder or its probe.json"))
    p.add_argument("--calibration", default="default", metavar="default|PATH", help="calibration file",
                   type=in_path(CALIBRATION_PATH))
    p.add_argument("--out", type=out_path, default=None, metavar="FILE",
                   help="the calibrated.json to write (default: next to probe.json; a study's probe folder, "
                        "STUDY/probe, gets no file of calib's: the result is printed, and written only to --out, "
                        "outside any study, run or report folder)")
    return parser


_SHOW_WARNING = warnings.showwarning


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``calib`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    commands = {"rows": _rows, "fit": _fit, "report": _report, "apply": _apply}
    try:
        with warnings.catch_warnings():  # calib's own warnings read as one plain line, like its errors
            warnings.showwarning = _show_warning  # restored on exit by catch_warnings
            status = commands[args.command](args)
        sys.stdout.flush()  # a closed stdout shows here, not at exit
        return status
    except BrokenPipeError:  # stdout closed early (`calib fit ... | head`): not an error of calib's; the files are
        # written. Python's note on SIGPIPE: point stdout at devnull so the flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (ValueError, OSError) as e:  # RowsError, StudyFormatError, CalibrationFileError... are ValueErrors
        print(f"calib {args.command}: error: {e}", file=sys.stderr)
        return 2


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``calib: warning: MESSAGE`` on stderr for calib's warnings and the study forecaster's
    :class:`~gradprobe.forecast.SkippedEvalsWarning` (about a study calib reads); other warnings keep Python's
    format."""
    if category.__module__.split(".")[0] == "calib" or issubclass(category, SkippedEvalsWarning):
        print(f"calib: warning: {message}", file=sys.stderr if file is None else file)
    else:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


def _rows(args) -> int:
    out = Path(args.out)
    _refuse_bad_file_out(out, "--out", "the rows CSV", "rows.csv")
    study_files = [Path(d) / name for d in args.studies for name in _STUDY_FILES]
    replaced = _check_out_file(out, "rows", study_files, "study file", "calibration rows CSV (`calib rows`)",
                               "rows.csv")
    rows = build_rows_many(args.studies)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, rows.to_csv(index=False))
    _say_replaced(replaced)
    n_nan = int(rows["target"].isna().sum())
    print(f"wrote {out}: {len(rows)} rows ({rows['study'].nunique()} studies, {rows['arm'].nunique()} arms, "
          f"{rows['model'].nunique()} model(s), {rows['task'].nunique()} task(s); {n_nan} without a realized accuracy)")
    return 0


def _refuse_bad_file_out(path: Path, option: str, what: str, example: str) -> None:
    """Refuse, before any work, an output file ``path`` (given as ``option``) that is a folder, lies under a file, or
    is or lies under a symbolic link in a loop (:func:`calib.files.refuse_looping_file`).

    Raises
    ------
    gradprobe.outputs.OutputDirError
        Naming ``option``, the path in the way and the fix (another ``option``; ``example``: a file name in it); errno
        ELOOP for a symlink loop, with the loop's chain.
    """
    refuse_looping_file(path, f"choose another {option}")
    if path.is_dir():
        raise OutputDirError(errno.EISDIR, f"{option} {str(path)!r} is a folder, not a file; {what} is one file: "
                                           f"choose another {option} (a file path, e.g. {str(path / example)!r})")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputDirError(errno.ENOTDIR, f"{option} {str(path)!r}: {str(parent)!r} is a file, not a folder, "
                                                f"so {what} cannot be written under it; choose another {option}")


#: files of a study folder ``calib rows`` reads: never its ``--out``, even when one was overwritten with rows
_STUDY_FILES = (RUNS_CSV, STUDY_JSON, ANALYSIS_JSON, PLAN_COPY)


def _check_out_file(out: Path, command: str, inputs, input_what: str, what: str, example: str) -> str | None:
    """Refuse, before any work, an existing ``--out`` file ``out`` of ``calib COMMAND`` (``rows``, ``fit`` or
    ``apply``) that calib did not write, or that is one of its ``inputs``. Returns None, or, when ``out`` is an
    earlier output of the same kind, the line :func:`_say_replaced` prints once it is replaced.

    ``calib fit`` replaces a calibration file (:func:`calib.model.is_calibration_file`: its format marker), ``calib
    rows`` a rows CSV (:func:`calib.dataset.rows_header`: calib's rows columns), ``calib apply`` a calibrated.json
    (:func:`_is_calibrated_file`); any other file (the rows themselves, a study's ``runs.csv`` or ``plan.toml``, a
    user's file) is never overwritten; an empty or whitespace-only file is written over (it holds nothing to lose: a
    ``mktemp`` file; :func:`calib.model.is_blank_file`).
    All write atomically
    (a temporary file renamed over ``out``), so a failed write leaves ``out`` as it was.

    Raises
    ------
    gradprobe.outputs.OutputDirError
        One line: ``out``, what it holds (``input_what``, or :func:`_held`) and the fix (another ``--out``, e.g.
        ``example``; ``what``: the file the command writes).
    """
    if not out.is_file():
        return None
    if out.name == example:  # the suggestion must not be the file refused
        example = f"{Path(example).stem}_new{Path(example).suffix}"
    for given in inputs:
        if Path(given).is_file() and os.path.samefile(out, given):
            raise OutputDirError(errno.EEXIST, f"--out {str(out)!r} is the {input_what} {str(given)!r} this command "
                                               f"reads: writing the {what} there would destroy it; choose another "
                                               f"--out (e.g. {str(out.with_name(example))!r})")
    if is_blank_file(out):  # nothing to lose (a `mktemp` file, or one that holds only whitespace)
        return None
    ours = {"fit": is_calibration_file, "apply": _is_calibrated_file}.get(command, _is_rows_file)(out)
    if ours:
        return f"calib {command}: replaced the earlier {what} {out}"
    raise OutputDirError(errno.EEXIST, f"--out {str(out)!r} exists and is no {what} but {_held(out)}; calib "
                                       f"{command} replaces only its own earlier output and never overwrites another "
                                       f"file: choose another --out (e.g. {str(out.with_name(example))!r}), or move "
                                       "the file away")


#: Keys of every record :func:`calib.forecaster_choice.validation_record` writes: the mark of an earlier one
_VALIDATION_KEYS = {"best", "mae", "cv", "rows", "studies", "evidence", "source"}


def _check_validation_out(path: Path, report: Path) -> str | None:
    """Refuse, before any work, a ``calib report --validation-out`` file ``path`` that is one of the files the report
    writes into its folder ``report`` (:data:`calib.files.REPORT_FILES`: one would overwrite the other), or an
    existing file that is no earlier validation record (a study's ``runs.csv`` or ``analysis.json``, a rows CSV, a
    calibration: never overwritten); an empty or whitespace-only file is written over. Returns None, or the line
    :func:`_say_replaced` prints once an earlier record is replaced.

    Raises
    ------
    gradprobe.outputs.OutputDirError
        One line: the path, what it holds (:func:`_held`) or which report file it is, and the fix (another
        ``--validation-out``).
    """
    example = path.with_name("forecast_validation.json" if path.name != "forecast_validation.json" else
                             "forecast_validation_new.json")
    if path.name in REPORT_FILES and os.path.realpath(path.parent) == os.path.realpath(report):
        raise OutputDirError(errno.EEXIST, f"--validation-out {str(path)!r} is the report's own {path.name} (--out "
                                           f"{str(report)!r}): one would overwrite the other; choose another "
                                           f"--validation-out (e.g. {str(example)!r})")
    if not path.is_file() or is_blank_file(path):
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict) and _VALIDATION_KEYS <= set(doc):
        return f"calib report: replaced the earlier forecaster validation record {path}"
    raise OutputDirError(errno.EEXIST, f"--validation-out {str(path)!r} exists and is no forecaster validation record "
                                       f"but {_held(path)}; calib report replaces only an earlier validation record "
                                       f"and never overwrites another file: choose another --validation-out (e.g. "
                                       f"{str(example)!r}), or move the file away")


def _refuse_unwritable_file_out(path: Path, option: str, what: str) -> None:
    """Refuse, before any work, an output file ``path`` (given as ``option``) that could not be written once the work
    is done: its folder, or, when that folder is missing, the nearest existing folder above it (where ``mkdir -p``
    would create it), refuses a new file. Proven by creating and removing an empty temporary file there (the atomic
    writer's own first step), not by the permission bits, which do not bind root: a read-only mount, ``/sys``, a
    folder without write permission for a user. Nothing is left behind.

    Raises
    ------
    gradprobe.outputs.OutputDirError
        One line naming ``option``, the path, the folder that refused the file and why, and the fix (make that
        folder writable, or choose another ``option`` in a writable folder).
    """
    folder = next((p for p in (path.parent, *path.parent.parents) if os.path.lexists(p)), Path("."))
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
    except OSError as e:
        where = (f"its folder {str(folder)!r} refuses a new file" if folder == path.parent else
                 f"its folder {str(path.parent)!r} would be created in {str(folder)!r}, which refuses a new entry")
        raise OutputDirError(e.errno, f"{option} {str(path)!r}: {what} cannot be written there, as {where} "
                                      f"({e.strerror or e}); nothing was made: make {str(folder)!r} writable, or "
                                      f"choose another {option} (a file in a writable folder)") from None
    os.close(fd)
    os.unlink(probe)


def _is_rows_file(path: Path) -> bool:
    """Whether ``path`` holds calibration rows (:func:`calib.dataset.rows_header`)."""
    return rows_header(path) is not None


def _say_replaced(line: str | None) -> None:
    """Print ``line`` (:func:`_check_out_file`'s, if any) on stderr: the earlier output was replaced."""
    if line:
        print(line, file=sys.stderr)


def _held(path: Path) -> str:
    """What the file ``path`` holds, as a phrase for :func:`_check_out_file`."""
    if rows_header(path) is not None:
        return "calibration rows (a CSV of `calib rows`)"
    if is_calibration_file(path):
        return "a calibration file (`calib fit`)"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "a binary or unreadable file"
    try:
        d = json.loads(text)
    except ValueError:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return f"a text file (first line {first[:60]!r})" if first else "blank text"
    kind = d.get("format") if isinstance(d, dict) else None
    return f'JSON of "format": {json.dumps(kind)}' if isinstance(kind, str) else "a JSON document of another tool"


def _fit(args) -> int:
    replaced = _check_out_file(Path(args.out), "fit", args.rows, "rows file", "calibration file (`calib fit`)",
                               "calibration.json")
    rows = concat_rows(read_rows(p) for p in args.rows)  # each run's file and line kept
    source = f"the rows file(s) {', '.join(map(str, args.rows))}"
    check_one_row_per_run(rows, source)  # named by file
    check_reference_rows(rows, source, REFERENCE_ARM)  # refusals name the files; its warning is given once, here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReferenceLikeArmWarning)
        cal = fit_calibration(rows, **_settings(args))
    path = cal.save(args.out)
    _say_replaced(replaced)
    c = cal.counts
    print(f"wrote {path}: {cal.method} correction of {cal.forecaster}, {c['rows']} runs of {cal.rows['arm'].nunique()} "
          f"arms in {cal.rows['study'].nunique()} studies, conformal folds by {cal.cv} ({c['dropped_reference']} grpo "
          f"rows left out, {c['dropped_nan_target']} without a realized accuracy, {c['dropped_no_forecast']} without "
          f"a forecast: {', '.join(c['no_forecast_arms']) or 'none'})")
    print("fitted: " + json.dumps(cal.fitted_parameters()) if cal.method != "isotonic" else
          f"fitted: isotonic with {len(cal.fitted_parameters()['X_thresholds'])} knots")
    print(f"domain: models {[m['key'] for m in cal.domain.models]}, tasks {[t['key'] for t in cal.domain.tasks]}, "
          f"{cal.domain.budget_kind} budgets {cal.domain.budget_range}")
    infinite = cal.infinite_interval_note()  # said when it is fitted, not first when it is applied
    if infinite:
        print(f"note: {infinite}")
    return 0


def _report(args) -> int:
    replaced = None
    if args.validation_out:  # checked before the report is made (it would be written, then this refused)
        _refuse_bad_file_out(Path(args.validation_out), "--validation-out", "the forecaster validation record",
                             "forecast_validation.json")
        replaced = _check_validation_out(Path(args.validation_out), Path(args.out))
        _refuse_unwritable_file_out(Path(args.validation_out), "--validation-out", "the forecaster validation record")
    m = write_report(args.studies, args.out, **_settings(args))
    if args.validation_out:  # every file is written before anything is printed (stdout may be closed early)
        record = validation_record(m, source="calib report " + " ".join(str(s) for s in args.studies)
                                   + f" --out {args.out}")
        Path(args.validation_out).parent.mkdir(parents=True, exist_ok=True)  # as `calib rows` and `apply` --out
        try:
            write_json(args.validation_out, record, indent=2, newline=True)
        except OutputDirError as e:  # its message ends "choose another --out": the option at fault is this one
            raise OutputDirError(e.errno, str(e).replace("--out", "--validation-out")) from e
        _say_replaced(replaced)
    print(f"wrote {args.out}/report.html and metrics.json ({m['rows']} runs of {len(m['arms'])} arms besides grpo, "
          f"distinct names over {m['n_studies']} studies; study-arms below count an arm once per study)")
    for note in m["notes"]:
        print(f"note: {note}")
    if args.validation_out:
        print(f"wrote {args.validation_out}: --forecaster auto uses {record['best']} ({record['evidence']})")
    b = m.get("bootstrap") or {}
    for cv in m["cv_modes"]:
        print(f"leave one {cv} out, MAE [{_boot_what(b)}] as forecast -> calibrated "
              f"({m['method']}), on the {m['common_rows']} runs all compared forecasters cover:")
        for f, e in m["errors"][cv].items():
            raw, cal = e["raw"].get("common", e["raw"]), e["calibrated"].get("common", e["calibrated"])
            print(f"  {f:<24}{_n(raw.get('mae'))} {_iv(raw)} -> {_n(cal.get('mae'))} {_iv(cal)}   "
                  f"coverage {_cov(raw)} -> {_cov(cal)}")
        shown = [_print_difference(f, [e[k].get("common", {}).get("mae_difference_vs_cost_only")
                                       for k in ("raw", "calibrated")]) for f, e in m["errors"][cv].items()]
        if any(shown):
            print(f"  {'':<36}(detectable: the smallest difference these studies could detect, 80% power at two-sided "
                  "5%: 2.80 bootstrap standard errors, calib.bootstrap.detectable_difference)")
        if cv == m["headline_cv"]:  # raw forecasts do not depend on what is held out: shown once
            _print_floor(m, cv)
        reasons = {r.get("mae_interval_reason") for e in m["errors"][cv].values() for k in ("raw", "calibrated")
                   for r in (e[k].get("common", e[k]),)} - {None}
        for reason in sorted(reasons):
            print(f"  no interval: {reason}")
        for reason in sorted({r.get("coverage_reason") for e in m["errors"][cv].values() for k in ("raw", "calibrated")
                              for r in (e[k].get("common", e[k]),)} - {None}):
            print(f"  coverage: {reason}")
    for col, r in m["ranking"].items():
        print(f"ranking by {col:<36} Kendall tau {_n(r['kendall_tau'], '+.2f')} "
              f"{_iv(r, 'kendall_tau_interval', '+.2f')} (p {p_value_text(r)}), "
              f"Spearman rho {_n(r['spearman_rho'], '+.2f')}, {r['n_arms']} study-arms (grpo's too) in "
              f"{r['n_studies']} studies; "
              f"ceiling {_n(r.get('oracle_kendall_tau', math.nan), '+.2f')}, "
              f"significant from {_n(r.get('critical_kendall_tau', math.nan), '+.2f')}")
    print(f"([lo, hi]: the tau's {(m.get('bootstrap') or {}).get('level', 0.95):.0%} study-cluster bootstrap "
          "percentile interval, calib.bootstrap.pooled_interval; ceiling: the Kendall tau a forecaster knowing each "
          "arm's mean could expect against realized means with this seed noise, calib.metrics.oracle_kendall_tau; "
          "significant from: the smallest pooled tau the permutation test calls significant at one-sided 5% on these "
          "arms, calib.metrics.critical_value)")
    for reason in sorted({r.get("kendall_tau_interval_reason") for r in m["ranking"].values()} - {None}):
        print(f"no tau interval: {reason}")
    for reason in sorted({r.get("oracle_reason") for r in m["ranking"].values()} - {None}):
        print(f"no ceiling: {reason}")
    for line in _critical_lines(m):
        print(line)
    return 0


#: How :func:`_critical_lines` names a score of the ranking on the arms all compared forecasters cover.
_COMMON_ARMS = " on the arms all compared forecasters cover"


def _critical_lines(m: dict) -> list[str]:
    """Why "significant from n/a" (``critical_reason`` of :func:`calib.metrics.pooled_rank_agreement`), one line per
    score, for the ranking on each forecaster's arms (``ranking``, the lines printed) and on the arms all compared
    forecasters cover (``ranking_common_arms``, the report page's second table; named so); a score whose reason is
    the same in both is said once, with no qualifier. A metrics.json of an older calib has no reason: no line."""
    said: dict = {}
    for part, where in (("ranking", ""), ("ranking_common_arms", _COMMON_ARMS)):
        for col, r in (m.get(part) or {}).items():
            if r.get("critical_reason") and _n(r.get("critical_kendall_tau", math.nan)) == "n/a":
                said.setdefault((col, r["critical_reason"]), where)  # the same score and reason: once
    return [f"significant from n/a for {col}{where}: {reason}" for (col, reason), where in said.items()]


def _print_difference(forecaster: str, d: list) -> bool:
    """Print the paired MAE difference of ``forecaster`` minus cost only, as forecast -> calibrated (``d``: the two
    ``mae_difference_vs_cost_only`` records, None for none; nothing printed when both are None), each with its
    interval and the smallest difference the studies could detect (``detectable_difference``, when recorded).
    Returns whether a detectable difference was printed."""
    if not any(d):
        return False
    cells = ["n/a" if x is None else f"{_n(x['estimate'], '+.2f')} {_iv(x, 'interval', '+.2f')}"
             + ("" if x.get("detectable_difference") is None else f" detectable {_n(x['detectable_difference'])}")
             for x in d]
    print(f"  {forecaster + ' - cost only':<36}" + " -> ".join(cells)
          + "   (paired MAE difference, < 0: fewer errors than cost only)")
    return any(x is not None and x.get("detectable_difference") is not None for x in d)


def _boot_what(b: dict) -> str:
    """What the ``[lo, hi]`` beside an MAE is (``metrics["bootstrap"]``), or why there is none (under min_studies)."""
    k, least = b.get("n_clusters") or 0, b.get("min_studies", 2)
    if k < least:
        return f"no study-cluster bootstrap interval: {k} studies, under {least}"
    return f"{b.get('level', 0.95):.0%} study-cluster bootstrap interval, {b.get('resamples')} resamples of {k} studies"


def _print_floor(m: dict, cv: str) -> None:
    """The seed-noise floor beside the errors (:mod:`calib.noise_floor`): run level, then arm means."""
    fl = m.get("seed_noise_floor")
    if not fl:
        return
    if fl["reason"] and fl["interval"] is None and not fl["arms"]:
        print(f"  {'seed-noise floor':<24}n/a: {fl['reason']}")
        return
    left = f"; {fl['single_seed_arms']} arm(s) of one seed left out" if fl.get("single_seed_arms") else ""
    print(f"  {'seed-noise floor':<24}{_n(fl['estimate'])} {_iv(fl, 'interval')}   (what a forecaster knowing each "
          f"arm's mean would miss single runs by, from the seed noise of {fl['arms']} study-arms{left}; it leaves out "
          "grpo's own noise and is itself uncertain, so an MAE near it is at the floor)")
    print("  on arm means (each arm once, mean over its seeds):")
    for f, e in m["errors"][cv].items():
        a = e["raw"].get("common", {}).get("arm_level")
        if a:
            over = f"{a['arms']} study-arms" + ("" if a["floor_arms"] == a["arms"]
                                                else f", floor over {a['floor_arms']}")
            print(f"    {f:<22}{_n(a['mae']['estimate'])} {_iv(a['mae'], 'interval')}   "
                  f"floor {_n(a['floor']['estimate'])} {_iv(a['floor'], 'interval')}   ({over}, as forecast)")
    if fl.get("never_trained"):  # arms left out of the floors and the arm-mean errors (calib.noise_floor)
        untrained = "; ".join(f"{e['study']}/{e['arm']}: {e['why']}" for e in fl["never_trained"])
        print(f"  {'':<24}left out: {untrained}")
    _print_heldout(m.get("heldout_floor"))


def _print_heldout(h: dict | None) -> None:
    """The run-level floor on larger held-out sets (:func:`calib.noise_floor.heldout_floor`)."""
    if not h:
        return
    if not h["arms"]:
        why = "; ".join(h["skipped"][:3]) + (f"; and {len(h['skipped']) - 3} more" if len(h["skipped"]) > 3 else "")
        print(f"  {'held-out split':<24}n/a: {why or NO_SEEDS}")
        return
    items = ", ".join(map(str, sorted({a["items"] for a in h["arms"]})))
    sizes = "   ".join(f"{heldout_label(f['multiple'])} {_n(f['estimate'])} {_iv(f, 'interval')}" for f in h["floors"])
    print(f"  {'held-out split':<24}floor on {sizes}   (N = {items} held-out items; {h['runs']} runs, "
          f"{len(h['arms'])} study-arms; on average {_n(h['heldout_share'])} of the seeds' variance is the held-out "
          "set's "
          "own error, which more items remove)")
    if h["skipped"]:
        print(f"  {'':<24}not split: {'; '.join(h['skipped'])}")


def _apply(args) -> int:
    cal = load_calibration(args.calibration)
    result, folder, task = load_probe(args.probe)
    out, replaced = _apply_out(args, folder)  # checked before anything is written
    study = probe_study(folder)  # a study's probe: the calibration may have been fitted on its runs (in-sample)
    doc = calibrate(cal, result, source=str(args.calibration), task=task, where=str(Path(folder) / PROBE_JSON),
                    study=study)
    if args.out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
    path = None if out is None else write_calibrated(folder, doc, out=None if args.out is None else out)
    _say_replaced(replaced)
    print(format_calibrated(doc))
    if path is None:
        study_dir = probe_study_dir(folder)
        study_dir = study_dir if os.path.relpath(study_dir).startswith("..") else os.path.relpath(study_dir)
        print(f"\nnot written: {folder} is the probe folder of the study {study_dir} ({STUDY_JSON} there), and calib "
              "apply adds no file to a study (as `gradprobe probe --out` refuses a study's probe folder): pass --out "
              "FILE to write calibrated.json elsewhere")
        return 0
    print(f"\nwrote {path}" + (" (outside the calibration's domain: see the notes)" if doc["outside_domain"] else ""))
    return 0


def _apply_out(args, folder: Path) -> tuple[Path | None, str | None]:
    """Where ``calib apply`` writes (``--out``, else ``calibrated.json`` next to probe.json; None: nowhere, for a
    study's probe folder without ``--out``) and :func:`_check_out_file`'s line for an earlier one it replaces.

    Raises
    ------
    gradprobe.outputs.OutputDirError
        ``--out`` is a folder, lies under a file, lies in another command's folder (a study, a study's probe, a
        run, a calibration report...: :func:`gradprobe.layout.output_kind`; a probe's own folder is accepted), or
        is an existing file that is no earlier calibrated.json (one of the inputs, a user's file): one line, with
        the fix.
    """
    if args.out is None:
        return (None if probe_study_dir(folder) is not None else Path(folder) / CALIBRATED_JSON), None
    out = Path(args.out)
    _refuse_bad_file_out(out, "--out", "calibrated.json", CALIBRATED_JSON)
    found = output_kind(out.parent)
    if found is not None and found[0] != "probe":
        raise OutputDirError(errno.EEXIST, f"--out {str(out)!r} lies in {str(out.parent)!r}, which is "
                                           f"{OUTPUT_KINDS[found[0]]} ({found[1]}); calib apply adds no file to "
                                           "another command's folder: choose another --out (e.g. a file in an "
                                           "empty folder, or in a `gradprobe probe --out` folder)")
    replaced = _check_out_file(out, "apply", [Path(folder) / PROBE_JSON, args.calibration], "input file",
                               "calibrated file (`calib apply`)", CALIBRATED_JSON)
    return out, replaced


def _is_calibrated_file(path: Path) -> bool:
    """Whether ``path`` holds ``calib apply``'s output (JSON with ``"format": "gradprobe-calibrated"``)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == CALIBRATED_FORMAT


def _cov(r: dict) -> str:
    """Coverage, marked when the intervals are infinite (too few groups for a finite conformal interval)."""
    width = r.get("mean_interval_width")
    return _n(r.get("coverage")) + (" (infinite intervals)" if width is not None and width == math.inf else "")


def _n(x, spec=".2f") -> str:
    return "n/a" if x is None or x != x else format(x, spec)


def _iv(r: dict, key="mae_interval", spec=".2f") -> str:
    """``[lo, hi]`` of a bootstrap interval, or ``[no interval]`` (the reason is printed once below)."""
    iv = r.get(key)
    if iv is None:
        return "[no interval]"
    return f"[{format(iv[0], spec)}, {format(iv[1], spec)}]"


if __name__ == "__main__":
    sys.exit(main())
