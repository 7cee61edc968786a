"""A replicate of a finished study: the same frozen plan on fresh seeds and a fresh held-out set
(``gradprobe study --replicate DIR --out NEW``), and the comparison of the two studies' gains."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from ..layout import ANALYSIS_JSON, PLAN_COPY
from ..outputs import prepare_output_dir, write_json_atomic
from ..training.plan import Plan, load_plan
from .folder import StudyError, sha256
from .orchestrator import run_study
from .preflight import check_plan_inputs
from .result import StudyResult

__all__ = ["REPLICATE_SOURCE", "replicate_plan_text", "replicate_record", "replicate_source", "replicate_source_name",
           "replicate_study", "compare_replicate"]

REPLICATE_SOURCE = "replicate_of.json"


def replicate_plan_text(text: str, *, seeds, heldout_seed: int, source: str, source_sha256: str) -> str:
    """The TOML text of a replicate: ``text`` with its ``seeds`` and ``[heldout] seed`` replaced.

    Edited with tomlkit (a style-preserving TOML parser), so everything else of the plan is kept
    byte for byte: comments (a comment on the ``seeds`` or ``[heldout] seed`` line stays on its
    line), key order, blank lines. ``seeds`` may span several lines (it is rewritten on one,
    keeping the comment after its closing bracket; comments between the old seeds go with them);
    a plan without ``seeds`` gains it at the top level, one without ``[heldout] seed`` gains it.

    Parameters
    ----------
    text : str
        The original study's frozen ``plan.toml``.
    seeds : sequence of int
        The replicate's seeds.
    heldout_seed : int
        The replicate's data seed (held-out set and training pool).
    source, source_sha256 : str
        The original study folder and its plan's sha256 (written as a header comment).

    Raises
    ------
    StudyError
        ``text`` is not valid TOML, or its ``heldout`` is not a table.
    """
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as e:
        raise StudyError(f"the frozen plan is not valid TOML ({e}); the replicate cannot be written") from None
    new_seeds = tomlkit.array()
    new_seeds.extend(int(s) for s in seeds)
    doc["seeds"] = new_seeds  # tomlkit keeps the old value's end-of-line comment (and adds the key if missing)
    if "heldout" not in doc:
        heldout = tomlkit.table()
        heldout.add("seed", int(heldout_seed))
        doc.add(tomlkit.nl())
        doc.add("heldout", heldout)
    else:
        heldout = doc["heldout"]
        if not isinstance(heldout, dict):
            raise StudyError("the frozen plan's heldout is not a table; the replicate cannot be written")
        heldout["seed"] = int(heldout_seed)
    head = (f"# Replicate of the study in {source} (plan sha256 {source_sha256}): the same plan on fresh seeds\n"
            f"# {list(seeds)} and a fresh held-out set (data seed {int(heldout_seed)}); written by gradprobe study --replicate.\n")
    return head + tomlkit.dumps(doc)


def replicate_record(source: str | Path, out: str | Path, *, source_sha256: str, seeds,
                     heldout_seed: int) -> dict:
    """The content of ``out/replicate_of.json`` for a replicate of the study ``source`` in ``out``.

    ``source`` is the source folder as a POSIX path relative to ``out`` (``"../study_x"`` for a folder
    beside it), so the two folders stay linked when they are moved or copied together; an absolute POSIX
    path only where no relative path leads there (another drive). ``source_name`` is the source folder's
    name; ``source_plan_sha256`` (its ``plan.toml``'s sha256), ``seeds`` and ``heldout_seed`` (the
    replicate's) are kept as given. Read back with :func:`replicate_source`.
    """
    src, dest = Path(source).resolve(), Path(out).resolve()
    try:
        rel = Path(os.path.relpath(src, dest))
    except ValueError:  # two drives (Windows): no relative path
        rel = None
    path = rel.as_posix() if rel is not None and (dest / rel).resolve() == src else src.as_posix()
    return {"source": path, "source_name": src.name, "source_plan_sha256": source_sha256,
            "seeds": [int(s) for s in seeds], "heldout_seed": int(heldout_seed)}


def replicate_source_name(folder: str | Path, record: dict) -> str:
    """The name of the study folder that the replicate in ``folder`` replicates: ``record["source_name"]``,
    or for files written before it, the last part of ``record["source"]`` (resolved against ``folder``), so
    old absolute and new relative files name the same study. ``record``: ``folder/replicate_of.json`` read."""
    name = record.get("source_name")
    if isinstance(name, str) and name:
        return name
    return Path(os.path.normpath(Path(folder) / str(record.get("source", "")))).name


def replicate_source(folder: str | Path) -> Path:
    """The folder of the study that the replicate in ``folder`` replicates, read from ``folder/replicate_of.json``.

    A relative ``source`` (written by :func:`replicate_record`) is resolved against ``folder``; an absolute one
    (files written before) is taken as it is, and where that folder is gone, the study of the same name beside
    ``folder`` is taken (shipped studies are copied side by side, as ``data/`` holds them).

    Raises
    ------
    StudyError
        In one line naming ``replicate_of.json``: the file is missing or not a JSON object with a ``source``
        path, or no folder is found at the path(s) tried (the fix: copy the source study there).
    """
    folder = Path(folder)
    path = folder / REPLICATE_SOURCE
    fix = "restore it from the replicate (`gradprobe study --replicate SRC --out DIR` writes it)"
    if not path.is_file():
        raise StudyError(f"{path} not found: {folder} is no replicate, or {REPLICATE_SOURCE} was lost; {fix}")
    try:
        record = json.loads(path.read_text())
        source = record.get("source")
    except (OSError, ValueError, AttributeError) as e:
        raise StudyError(f"{path} cannot be read as a JSON object ({type(e).__name__}); {fix}") from None
    if not isinstance(source, str) or not source:
        raise StudyError(f"{path} has no 'source' path of the replicated study (got {source!r}); {fix}")
    tried = [Path(os.path.normpath(folder / source))]  # an absolute source stays as it is
    if Path(source).is_absolute():
        tried.append(folder.parent / replicate_source_name(folder, record))
    for candidate in tried:
        if candidate.is_dir():
            return candidate
    raise StudyError(f"{path} names source {source!r}, but no study folder is at {' nor '.join(map(str, tried))}; "
                     f"copy the source study to {tried[-1]} (beside the replicate)")


def replicate_study(source: str | Path, out: str | Path, *, plan: Plan, executor: str = "local",
                    workers: int | None = None, ray_address: str | None = None, probe: bool = True,
                    analyze: bool = True, say=None, report_to: str = "none") -> StudyResult:
    """Run a replicate of the finished study ``source`` in ``out`` (``gradprobe study --replicate``).

    The replicate's plan is the source's frozen ``plan.toml`` with the seeds and held-out seed of
    ``plan`` (:func:`gradprobe.training.plan.replicate_plan`); it is frozen in ``out`` like any plan
    (a killed replicate resumes), ``out/replicate_of.json`` records the source (:func:`replicate_record`:
    its path relative to ``out`` and its name), and at the end
    :func:`compare_replicate` prints each arm's gain vs grpo at matched tokens in both studies.

    Raises
    ------
    StudyError
        The generated plan does not read back as ``plan`` (seeds or held-out seed differ).
    gradprobe.study.preflight.PreflightError
        The plan's model, tokenizer or task cannot be loaded (nothing is written into ``out``).
    """
    source, out = Path(source), Path(out)
    text = (source / PLAN_COPY).read_text()
    src_sha = sha256((source / PLAN_COPY).read_bytes())
    rep_text = replicate_plan_text(text, seeds=plan.seeds, heldout_seed=plan.heldout.seed, source=str(source),
                                   source_sha256=src_sha)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{plan.name}.toml"
        path.write_text(rep_text)
        check = load_plan(path)
        if check.seeds != plan.seeds or check.heldout.seed != plan.heldout.seed:
            raise StudyError(f"the replicate plan written from {source / PLAN_COPY} reads back with seeds "
                             f"{list(check.seeds)} and held-out seed {check.heldout.seed}, expected "
                             f"{list(plan.seeds)} and {plan.heldout.seed}")
        check_plan_inputs(check, executor=executor)  # before anything is written into out
        prepare_output_dir(out)
        write_json_atomic(out / REPLICATE_SOURCE, replicate_record(source, out, source_sha256=src_sha, seeds=plan.seeds,
                                                                   heldout_seed=plan.heldout.seed))
        result = run_study(path, out, executor=executor, workers=workers, ray_address=ray_address, probe=probe,
                           analyze=analyze, say=say, check=False, report_to=report_to)
    if analyze and (out / ANALYSIS_JSON).exists() and (source / ANALYSIS_JSON).exists():
        (say or (lambda m: print(m, file=sys.stderr)))(compare_replicate(source, out))
    return result


def compare_replicate(original: str | Path, replicate: str | Path, *, axis: str = "generated_tokens") -> str:
    """A table of each arm's gain vs grpo (points, t interval over seeds) in the original study and
    its replicate at matched ``axis``, and whether the replicate's estimate falls inside the
    original's interval. Reads both ``analysis.json`` files (old ones keyed ``tokens`` too)."""
    def gains(folder: Path) -> dict:
        a = json.loads((Path(folder) / ANALYSIS_JSON).read_text())
        out = {}
        for arm, entry in (a.get("arms") or {}).items():
            block = entry.get(axis) or (entry.get("tokens") if axis == "generated_tokens" else None) or {}
            if block.get("gain_vs_grpo") is not None:
                out[arm] = (block["gain_vs_grpo"], block.get("gain_ci"))
        return out

    def fmt(g) -> str:
        if g is None:
            return "n/a"
        est, ci = g
        return f"{est:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")

    a, b = gains(original), gains(replicate)
    lines = [f"replication at matched {axis} (gain vs grpo, points, 95% t interval over seeds):",
             f"  {'arm':<14} {'original':<24} {'replicate':<24} replicate inside original's interval"]
    for arm in [x for x in a if x != "grpo"] + [x for x in b if x not in a and x != "grpo"]:
        inside = "n/a"
        if arm in a and arm in b and a[arm][1]:
            inside = "yes" if a[arm][1][0] <= b[arm][0] <= a[arm][1][1] else "no"
        lines.append(f"  {arm:<14} {fmt(a.get(arm)):<24} {fmt(b.get(arm)):<24} {inside}")
    return "\n".join(lines)
