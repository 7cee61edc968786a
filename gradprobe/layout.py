"""The output-folder contract: every file name gradprobe writes or reads, in one place (issue 15).

Torch-free and import-free within gradprobe, so any layer (and ``calib``) may read a folder through it
without an import cycle. Writers live in :mod:`gradprobe.outputs`; this module only names things.

Four kinds of folder (README, "Layout"):

- a **training run** (``gradprobe train --out RUN`` or ``STUDY/runs/<arm>/seed<S>``): :data:`CONFIG_JSON`,
  :data:`METRICS_JSONL` (one line per update and per eval), :data:`EVAL_ITEMS_JSONL` (per-item results of
  every eval), :data:`SUMMARY_JSON` (written last: its presence marks a finished run), checkpoints;
- a **probe** (``gradprobe probe --out DIR`` or ``STUDY/probe``): :data:`PROBE_JSON`, :data:`REPORT_HTML`,
  :data:`CALIBRATED_JSON`, :data:`ALIGNMENT_SAFETENSORS`, :data:`TOKENS_JSONL`, :data:`ARMS_JSON` in a study,
  whose guided arms' own probes are probe folders in ``probe/guided/<arm>`` (:data:`GUIDED_PROBES`);
- a **study** (``gradprobe study --out STUDY``): :data:`PLAN_COPY` (the frozen plan), :data:`STUDY_JSON`,
  :data:`RUNS_CSV` (columns :data:`RUNS_CSV_COLUMNS`, one row per eval of every run), :data:`EVAL_ITEMS_GZ`,
  :data:`ANALYSIS_JSON`, :data:`FIGURES`, ``runs/<arm>/seed<S>`` (:func:`run_dir`) and ``probe/``
  (:func:`probe_dir`);
- a **calibration report** (``calib report STUDY... --out REPORT``, :mod:`calib.report`): ``report.html`` (the
  probe's name too: so neither command writes into the other's folder), ``metrics.json``, ``rows.csv`` and
  :data:`CV_PREDICTIONS_CSV`, whose presence marks the folder.

A fifth kind is read, never written by these commands: a **model** folder (a tier ``gradprobe warmstart``
built, with :data:`TIER_FILES`; or ``save_pretrained`` weights, :data:`MODEL_WEIGHTS` beside a ``config.json``
that is not a run's). Every command refuses it as an ``--out`` (:func:`output_kind`), so no output is mixed
into a model and no run's ``config.json`` replaces the model's. A folder holding only a killed probe's
:data:`EARLIER_PROBE` (non-empty) is that probe's too: every other command refuses it, since ``gradprobe probe`` then
refuses their output there and the earlier probe would be stranded (``gradprobe probe --out`` on it puts it back).
So is a folder holding :data:`UNFINISHED_PROBE`, a probe's record of the files and ``batch_K/`` folders it is
writing, left with them by a probe killed before its ``probe.json`` (``gradprobe probe --out`` on it removes them).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .outputs import shell_word

__all__ = ["rerun_advice", "study_probe_advice", "restore_advice", "probe_study", "study_probe_refusal", "keeps_runs",
           "RETRAIN_CLAUSE",
           "CONFIG_JSON", "METRICS_JSONL", "EVAL_ITEMS_JSONL", "SUMMARY_JSON", "CHECKPOINT_POINTER", "WEIGHTS_DIR", "PROBE_JSON", "REPORT_HTML",
           "CALIBRATED_JSON", "ALIGNMENT_SAFETENSORS", "TOKENS_JSONL", "ARMS_JSON", "GUIDED_PROBES", "GUIDED_LEFT_OUT",
           "EARLIER_PROBE",
           "EARLIER_MANIFEST", "UNFINISHED_PROBE", "PLAN_COPY", "STUDY_JSON", "RUNS_CSV",
           "PROBE_FILES", "PROBE_BATCH_DIR",
           "RUNS_CSV_COLUMNS", "EVAL_ITEMS_GZ", "ANALYSIS_JSON", "FIGURES", "CV_PREDICTIONS_CSV", "run_dir", "probe_dir",
           "TIER_FILES", "MODEL_WEIGHTS",
           "OUTPUT_KINDS", "output_kind"]

# ---------------------------------------------------------------------------- a training run
CONFIG_JSON = "config.json"            # the run config and the plan's sha256; a resume must match it
METRICS_JSONL = "metrics.jsonl"        # one JSON line per update and per eval ("eval": true)
EVAL_ITEMS_JSONL = "eval_items.jsonl"  # per-item results of every eval (gradprobe.training.metrics.evaluate "items")
SUMMARY_JSON = "summary.json"          # written last: a run folder with it is finished
CHECKPOINT_POINTER = "checkpoint.json"  # names the run's latest complete checkpoint folder
WEIGHTS_DIR = "weights"  # a run's kept policy weights ([train] save_weights_at): update-UUUUUU.safetensors

# ---------------------------------------------------------------------------- a probe
PROBE_JSON = "probe.json"
CALIBRATED_JSON = "calibrated.json"   # gradprobe probe --calibration: the calibrated forecast (calib.apply)
REPORT_HTML = "report.html"
ALIGNMENT_SAFETENSORS = "alignment.safetensors"
TOKENS_JSONL = "tokens.jsonl"
ARMS_JSON = "arms.json"                # in a study's probe/: arm -> the probe entry that stands for it
GUIDED_PROBES = "guided"               # in a study's probe/: guided/<arm>, the probe of a guided arm's update
#: In a guided arm's probe folder (``probe/guided/<arm>``) instead of ``probe.json``: the record of a probe whose every
#: reward failed on its batch (:func:`gradprobe.study.worker.isolated_probe`); the study then does not run it again.
GUIDED_LEFT_OUT = "left_out.json"
EARLIER_PROBE = ".earlier-probe"       # where an earlier probe's files wait until the new probe has finished
EARLIER_MANIFEST = "manifest.json"     # in EARLIER_PROBE: the names of the earlier probe's files while they move
#: In a probe's folder while the probe writes it: the files (:data:`PROBE_FILES`) and ``batch_K`` folders it writes,
#: each named as the probe starts writing it; deleted once it is complete or rolled back (:mod:`gradprobe.probe.output`)
UNFINISHED_PROBE = ".unfinished-probe.json"
#: Every file a probe writes into its folder (:mod:`gradprobe.probe.output`; a study's ``--restart`` names any other)
PROBE_FILES = (PROBE_JSON, TOKENS_JSONL, ALIGNMENT_SAFETENSORS, REPORT_HTML, CALIBRATED_JSON)
#: The folder of batch K of ``--probe-batches`` inside a probe's folder: ``batch_K`` (:mod:`gradprobe.probe.batches`)
PROBE_BATCH_DIR = re.compile(r"batch_\d+")

# ---------------------------------------------------------------------------- a study
PLAN_COPY = "plan.toml"
STUDY_JSON = "study.json"
RUNS_CSV = "runs.csv"
#: runs.csv's columns, in order: one row per eval of every finished run (units: generated tokens,
#: device-seconds, FLOPs; accuracy as a fraction of the held-out set)
RUNS_CSV_COLUMNS = ("arm", "seed", "update", "generated_tokens", "device_seconds", "accuracy", "accuracy_sampled",
                    "reward", "lr_scale", "flops", "response_length", "format_rate", "kl_init",
                    "step_validity_rate", "step_count_deviation")
EVAL_ITEMS_GZ = "eval_items.jsonl.gz"  # every finished run's eval_items.jsonl, with arm and seed on each line
ANALYSIS_JSON = "analysis.json"
FIGURES = "figures"

# ---------------------------------------------------------------------------- a calibration report (calib report)
CV_PREDICTIONS_CSV = "cv_predictions.csv"  # every held-out prediction; marks a calib report's folder

# ---------------------------------------------------------------------------- a model (read, never written here)
#: a tier's records (``gradprobe warmstart``: its build record; :data:`gradprobe.models.TIER_MARKER`)
TIER_FILES = ("warmstart.json", "gradprobe_tier.json")
#: ``save_pretrained`` weights: with a ``config.json`` that is not a run's, they mark a model's folder
MODEL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


def run_dir(out: str | Path, arm: str, seed: int) -> Path:
    """``out/runs/<arm>/seed<S>``: the folder of one run of a study."""
    return Path(out) / "runs" / arm / f"seed{int(seed)}"


def probe_dir(out: str | Path) -> Path:
    """``out/probe``: the folder of a study's probe of its arms' rewards."""
    return Path(out) / "probe"


#: Why a fix of a study without ``runs/`` (:func:`keeps_runs`) does not resume it, after what resuming would do:
#: "(STUDY has no runs/: resuming it would train every run again)"
RETRAIN_CLAUSE = "would train every run again"


def keeps_runs(study: str | Path) -> bool:
    """Whether the study folder ``study`` keeps its run folders: ``study/runs`` is a directory (or a link to one).

    A study without ``runs/`` is a shipped study keeping only its tables (``runs.csv``, ``analysis.json``,
    ``probe/``): resuming it :data:`RETRAIN_CLAUSE`, so the fix of its damaged or missing file restores the file from
    a copy of the study. False where ``study`` or ``runs`` is missing, or ``runs`` is a file or a dangling link.
    Raises OSError only where ``study`` cannot be looked into (:meth:`pathlib.Path.is_dir`: ``PermissionError``)."""
    return (Path(study) / "runs").is_dir()


#: kind of output folder -> how a message names it; :func:`output_kind` returns these keys
OUTPUT_KINDS = {"run": "a training run (`gradprobe train`)", "study": "a study (`gradprobe study`)",
                "probe": "a probe (`gradprobe probe`)", "study probe": "a study's probe folder",
                "guided probe": "a study's guided-arm probe folder",
                "calib report": "a calibration report (`calib report`)",
                "ranking": "a ranking (`gradprobe rank-prompts`)",
                "difficulty eval": "a difficulty evaluation (`gradprobe difficulty-eval`)", "model": "a model",
                "killed probe": ("the earlier probe a killed `gradprobe probe` left aside (`gradprobe probe --out` on "
                                 "this folder puts it back first; or move its files back by hand)"),
                "unfinished probe": ("what a `gradprobe probe` killed before it was complete left (`gradprobe probe "
                                     "--out` on this folder removes it first; or delete the files and batch folders "
                                     f"that its {UNFINISHED_PROBE} names, then that file, by hand)")}
#: marker file -> the kind of folder holding it (checked in this order; the first found names the folder)
_MARKERS = {METRICS_JSONL: "run", SUMMARY_JSON: "run", CHECKPOINT_POINTER: "run", STUDY_JSON: "study",
            RUNS_CSV: "study", ANALYSIS_JSON: "study", PROBE_JSON: "probe", CALIBRATED_JSON: "probe",
            TOKENS_JSONL: "probe", ALIGNMENT_SAFETENSORS: "probe", CV_PREDICTIONS_CSV: "calib report",
            "ranking.csv": "ranking", "rank.json": "ranking", "reliability.png": "difficulty eval"}
# (difficulty-eval's metrics.json is no marker: a calibration report writes one too)


def _earlier_probe_evidence(folder: Path) -> str | None:
    """``".earlier-probe/"`` when ``folder`` holds a non-empty :data:`EARLIER_PROBE` (left by a killed probe), else
    None."""
    aside = folder / EARLIER_PROBE
    try:
        return f"{EARLIER_PROBE}/" if aside.is_dir() and any(aside.iterdir()) else None
    except OSError:  # unreadable: the folder is refused rather than written beside a probe it cannot see
        return f"{EARLIER_PROBE}/"


def output_kind(folder: str | Path) -> tuple[str, str] | None:
    """Which command's output ``folder`` holds, so each command refuses the others' folders.

    Returns
    -------
    (kind, evidence) or None
        ``kind`` a key of :data:`OUTPUT_KINDS` and ``evidence`` the file or path that shows it
        (``"arms.json"``, or ``"plan.toml + study.json in STUDY"`` for a study's probe that lost it:
        :func:`probe_study`; ``"probe/guided/<arm>"``, a marker file, ``"warmstart.json"`` or
        ``"config.json + model.safetensors"`` for a model, ``".earlier-probe/"`` for ``"killed probe"``: a folder
        with no marker whose non-empty :data:`EARLIER_PROBE` holds the earlier probe a killed ``gradprobe probe``
        left aside; :data:`UNFINISHED_PROBE` for ``"unfinished probe"``: a folder with no marker but a probe's, and
        no such ``.earlier-probe/``, that holds a probe's record of what it is writing, left by a probe killed before
        it was complete with what it wrote (its ``probe.json`` written before the forecast, ``report.html``,
        ``batch_K/`` folders; the record goes once a probe is complete); None for a missing or empty folder or one
        holding none of these.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    # a study's probe, with or without its arms.json (probe_study): the other commands refuse it as an --out; read
    # through the resolved path and the path as given (_study_probe_path), so `.` inside it, `STUDY/x/../probe`, a
    # link to it and a STUDY/probe that is itself a link to a folder elsewhere are the study's too
    shared = _study_probe_path(folder)
    if shared is not None and shared[0] == "guided probe":
        return "guided probe", f"probe/{GUIDED_PROBES}/{shared[1].name}"
    if shared is not None:
        study, real = probe_study(folder), shared[1]  # as the user typed it where that names it (_as_given)
        return "study probe", ARMS_JSON if (real / ARMS_JSON).exists() else f"{_study_evidence(real.parent)} in {study}"
    model = _model_evidence(folder)  # before the markers: a model a probe was once written beside stays a model
    if model is not None:
        return "model", model
    found = next(((kind, name) for name, kind in _MARKERS.items() if (folder / name).exists()), None)
    if found is None and (leftover := _earlier_probe_evidence(folder)) is not None:
        return "killed probe", leftover
    if (found is None or found[0] == "probe") and os.path.lexists(folder / UNFINISHED_PROBE):  # killed unfinished
        return "unfinished probe", UNFINISHED_PROBE
    return found


def _model_evidence(folder: Path) -> str | None:
    """What shows that ``folder`` holds a model (a file of :data:`TIER_FILES`, or ``"config.json + WEIGHTS"``
    for :data:`MODEL_WEIGHTS` beside a ``config.json`` without a run's ``"run"`` key), else None."""
    tier = next((name for name in TIER_FILES if (folder / name).is_file()), None)
    if tier is not None:
        return tier
    weights = next((name for name in MODEL_WEIGHTS if (folder / name).is_file()), None)
    if weights is None or not (folder / CONFIG_JSON).is_file():
        return None
    try:
        config = json.loads((folder / CONFIG_JSON).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        config = None  # unreadable: a run never keeps weights beside its config.json, so the weights decide
    if isinstance(config, dict) and "run" in config:
        return None
    return f"{CONFIG_JSON} + {weights}"


def study_probe_advice(study: str | Path, file: str | Path, *, missing: bool = False) -> str:
    """How to write a study's probe file ``file`` again: delete it (unless ``missing``: it is gone already; then the
    record :data:`GUIDED_LEFT_OUT` beside it, where a guided probe whose every reward failed left one) and resume the
    study, which re-runs the missing probe and keeps finished runs; for a study without ``runs/`` (a
    shipped study keeps only its tables, so resuming would train every run again), restore the file from a copy of
    the study."""
    study = Path(study)
    if not keeps_runs(study):
        return (f"this is the probe of a study without run folders ({study} has no runs/: resuming it "
                f"{RETRAIN_CLAUSE}): restore {file} from a copy of the study")
    record = Path(file).parent / GUIDED_LEFT_OUT  # a guided probe whose every reward failed: not run again without it
    delete = (f"delete {record} and " if missing and record.is_file() else "" if missing else f"delete {file} and ")
    return (f"this is a study's probe: {delete}resume the study with `gradprobe study "
            f"{shell_word(study / PLAN_COPY)} --out {shell_word(study)}`, which re-runs the missing probe (finished "
            "runs are kept)")


def study_probe_refusal(folder: str | Path, option: str = "--out") -> str | None:
    """Why ``gradprobe probe --out FOLDER`` is refused when ``folder`` (existing or missing) is a study's probe folder
    or lies inside one, with the study's fix, as a phrase after the folder's name; None for any other folder.

    A study's probe folder (``STUDY/probe``, :func:`probe_study`) is found among ``folder`` and its ancestors, both
    resolved and as given made absolute (:func:`_study_probe_ancestor`). Three cases, each with its own wording:

    - ``STUDY/probe`` itself, existing, or a guided arm's ``STUDY/probe/guided/ARM`` that exists or that the study's
      ``arms.json`` names (``"probe_dir": "guided/ARM"``): the study's fix. With ``STUDY/runs/``, delete the probe's
      ``probe.json`` (where there is one) and resume the study (which re-runs the missing probe and keeps finished
      runs); without it (a shipped study keeps only its tables) resuming would train every run again, so the probe
      is left as it is and another ``--out`` chosen;
    - ``STUDY/probe`` missing (a study whose probe was never written): the study has no ``probe/`` yet; resume it
      (with ``runs/``), else choose another ``--out``;
    - any other path inside (``probe/batch_3``, ``probe/newdir``, ``probe/guided``, ``probe/guided/NEWARM`` of an
      arm the study has not, ``probe/guided/ARM/sub``): the study never writes it, and a probe there would be read
      as part of the study's (``load_probe(STUDY/probe)`` reads ``batch_K``), so another ``--out`` is chosen.

    Paths are shown as given where they name the study (:func:`_as_given`). ``option`` is how the fix names the
    folder to choose instead: ``"--out"`` for the command, the argument's name for an API call (``"dir"`` for
    :meth:`gradprobe.ProbeResult.write`, ``"out="`` for :func:`gradprobe.probe`).
    """
    found = _study_probe_path(Path(folder))
    if found is not None and (found[0] == "study probe" or _studys_guided_arm(found[1])):
        return _own_folder_refusal(Path(folder), found, option)
    inside = _study_probe_ancestor(Path(folder))
    if inside is None:
        return None
    probe, depth = inside  # depth >= 1: STUDY/probe itself, existing or missing, is _study_probe_path's
    shown = (_as_given(probe.parent, given, depth + 1) for given in (Path(folder), Path(os.path.normpath(folder))))
    study = next((s for s in shown if s != probe.parent), probe.parent)  # as typed, `x/..` removed where needed
    return (f"is inside the probe folder of study {study} ({study / probe.name}), which only the study writes: choose "
            f"another {option} (an empty folder, or an earlier probe's)")


def _own_folder_refusal(folder: Path, found: tuple[str, Path], option: str) -> str:
    """:func:`study_probe_refusal` for an existing ``STUDY/probe`` or a guided arm's ``STUDY/probe/guided/ARM``
    (``found``: :func:`_study_probe_path`); ``option``: the name of the folder to choose instead."""
    study = probe_study(folder)
    shared = found[1] if found[0] == "study probe" else found[1].parent.parent
    if found[0] == "study probe" and not shared.exists():
        return _no_probe_yet(study, option)
    shown = (f"{ARMS_JSON} {'there' if found[0] == 'study probe' else 'in its probe/'}"
             if (shared / ARMS_JSON).exists() else f"the probe/ of study {study}, whose {ARMS_JSON} is missing")
    if not keeps_runs(study):
        return (f"is a study's probe folder ({shown}) of a study without run folders ({study} has no runs/: "
                f"resuming it to write its probe again {RETRAIN_CLAUSE}): leave it as it is and choose "
                f"another {option} (an empty folder, or an earlier probe's)")
    done = next((folder / n for n in (PROBE_JSON, GUIDED_LEFT_OUT) if (folder / n).exists()), None)
    redo = f"delete {done} and " if done is not None else ""  # a missing one (and no failed probe's record): none
    return (f"is a study's probe folder ({shown}); to redo it {redo}resume the study with `gradprobe study "
            f"{shell_word(study / PLAN_COPY)} --out {shell_word(study)}`, which re-runs the missing probe (finished "
            f"runs are kept); else choose another {option}")


def _no_probe_yet(study: Path, option: str) -> str:
    """:func:`study_probe_refusal` for the missing ``probe/`` of ``study``: resume the study (with ``runs/``), else
    another ``option`` (``--out``)."""
    said = f"is the probe folder of study {study} ({_study_evidence(Path(study))}), which has no probe/ yet"
    if not keeps_runs(study):
        return (f"{said} and only the study writes it; {study} has no runs/ (resuming it to write its probe "
                f"{RETRAIN_CLAUSE}): choose another {option} (an empty folder, or an earlier probe's)")
    return (f"{said}; to write it resume the study with `gradprobe study {shell_word(study / PLAN_COPY)} --out "
            f"{shell_word(study)}`, which runs the missing probe (finished runs are kept); else choose another "
            f"{option}")


def _studys_guided_arm(arm: Path) -> bool:
    """Whether ``arm`` (``STUDY/probe/guided/ARM``) is a guided arm's probe folder of the study: it exists, or the
    study's ``arms.json`` names it (an entry's ``"probe_dir"`` is ``"guided/ARM"``; unreadable: not named)."""
    if arm.exists():
        return True
    try:
        arms = json.loads((arm.parent.parent / ARMS_JSON).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    wanted = f"{GUIDED_PROBES}/{arm.name}"
    return isinstance(arms, dict) and any(isinstance(e, dict) and e.get("probe_dir") == wanted for e in arms.values())


def _study_probe_ancestor(folder: Path) -> tuple[Path, int] | None:
    """``(PROBE, DEPTH)`` when ``folder`` (existing or not) is a study's probe folder ``PROBE``
    (:func:`_study_of_probe`) or lies ``DEPTH`` levels below one, else None. Read as :func:`_study_probe_path` reads
    ``folder`` (resolved, and made absolute without following links); a ``PROBE`` named ``probe`` beside its
    study's files is preferred to one known only by its ``arms.json`` (a link named otherwise), the resolved path
    first. An ancestor counts only when it is named as a study names its probe folder (:func:`probe_dir`): any
    folder holding a file ``arms.json`` would otherwise refuse every ``--out`` below it (a link to a study's probe
    is still found: by the path as given, or resolved to the study's own ``probe``)."""
    found = []
    for path in (_resolved(folder), Path(os.path.abspath(folder))):
        ancestor = next((a for a in (path, *path.parents) if (a == path or a.name == probe_dir(a.parent).name)
                         and _study_of_probe(a) is not None), None)
        if ancestor is not None:
            found.append((ancestor, len(path.parts) - len(ancestor.parts)))
    named = [(a, d) for a, d in found if a.name == probe_dir(a.parent).name and _study_evidence(a.parent)]
    return (named or found or [None])[0]


def probe_study(folder: str | Path) -> Path | None:
    """The study whose probe (``STUDY/probe``) or guided arm's probe (``STUDY/probe/guided/<arm>``) ``folder`` is,
    else None (a ``gradprobe probe --out`` folder).

    A study's probe folder is one holding :data:`ARMS_JSON` (the study writes it before its probe), or
    ``STUDY/probe`` (:func:`probe_dir`) whose study holds its :data:`PLAN_COPY` and one of a study's own files
    (:data:`STUDY_JSON`, :data:`RUNS_CSV`, :data:`ANALYSIS_JSON`): a study's probe whose ``arms.json`` was lost is
    still the study's, so its fix is the study's (:func:`study_probe_advice`), never ``gradprobe probe --out``, and
    ``gradprobe probe --out`` refuses it (:func:`output_kind`). A guided arm's probe is ``guided/<arm>`` inside such
    a folder. Only the paths are read (no file is parsed); ``folder`` need not exist (``probe/guided/NEWARM``). Both
    ``folder`` resolved (:meth:`pathlib.Path.resolve`: links followed, ``..`` and ``.`` removed) and ``folder`` made
    absolute without following links (:func:`os.path.abspath`) are read (:func:`_study_probe_path`), so
    ``Path(".")`` inside ``STUDY/probe``, ``STUDY/x/../probe``, a link to ``STUDY/probe`` and a ``STUDY/probe`` (or
    ``STUDY/probe/guided``) that is itself a link to a folder elsewhere are the study's probe too.

    Returns
    -------
    Path or None
        The study as the user wrote it when ``folder`` names it (``STUDY`` for ``STUDY/probe/``, ``A`` for
        ``A/figures/../probe``, so messages show what was typed); else (``.`` inside the probe, a link) the
        absolute study folder (resolved where the resolved path names the probe).
    """
    given = Path(folder)
    found = _study_probe_path(given)
    if found is None:
        return None
    kind, path = found
    if kind == "guided probe":
        return _as_given(_study_of_probe(path.parent.parent), given, 3)
    return _as_given(_study_of_probe(path), given, 1)


def _study_probe_path(folder: Path) -> tuple[str, Path] | None:
    """``("guided probe", ARM)`` when ``folder`` is a guided arm's probe ``STUDY/probe/guided/ARM``, else
    ``("study probe", PROBE)`` when it is a study's probe (:func:`_study_of_probe`), else None; ``ARM``/``PROBE`` is
    whichever of ``folder`` resolved (:func:`_resolved`: ``.`` inside the probe, a link to it) or ``folder`` made
    absolute without following links (:func:`os.path.abspath`: a study's ``probe/`` or ``probe/guided`` that is
    itself a link to a folder elsewhere, whose resolved path is named otherwise) names one, the resolved first.
    ``folder`` need not exist."""
    candidates = (_resolved(folder), Path(os.path.abspath(folder)))
    for path in candidates:
        if path.parent.name == GUIDED_PROBES and _study_of_probe(path.parent.parent) is not None:
            return "guided probe", path
    return next((("study probe", path) for path in candidates if _study_of_probe(path) is not None), None)


def _resolved(folder: Path) -> Path:
    """``folder`` resolved (links followed, absolute); :func:`os.path.abspath` of it when that fails (a link loop)."""
    try:
        return folder.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(folder))


def _as_given(study: Path, given: Path, up: int) -> Path:
    """``study`` as ``given`` names it: ``given``'s ancestor ``up`` levels up when ``given`` has more than ``up``
    parts (so the ancestor is a part the user typed, not ``.``) and that ancestor is ``study`` (both resolved), shown
    with ``x/..`` removed (:func:`os.path.normpath`: ``A`` for ``A/figures/../probe``) where that is still
    ``study``; else ``study``."""
    if len(given.parts) > up:
        typed = given.parents[up - 1]
        if _resolved(typed) == _resolved(study):
            shown = Path(os.path.normpath(typed))
            return shown if _resolved(shown) == _resolved(study) else typed
    return study


def _study_of_probe(folder: Path) -> Path | None:
    """The study whose shared probe folder ``folder`` is (:func:`probe_study`), else None."""
    if (folder / ARMS_JSON).exists():
        return folder.parent
    study = folder.parent
    if folder == probe_dir(study) and _study_evidence(study) is not None:
        return study
    return None


def _study_evidence(study: Path) -> str | None:
    """``"plan.toml + NAME"`` when ``study`` holds its :data:`PLAN_COPY` and NAME, the first of a study's own files
    (:data:`STUDY_JSON`, :data:`RUNS_CSV`, :data:`ANALYSIS_JSON`) there, else None."""
    if not (study / PLAN_COPY).is_file():
        return None
    name = next((n for n in (STUDY_JSON, RUNS_CSV, ANALYSIS_JSON) if (study / n).is_file()), None)
    return None if name is None else f"{PLAN_COPY} + {name}"


def rerun_advice(folder: str | Path) -> str:
    """How to write ``folder``'s probe files again: ``gradprobe probe --out FOLDER``, or for a study's probe (or a
    guided arm's, ``probe/guided/<arm>``) :func:`study_probe_advice`."""
    folder = Path(folder)
    study = probe_study(folder)
    if study is not None:
        return study_probe_advice(study, folder / PROBE_JSON)
    return (f"re-run `gradprobe probe --out {shell_word(folder)}` (with the same settings) to write the probe's "
            "files again")


def restore_advice(folder: str | Path) -> str:
    """The one fix for an edited or damaged ``probe.json`` of probe folder ``folder``, as a phrase: "restore the
    file, or" write it again (:func:`rerun_advice`: ``gradprobe probe --out``, or delete it and resume the study);
    for the probe of a study without ``runs/``, which cannot be written again without training every run again,
    restoring it from a copy of the study (named once, not "restore the file, or ... restore it")."""
    folder = Path(folder)
    study, file = probe_study(folder), folder / PROBE_JSON
    if study is None:
        return f"restore the file, or {rerun_advice(folder)}"
    if not keeps_runs(study):
        return (f"restore {file} from a copy of the study ({study} has no runs/: resuming the study to write its "
                f"probe again {RETRAIN_CLAUSE})")
    return (f"restore the file, or delete {file} and resume the study with `gradprobe study "
            f"{shell_word(study / PLAN_COPY)} --out {shell_word(study)}`, which re-runs the missing probe (finished "
            "runs are kept)")
