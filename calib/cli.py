"""Command line: ``calib rows|fit|report``.

    calib rows STUDY_DIR [STUDY_DIR...] --out ROWS.csv      calibration rows (calib.dataset)
    calib fit ROWS.csv [ROWS.csv...] --out CALIBRATION.json  fit and save a calibration (calib.model)
    calib report STUDY_DIR [STUDY_DIR...] --out REPORT_DIR   report.html, figures, metrics.json (calib.report)

Errors in the input (a missing file or column, a single arm, an incompatible calibration file)
print one line naming the problem and its fix, and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def _add_fit_options(p, *, budget_help: str) -> None:
    p.add_argument("--method", choices=["linear", "isotonic"], default="linear",
                   help="Huber regression of realized on predicted gain, or isotonic (monotone) regression")
    p.add_argument("--features", default="predicted_gain",
                   help="comma-separated feature columns, predicted_gain first (also: alignment, cosine, snr, "
                        "token_multiplier; linear only)")
    p.add_argument("--budget", choices=["tokens", "time", "updates"], default="tokens", help=budget_help)
    p.add_argument("--cv", choices=["arm", "model"], default="arm",
                   help="grouping of the cross-validation and conformal folds: leave one arm / one model out")
    p.add_argument("--interval", choices=["cv_plus", "split"], default="cv_plus",
                   help="conformal method (MAPIE): CV+ over the groups, or split conformal on half the groups")
    p.add_argument("--confidence", type=float, default=0.9, help="confidence level of the prediction intervals")
    p.add_argument("--include-grpo", action="store_true",
                   help="also fit on the grpo arm's own rows (predicted 0, realized 0 by definition)")


def _settings(args) -> dict:
    return {"method": args.method, "features": tuple(f.strip() for f in args.features.split(",") if f.strip()),
            "budget": args.budget, "cv": args.cv, "interval": args.interval, "confidence_level": args.confidence,
            "include_reference": args.include_grpo}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calib", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("rows", help="join a study's probe with its realized gains into calibration rows (CSV)")
    p.add_argument("studies", nargs="+", metavar="STUDY_DIR")
    p.add_argument("--out", required=True, help="rows CSV to write")
    p = sub.add_parser("fit", help="fit a calibrator with conformal intervals and save it (versioned JSON)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("rows", nargs="+", metavar="ROWS.csv")
    p.add_argument("--out", required=True, help="calibration file to write (JSON)")
    _add_fit_options(p, budget_help="matched budget whose rows are fitted (the probe predicts at a token budget)")
    p = sub.add_parser("report", help="calibration report: report.html, figures, metrics.json",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("studies", nargs="+", metavar="STUDY_DIR")
    p.add_argument("--out", required=True, help="report folder")
    _add_fit_options(p, budget_help="headline budget of the cross-validated metrics")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``calib`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "rows":
            return _rows(args)
        if args.command == "fit":
            return _fit(args)
        if args.command == "report":
            return _report(args)
    except (ValueError, OSError) as e:  # RowsError, StudyFormatError, CalibrationFileError are ValueErrors
        print(f"calib {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 1


def _rows(args) -> int:
    from pathlib import Path

    from .dataset import build_rows_many
    from .model import atomic_write_text

    rows = build_rows_many(args.studies)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, rows.to_csv(index=False))
    n_nan = int(rows["target"].isna().sum())
    print(f"wrote {out}: {len(rows)} rows ({rows['arm'].nunique()} arms, {rows['model'].nunique()} model(s), "
          f"budgets {', '.join(sorted(set(rows['budget'])))}; {n_nan} without a realized accuracy)")
    return 0


def _fit(args) -> int:
    import pandas as pd

    from .dataset import read_rows
    from .model import fit_calibration

    rows = pd.concat([read_rows(p) for p in args.rows], ignore_index=True)
    s = _settings(args)
    cal = fit_calibration(rows, **s)
    path = cal.save(args.out)
    c = cal.counts
    print(f"wrote {path}: {s['method']} calibration at the matched {s['budget']} budget, {c['rows']} runs of "
          f"{cal.rows['arm'].nunique()} arms ({c['dropped_reference']} grpo rows left out, "
          f"{c['dropped_nan_target']} rows without a realized accuracy dropped)")
    print("fitted: " + json.dumps(cal.fitted_parameters()) if s["method"] == "linear" else
          f"fitted: isotonic with {len(cal.fitted_parameters()['X_thresholds'])} knots")
    return 0


def _report(args) -> int:
    from .report import write_report

    m = write_report(args.studies, args.out, **_settings(args))
    print(f"wrote {args.out}/report.html and metrics.json ({m['counts']['rows']} runs, {len(m['arms'])} arms)")
    cov = (f"{m['coverage']:.3f}" if m["coverage_rows"] else
           f"n/a (each fold trains on 1 {m['cv']}; conformal intervals need 2, i.e. 3 {m['cv']}s in all)")
    print(f"bias raw {m['raw_bias']:+.2f} -> calibrated {m['calibrated_bias']:+.2f} points; MAE {m['mae']:.2f} "
          f"(raw {m['raw_mae']:.2f}); coverage {cov} at {m['confidence_level']:.0%}; "
          f"Kendall tau {m['kendall_tau']:+.2f}, Spearman rho {m['spearman_rho']:+.2f} (leave-one-{m['cv']}-out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
