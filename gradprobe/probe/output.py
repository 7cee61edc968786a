"""A probe's output folder and its printed table (README, "The probe command").

:func:`write_probe_files` writes the folder of one probe batch (names from :mod:`gradprobe.layout`):

- :data:`~gradprobe.layout.ALIGNMENT_SAFETENSORS`: ``alignment`` a (N, T) in the model's dtype,
  ``completion_mask`` (N, T), ``completion_ids`` (N, T) and ``advantages.<reward>`` A^R (N, T, float64:
  :func:`advantages_key`);
- :data:`~gradprobe.layout.TOKENS_JSONL`: one line per completion: ``row``, ``prompt_id``, ``score``,
  ``truncated``, ``tokens`` (the vocabulary's pieces), ``texts`` (what each adds to the decoded text,
  :func:`token_texts`), their ``alignment`` and every reward's ``advantages``, for heat maps;
- :data:`~gradprobe.layout.PROBE_JSON`: the result, last, so its presence marks a complete folder.

Every file is written atomically (:mod:`gradprobe.outputs`: a temporary file, fsync, rename), and JSON in
gradprobe's one encoding of non-finite floats (:func:`gradprobe.outputs.json_safe`: NaN -> null,
+-inf -> "inf"/"-inf"). :func:`format_table` (:mod:`gradprobe.probe.table`) is what ``gradprobe probe`` prints.

Probing again into a folder (``gradprobe probe --out DIR``): :func:`replacing_earlier_probe` wraps the probe
so that no file of the earlier probe remains beside the new one (e.g. a ``calibrated.json`` from an earlier
``--calibration``). It touches only :data:`PROBE_FILES` (and their ``.tmp`` partials and ``batch_K/``
folders), never other files, and only in a folder holding ``probe.json`` (an earlier probe): files of those names
without it are no probe's (a user's ``report.html``) and the folder is refused, nothing moved or deleted; so is a
folder where one of those names (or a ``batch_K``) is a symbolic link in a loop, in the loop's words, where
``probe.json`` is a broken link, or where one of those file names is a folder (:func:`_refuse_unwritable_names`).
A ``batch_K/`` is an earlier probe's only when it is a real folder (never a link) holding nothing but regular files of
those names (or their ``.tmp`` partials) and, beside a ``probe.json`` that gradprobe wrote, among the ``batch_0`` ..
``batch_{n-1}`` it lists (``config.probe_batches``; none for one batch, nor for a ``probe.json`` without gradprobe's
``versions`` and ``config``, as a hand-made one: :func:`_batch_folders_of`). While a probe writes its folder,
``.unfinished-probe.json`` there (:data:`~gradprobe.layout.UNFINISHED_PROBE`) names the files (of
:data:`PROBE_FILES`) and batch folders it has started writing: written atomically, naming none, once the folder was
checked to hold none of them, then rewritten atomically (keeping its first time) to add each name just before the
probe starts writing that file or into that batch folder, once its content is made (:func:`claim_probe_file`;
:func:`write_probe_files`, :func:`write_probe_json`, :func:`gradprobe.probe.report_html.write_probe_report` and every
other writer of a probe's files call it, each in one place), deleted once the probe is complete or
rolled back. So what a probe killed before its ``probe.json`` (SIGKILL) left, its complete ``tokens.jsonl`` or
``alignment.safetensors`` as well as its batch folders, is known by it as that probe's, not guessed, and the next
probe deletes it with the rest of what it left, saying so in one line (:func:`_killed_files`,
:func:`_killed_batches`): only what the record names, regular files of those names (never a link or a folder) and
batch folders of a probe's files only, none older than the record (a user's file moved or copied in keeping its
times is refused and kept). A file of those names the killed probe never started (a user's fresh ``report.html``
put there after the kill, by ``cp`` or an editor) is not named, so it is refused and kept like any user's file, as
is a fresh ``batch_K`` it never started. A record of an older gradprobe, which named every one of
:data:`PROBE_FILES` and every batch folder up front, is read as before. A ``probe.json`` beside the record is the
killed probe's too (the CLI writes it before its forecast and ``report.html``), never a complete probe that would
replace one kept in ``.earlier-probe/``. A file of those names in a folder without the record (a user's
``report.html``) is refused as before. Any other ``batch_K``
(a user's folder, another probe's, a link to one elsewhere, a file) is never moved or deleted, and is refused before
any compute when the probe writes there (``--probe-batches``: :func:`_refuse_batch_folders_in_the_way`). It also
refuses a folder that holds a training run, a study, a ``calib report``
(``cv_predictions.csv``), a model (a tier, ``save_pretrained`` weights) or a study's probe (``arms.json``:
``gradprobe study`` writes its probe with :func:`gradprobe.probe.run.run_probe`, not through it). A
``.earlier-probe/`` left by a killed probe (SIGKILL) is
never deleted unsaid: it is put back when the folder holds no complete probe of its own, else deleted after a warning.
While files move between the folder and ``.earlier-probe/`` (either way), ``.earlier-probe/manifest.json`` names the
earlier probe's files, so a probe killed halfway leaves the whole earlier set named and the next one puts it back
whole (the part still in the folder is not taken for the killed probe's unfinished files, nor for a newer probe).
:func:`no_signal_entries` (:mod:`gradprobe.probe.table`) names the rewards that give no gradient on the batch of
an older ``probe.json``, whose entries lack ``no_signal_reason`` (:func:`gradprobe.probe.result.reward_entries`
records it in every entry now).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from safetensors.torch import save as safetensors_bytes

from ..caller import caller_stacklevel
from ..layout import (ALIGNMENT_SAFETENSORS, EARLIER_MANIFEST, EARLIER_PROBE, OUTPUT_KINDS, PROBE_BATCH_DIR,
                      PROBE_FILES, PROBE_JSON, TOKENS_JSONL, UNFINISHED_PROBE, output_kind, study_probe_refusal)
from ..outputs import (OutputDirError, json_safe, naming_out, output_error, prepare_output_dir, refuse_link_loop,
                       refuse_looping_file, removed_if_left_empty, shell_word, write_bytes_atomic, write_json_atomic,
                       write_text_atomic)
from ..tables import shown, surrogates_escaped
from .table import format_table, no_signal_entries

__all__ = ["token_texts", "write_probe_files", "write_probe_json", "claim_probe_file", "advantages_key",
           "format_table", "PROBE_FILES", "ProbeFolder", "replacing_earlier_probe", "probe_files",
           "batch_folder_count", "no_signal_entries"]

# PROBE_FILES (:mod:`gradprobe.layout`): every file a probe writes into its folder; with their ``.tmp`` partials and
# the ``batch_K/`` folders of ``--probe-batches``, all that :func:`replacing_earlier_probe` ever moves or deletes.
#: Files that mark a folder as another command's output, which a probe must not be mixed into.
#: Where an earlier probe's files wait (inside the folder) until the new probe has finished.
EARLIER = EARLIER_PROBE
#: Inside :data:`EARLIER` while the earlier probe's files move between it and the folder (either way): their names,
#: written atomically before the first move and deleted after the last (:func:`_leftover` reads it).
_MANIFEST = EARLIER_MANIFEST
_MANIFEST_FILES = (_MANIFEST, f"{_MANIFEST}.tmp")  # the manifest and its partial: no earlier probe's files
_BATCH_DIR = PROBE_BATCH_DIR
#: In the folder while a probe writes it: the names of the files and ``batch_K/`` folders it has started writing, each
#: added atomically before the probe starts it (:func:`claim_probe_file`), the record deleted once the probe is
#: complete or rolled back (:func:`_unfinished` reads it).
_UNFINISHED = UNFINISHED_PROBE
_UNFINISHED_FILES = (_UNFINISHED, f"{_UNFINISHED}.tmp")  # the record and its partial
_OURS = frozenset(PROBE_FILES) | {f"{n}.tmp" for n in PROBE_FILES}  # a probe's file names and their .tmp partials


def token_texts(tokenizer, ids: list[int]) -> list[str]:
    """The text each token adds to the decoded completion (what a person reads), one string per id.

    ``convert_ids_to_tokens`` gives the vocabulary's raw pieces (``"Ġthe"``, ``"Ċ"``, byte
    fragments); this decodes prefixes instead, so ``"".join(token_texts(tok, ids)) ==
    tok.decode(ids)``. A token that ends inside a multi-byte character adds ``""`` and the token
    that completes it adds the character. Cost: one decode per token (completions are short).
    """
    out, prev = [], ""
    for k in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:k], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if text.endswith("\ufffd") and k < len(ids):  # an incomplete UTF-8 sequence: wait for the next token
            out.append("")
            continue
        out.append(text[len(prev):] if text.startswith(prev) else text)
        prev = text
    return out


def advantages_key(reward: str) -> str:
    """The key of reward ``reward``'s advantages in alignment.safetensors: ``advantages.<reward>``, each lone surrogate
    of the name (an undecodable byte of a plug-in file's name, ``os.fsdecode``: ``r\\xff.py`` is ``r\\udcff.py``)
    written as ``\\udcHH`` (as :func:`gradprobe.tables.shown` shows it), since the file's header is UTF-8, which
    cannot hold a lone surrogate. Every other name is its key unchanged, so earlier probes' files read as before.
    Writer and reader (:meth:`gradprobe.api.ProbeResult.advantages`) both map names here."""
    return "advantages." + surrogates_escaped(reward)


def _token_lines(batch, alignment, advantages: dict, tokenizer) -> str:
    """tokens.jsonl's text: one JSON object per completion (row n of the batch, n = 0..N-1)."""
    lines = []
    for n in range(batch.num_rows):
        m = batch.completion_mask[n].cpu()
        ids = batch.completion_ids[n].cpu()[m].tolist()
        lines.append(json.dumps({
            "row": n, "prompt_id": batch.problems[n // batch.group_size].id,
            "score": json_safe(float(batch.scores[n])), "truncated": bool(batch.truncated[n]),
            "tokens": tokenizer.convert_ids_to_tokens(ids),  # the vocabulary's raw pieces
            "texts": token_texts(tokenizer, ids),  # what each token adds to the decoded text
            "alignment": alignment[n].cpu()[m].tolist(),
            "advantages": {k: v[n].cpu()[m].tolist() for k, v in advantages.items()},
        }) + "\n")
    return "".join(lines)


def write_probe_files(out, result: dict, batch, alignment, advantages: dict, tokenizer, *,
                      importance_weights=None) -> None:
    """Write one probe batch's folder ``out`` (created if missing): alignment.safetensors, tokens.jsonl,
    then probe.json (module docstring).

    Parameters
    ----------
    result : dict
        ``probe.json``'s content (:func:`gradprobe.probe.run.run_probe`).
    batch : gradprobe.types.RolloutBatch
        The probe batch, N = B * G completions of T tokens at most.
    alignment : Tensor
        a, shape (N, T).
    advantages : dict[str, Tensor]
        Reward -> A^R, shape (N, T).
    importance_weights : Tensor, optional
        A guided probe's W, shape (N, T) (:mod:`gradprobe.probe.guided`), saved as ``importance_weights``
        (the advantages are saved unweighted: the update's are W * A^R).

    Raises
    ------
    OutputDirError (an OSError)
        A file cannot be written (named); the file's previous content, if any, is left unchanged.
    """
    out = Path(out)
    tensors = {"alignment": alignment.detach().cpu().contiguous(),
               "completion_mask": batch.completion_mask.cpu().contiguous(),
               "completion_ids": batch.completion_ids.cpu().contiguous()}
    for name, adv in advantages.items():
        tensors[advantages_key(name)] = adv.cpu().contiguous()
    if importance_weights is not None:
        tensors["importance_weights"] = importance_weights.detach().cpu().contiguous()
    data = safetensors_bytes(tensors)  # each file's bytes made before it is named: its write follows the name at once
    claim_probe_file(out, ALIGNMENT_SAFETENSORS)  # before the folder (a batch_K) and the file: named as started
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out / ALIGNMENT_SAFETENSORS, data)
    text = _token_lines(batch, alignment, advantages, tokenizer)  # one decode per token: before the name
    claim_probe_file(out, TOKENS_JSONL)
    write_text_atomic(out / TOKENS_JSONL, text)
    write_probe_json(out, result)


def write_probe_json(out, result: dict) -> Path:
    """Write ``result`` as ``out/probe.json`` (atomically, non-finite floats as :func:`gradprobe.outputs.json_safe`
    writes them), named first in the record of the probe writing ``out`` (:func:`claim_probe_file`). Returns the
    path.

    Raises
    ------
    OutputDirError (an OSError)
        The record or the file cannot be written (named); the file's previous content, if any, is left unchanged."""
    path, data = Path(out) / PROBE_JSON, json_safe(result)
    claim_probe_file(out, PROBE_JSON)  # just before its temporary file: nothing slow between
    write_json_atomic(path, data)
    return path


def _batch_entries(batch: Path) -> tuple[list[str], list[str]]:
    """What the folder ``batch`` (a ``batch_K``) holds, sorted: (a probe's files there: regular files, not links, named
    as :data:`PROBE_FILES` or their ``.tmp`` partials; every other entry, a folder marked ``NAME (a folder)`` and a
    link ``NAME (a symbolic link)``)."""
    mine, others = [], []
    for q in sorted(batch.iterdir()):
        if q.name in _OURS and not q.is_symlink() and q.is_file():
            mine.append(q.name)
        else:
            others.append(q.name + (" (a symbolic link)" if q.is_symlink() else " (a folder)" if q.is_dir() else ""))
    return mine, others


def _batch_kind(batch: Path) -> str:
    """What the ``batch_K`` entry ``batch`` is: ``"missing"``; ``"link"`` (a symbolic link, whatever it points to:
    never a probe's); ``"file"`` (no folder); a real folder of ``"debris"`` (``.tmp`` partials of a probe's files
    only, or nothing: what a killed probe leaves), of ``"probe"`` files only (:func:`_batch_entries`, some complete),
    ``"mixed"`` (a probe's files and other entries) or ``"other"`` entries only."""
    if batch.is_symlink():
        return "link"
    if not batch.exists():
        return "missing"
    if not batch.is_dir():
        return "file"
    mine, others = _batch_entries(batch)
    if others:
        return "mixed" if mine else "other"
    return "debris" if all(name.endswith(".tmp") for name in mine) else "probe"


def _gradprobe_config(probe_json: Path) -> dict | None:
    """The ``config`` of the ``probe.json`` at ``probe_json`` when gradprobe wrote it (a JSON object with ``versions``
    and a ``config`` object), else None (unreadable, or made by hand)."""
    try:
        data = json.loads(probe_json.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "versions" not in data or not isinstance(data.get("config"), dict):
        return None
    return data["config"]


def _batch_folders_of(probe_json: Path) -> int:
    """How many ``batch_K`` folders the probe whose ``probe.json`` is ``probe_json`` wrote (``batch_0`` ..
    ``batch_{n-1}``): its ``config.probe_batches`` (:func:`batch_folder_count`), 0 for a probe.json of one batch
    (it lists none). 0 too when the file says nothing gradprobe wrote (:func:`_gradprobe_config`: unreadable, no
    ``versions`` or ``config``, as a hand-made one) or its count is no integer >= 1: such a file names no batch folder
    as its probe's, so a ``batch_K`` beside it is never moved or deleted with it (and is refused where the probe
    writes: :func:`_refuse_batch_folders_in_the_way`)."""
    config = _gradprobe_config(probe_json)
    count = None if config is None else config.get("probe_batches", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return 0
    return count if "checkpoints" in config else batch_folder_count(count)  # the total, policies included


def batch_folder_count(probe_batches, checkpoints: int | None = None) -> int:
    """How many ``batch_K`` folders (``batch_0`` .. ``batch_{n-1}``) a probe of ``probe_batches`` batches writes
    (``--probe-batches``; :func:`gradprobe.probe.batches.run_probe_batches`): none for one batch (its files are in the
    folder itself), else one per batch; with ``checkpoints`` (how many ``--checkpoints`` files, None without the
    option) one per batch at each policy, the initial one included (:func:`gradprobe.probe.checkpoints.
    run_probe_checkpoints`), one batch too. A ``probe_batches`` that is no integer >= 1 counts as 1 (the probe
    refuses it itself)."""
    if isinstance(probe_batches, bool) or not isinstance(probe_batches, int) or probe_batches < 1:
        probe_batches = 1
    if checkpoints is not None:
        return probe_batches * (1 + checkpoints)
    return probe_batches if probe_batches > 1 else 0


def _earlier_batch(name: str, batch_folders: int | None) -> bool:
    """Whether the ``batch_K`` named ``name`` may be an earlier probe's that wrote ``batch_folders`` of them (None:
    no ``probe.json`` there, any is listed, to be refused by :func:`_move_aside` unless a killed probe's)."""
    return batch_folders is None or name in {f"batch_{k}" for k in range(batch_folders)}


def _probe_names(folder: Path, batch_folders: int | None = None) -> list[str]:
    """The names in ``folder`` that a probe writes, sorted: :data:`PROBE_FILES` and their ``.tmp`` partials (not
    folders), ``batch_K`` folders of ``.tmp`` partials only (:func:`_batch_kind`), and those of a probe's files only
    that the earlier probe wrote (``batch_0`` .. ``batch_{batch_folders-1}``, any when None: no ``probe.json``);
    never a link, never a folder holding anything else."""
    names = []
    for p in folder.iterdir():
        if p.name in _OURS and not p.is_dir():
            names.append(p.name)
        elif _BATCH_DIR.fullmatch(p.name):
            kind = _batch_kind(p)
            if kind == "debris" or (kind == "probe" and _earlier_batch(p.name, batch_folders)):
                names.append(p.name)
    return sorted(names)


def probe_files(out, batch_folders: int = 0) -> list[str]:
    """The paths (``out/NAME``, sorted) of the probe's files in folder ``out``: what ``gradprobe probe`` names as
    written (probe.json, report.html, tokens.jsonl, alignment.safetensors, calibrated.json, and ``batch_0`` ..
    ``batch_{batch_folders-1}``: :func:`batch_folder_count`; other ``batch_K`` folders there are not the probe's)."""
    folder = Path(out)
    mine = {f"batch_{k}" for k in range(batch_folders)}
    return [f"{out}/{p.name}" for p in sorted(folder.iterdir())
            if (p.name in _OURS and not p.is_dir()) or (p.name in mine and p.is_dir())]


def _other_output(folder: Path, label: str = "--out") -> str | None:
    """Why ``folder`` is refused (another command's output, :func:`gradprobe.layout.output_kind`, named with the
    fix), else None. A study's probe folder, or any folder inside one, existing or missing (``STUDY/probe/batch_3``,
    ``STUDY/probe/guided/NEWARM``), is refused first, with the study's wording
    (:func:`gradprobe.layout.study_probe_refusal`): a probe written there would be taken for (part of) the study's.
    ``gradprobe study`` writes its own probe without this check (``prepare_output_dir``). ``label``: how the fix names
    the folder to choose instead (``--out``, or an API argument: :func:`replacing_earlier_probe`)."""
    refusal = study_probe_refusal(folder, label)
    if refusal is not None:
        return refusal
    found = output_kind(folder)  # "study probe" and "guided probe" are study_probe_refusal's already
    if found is None or found[0] in ("probe", "killed probe", "unfinished probe"):  # a killed probe's: dealt with
        return None
    kind, evidence = found
    return (f"holds {OUTPUT_KINDS[kind]} ({evidence}), not a probe's output; a probe there would mix its files into "
            f"it: choose another {label} (an empty folder, or an earlier probe's)")


def _remove(path: Path) -> None:
    """Delete the file or folder ``path`` (a symbolic link itself, never what it points to: a broken or looping link
    too); nothing when nothing is there."""
    if path.is_symlink():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


@dataclass
class ProbeFolder:
    """What :func:`replacing_earlier_probe` did to a probe's output folder.

    Attributes
    ----------
    path : Path
    earlier : list[str]
        Names of the earlier probe's files found there (moved aside, then deleted or put back).
    batch_folders : int
        How many ``batch_K`` folders the probe writes (``batch_0`` ..; :func:`batch_folder_count`).
    kept : list[str]
        The ``batch_K`` entries found there that are no probe's (a user's folder of other files, a link): left as they
        are, never written, moved or deleted.
    """

    path: Path
    earlier: list[str] = field(default_factory=list)
    batch_folders: int = 0
    kept: list[str] = field(default_factory=list)


def _warn(message: str) -> None:
    """:func:`replacing_earlier_probe`'s default ``say``: a UserWarning of ``message`` (:func:`warnings.warn`, so the
    filters decide whether it shows) at the user's line that called gradprobe
    (:func:`gradprobe.caller.caller_stacklevel`)."""
    warnings.warn(message, stacklevel=caller_stacklevel())


@contextlib.contextmanager
def replacing_earlier_probe(out, say=_warn, *, label: str = "--out", batch_folders: int = 0):
    """Context manager around a probe that writes into ``out``: no file of an earlier probe remains beside it.

    On entry the earlier probe's files (:data:`PROBE_FILES`, their ``.tmp`` partials, its ``batch_K/`` folders:
    :func:`_probe_names`) are moved into ``out/.earlier-probe``; other files are never touched. Only a folder holding
    ``probe.json`` holds an earlier probe: one that holds files of those names without it is refused (a user's
    ``report.html``, or a killed probe's partial files), nothing moved. Before the block runs,
    ``out/.unfinished-probe.json`` is written (:func:`_record_unfinished`); the block names each file and ``batch_K``
    folder there as it starts writing it (:func:`claim_probe_file`: every writer of a probe's files calls it). When
    the block ends normally that record and the earlier files are deleted; when it raises (an error, Ctrl-C, the CLI's
    SIGTERM) the files this probe wrote so far and the record are deleted, the earlier ones put back and a folder this
    call found missing is removed again if left empty. What a killed probe left (a ``.earlier-probe/``, the files and
    batch folders it recorded) is dealt with first (module docstring; ``say`` is told).

    Parameters
    ----------
    out : path
    say : callable(str), optional
        Receives one line per thing done to what a killed probe left (default: :func:`_warn`, a warning at the
        caller's line).
    label : str
        How the refusals name ``out`` and the folder to choose instead (``"--out"`` for the command;
        :meth:`gradprobe.ProbeResult.write` passes ``"dir"`` and :func:`gradprobe.probe` ``"out"``, their arguments).
    batch_folders : int
        How many ``batch_K`` folders the probe writes (:func:`batch_folder_count`): each that is there already and
        is no earlier probe's is refused before anything moves (:func:`_refuse_batch_folders_in_the_way`).

    Yields
    ------
    ProbeFolder

    Raises
    ------
    OutputDirError (an OSError)
        Before anything moves, each naming what is in the way and the fix: ``out`` holds a training run, a study, a
        model or a study's probe, or lies inside a study's probe folder (:func:`_other_output`); files named as a
        probe's but no ``probe.json`` (:func:`_not_a_probe`); an earlier probe whose ``batch_K/`` folders also hold
        other files (:func:`_refuse_mixed_batch_folders`); a ``batch_K`` the probe writes that is no earlier probe's
        (a link, a file, a user's folder: :func:`_refuse_batch_folders_in_the_way`); a name of the probe's that is a
        folder, a symbolic link in a loop (errno ELOOP) or a broken ``probe.json`` link (errno ENOENT)
        (:func:`_refuse_unwritable_names`); errno EINVAL: a record of the files and batch folders a killed probe was
        writing that cannot be read (:func:`_unfinished`). Or the earlier files cannot be moved (they are left in
        place), or the record cannot be written (the earlier files put back, a folder this call made removed).
    """
    folder = ProbeFolder(Path(out), batch_folders=batch_folders)
    _refuse_unwritable_names(folder.path, label)
    if folder.path.is_dir():
        _move_aside(folder, say, label)
    elif (other := _other_output(folder.path, label)) is not None:  # a missing folder in (or as) a study's probe
        raise OutputDirError(errno.EEXIST, f"{label} {str(folder.path)!r} {other}")
    with removed_if_left_empty(folder.path):  # a folder this call found missing goes again if left empty
        try:
            _record_unfinished(folder)  # before the first file: each is named there as the probe starts it
            yield folder
        except BaseException:
            _roll_back(folder)
            raise
        with contextlib.suppress(OSError):  # complete: a record left (a full disk) is deleted by the next probe
            _unrecord(folder.path)
    _remove(folder.path / EARLIER)


def _refuse_unwritable_names(folder: Path, label: str = "--out") -> None:
    """Refuse, before anything is moved or computed, a name the probe writes in ``folder`` that it cannot write: one
    of :data:`PROBE_FILES` or a ``batch_K`` that is a symbolic link in a loop (``a -> b -> a``: the write would fail
    after the compute, or replace the link; :func:`gradprobe.outputs.refuse_looping_file`, its fix naming ``label``),
    a ``folder`` that is or lies under one, a ``probe.json`` that is a broken link (to nothing: no earlier probe's,
    and the probe would replace the link), or one of :data:`PROBE_FILES` or its ``.tmp`` that is a folder (or a link
    to one: writing the file fails there, after the compute). A ``NAME.tmp`` link is the writer's own name, removed
    and replaced.

    Raises
    ------
    OutputDirError (an OSError)
        errno ELOOP: the loop's refusal (``'OUT/probe.json' is a symlink loop ('OUT/probe.json' -> ... : ...)``, or
        ``cannot create output folder ...``), with its fix. errno ENOENT: the broken ``probe.json`` link, named with
        its target and the fix (remove the link, or choose another ``label``). errno EISDIR: the folder of a file's
        name, with the fix (move it away, or choose another ``label``). Nothing is moved or deleted."""
    with naming_out(label):  # the loop refusals' last fix: choose another LABEL
        for name in PROBE_FILES:
            refuse_looping_file(folder / name)
        if folder.is_dir():
            for p in sorted(folder.iterdir()):
                if _BATCH_DIR.fullmatch(p.name):
                    refuse_link_loop(p)
    top = folder / PROBE_JSON
    if top.is_symlink() and not top.exists():
        raise OutputDirError(errno.ENOENT, (
            f"{label} {str(folder)!r} holds {PROBE_JSON} as a symbolic link to {os.readlink(top)!r}, which does not "
            f"exist (a broken link), so no earlier probe's {PROBE_JSON}, and a probe there would replace the link with "
            f"its own: remove the link (rm {shell_word(top)}), or choose another {label}; nothing was moved"))
    for name in sorted(_OURS) if folder.is_dir() else ():
        if (folder / name).is_dir():
            raise _a_folder_named_as_a_file(folder, name, label)


def _a_folder_named_as_a_file(folder: Path, name: str, label: str) -> OutputDirError:
    """The refusal of ``folder``, which holds a folder (or a link to one) named ``name``, a file the probe writes (one
    of :data:`PROBE_FILES`, or its ``.tmp``, through which it is written)."""
    path, file = folder / name, name.removesuffix(".tmp")
    what = (f"a symbolic link to the folder {os.readlink(path)!r}" if path.is_symlink() else "a folder")
    via = f" through the temporary file {name}" if name != file else ""
    fix = (f"remove the link (rm {shell_word(path)}; the folder it points to is kept)" if path.is_symlink() else
           f"move {name} out of {str(folder)!r} (or rename it)")
    return OutputDirError(errno.EISDIR, (
        f"{label} {str(folder)!r} holds {name} as {what}, not a file, where a probe writes its {file}{via}: writing "
        f"it would fail after the probe's compute (Is a directory). {fix[0].upper()}{fix[1:]}, or choose another "
        f"{label}; nothing was moved"))


def _mixed_batch_folders(folder: Path, batch_folders: int | None = None) -> dict:
    """The ``batch_K`` folders in ``folder`` that may be the earlier probe's (``batch_folders``: how many it wrote,
    None: not known, :func:`_earlier_batch`) holding a probe's files (:func:`_batch_entries`) and other entries too,
    which :func:`_probe_names` leaves out: name -> ([probe files], [other names]), sorted."""
    found = {}
    for p in sorted(folder.iterdir()):
        if _BATCH_DIR.fullmatch(p.name) and _earlier_batch(p.name, batch_folders) and _batch_kind(p) == "mixed":
            found[p.name] = _batch_entries(p)
    return found


def _refuse_mixed_batch_folders(folder: Path, label: str = "--out", batch_folders: int | None = None) -> None:
    """Refuse ``folder`` when its earlier probe's ``batch_K/`` folders (``batch_folders``: :func:`_mixed_batch_folders`)
    also hold other files (a user's): they cannot be moved aside whole, and a new probe would write its batches over
    the earlier probe's there, mixing the two.

    Raises
    ------
    OutputDirError (an OSError, errno EEXIST)
        Naming the folders, the other files and the fix; nothing is moved or deleted."""
    mixed = _mixed_batch_folders(folder, batch_folders)
    if not mixed:
        return
    others = ", ".join(f"{name}/{o}" for name, (_, other) in mixed.items() for o in other)
    raise OutputDirError(errno.EEXIST, (
        f"{label} {str(folder)!r} holds an earlier probe whose batch folders "
        f"{', '.join(f'{name}/' for name in mixed)} also hold other files ({others}): a probe moves its earlier "
        f"batch folders aside whole and never moves or deletes other files, so it would mix its batches with the "
        f"earlier probe's there. Move {others} out of the batch folders, or choose another {label}; nothing was "
        "moved"))


def _refuse_batch_folders_in_the_way(folder: ProbeFolder, handled: list[str], earlier: int | None,
                                     label: str = "--out") -> None:
    """Refuse, before anything moves or is computed, a ``batch_K`` the probe writes (``batch_0`` ..
    ``batch_{folder.batch_folders-1}``) that is there and neither the earlier probe's (moved aside) nor a killed
    probe's (removed: ``.tmp`` partials only, or recorded as its own, :func:`_killed_batches`): those ``handled``.
    Writing there would overwrite or mix with a user's files, write through a link into a folder elsewhere, or fail
    after the compute of the batches before it (a broken link, a file). ``earlier``: how many batch folders the
    earlier probe wrote (:func:`_batch_folders_of`; None: no ``probe.json`` there).

    Raises
    ------
    OutputDirError (an OSError, errno EEXIST)
        Naming the entry, what it is or holds, why it is no earlier probe's and the fix (remove the link, move it
        away, or choose another ``label``); nothing is moved or deleted."""
    for k in range(folder.batch_folders):
        path = folder.path / f"batch_{k}"
        kind = _batch_kind(path)
        if kind != "missing" and path.name not in handled:
            raise OutputDirError(errno.EEXIST, _in_the_way(folder, path, kind, k, earlier, label))


def _in_the_way(folder: ProbeFolder, path: Path, kind: str, k: int, earlier: int | None, label: str) -> str:
    """:func:`_refuse_batch_folders_in_the_way`'s message for ``path`` (``batch_k``, of :func:`_batch_kind`
    ``kind``)."""
    head = f"{label} {str(folder.path)!r} holds {path.name}"
    writes = f"where the probe writes batch {k} of its {folder.batch_folders} probe batches"
    before = f", after computing batch{'es' if k > 1 else ''} {', '.join(map(str, range(k)))}" if k else ""
    fail = f"it could not make that folder and would fail there{before}"
    if kind == "link":
        target = os.readlink(path)
        if path.is_dir():
            return (f"{head} as a symbolic link to the folder {target!r}, {writes}: it would write its files into that "
                    f"folder outside {str(folder.path)!r}, over any of its names there. Remove the link "
                    f"(rm {shell_word(path)}; the folder it points to is kept), or choose another {label}; nothing was "
                    "moved")
        what = "a file, not a folder" if path.exists() else "which does not exist (a broken link)"
        return (f"{head} as a symbolic link to {target!r}, {what}, {writes}: {fail}. Remove the link "
                f"(rm {shell_word(path)}), or choose another {label}; nothing was moved")
    if kind == "file":
        return (f"{head}, a file, not a folder, {writes}: {fail}. Move the file out of {str(folder.path)!r} (or rename "
                f"it), or choose another {label}; nothing was moved")
    mine, others = _batch_entries(path)
    if others:
        why = f"it holds {_listed(others)}, which no probe writes"
    elif earlier:
        why = f"the earlier probe there wrote batch_0 to batch_{earlier - 1} only, as its {PROBE_JSON} lists {earlier}"
    elif _gradprobe_config(folder.path / PROBE_JSON) is None:
        why = (f"the {PROBE_JSON} there is not one gradprobe wrote (no JSON object with its versions and config), so "
               "it names no batch folder as its probe's")
    else:
        why = f"the earlier probe there wrote none, as its {PROBE_JSON} lists one probe batch"
    complete = [name for name in mine if not name.endswith(".tmp")]
    harm = [f"overwrite {_listed(complete)}"] if complete else []
    harm += [f"mix its files with {_listed(others)}"] if others else []
    return (f"{head}/ ({_listed(sorted(mine + others))}), {writes}, and it is no earlier probe's batch folder: {why}. "
            f"The probe would {' and '.join(harm)} there. Move {path.name}/ out of {str(folder.path)!r} (or rename "
            f"it), or choose another {label}; nothing was moved")


def _listed(names: list[str], most: int = 6) -> str:
    """``names`` for a message (control characters escaped: :func:`gradprobe.tables.shown`), the first ``most`` and
    how many more."""
    shown_names = [shown(n) for n in names[:most]]
    return ", ".join(shown_names) + (f" and {len(names) - most} more" if len(names) > most else "")


def _start_moving(aside: Path, names: list[str]) -> None:
    """Name the earlier probe's files in ``aside/manifest.json`` (atomically) before the first of them moves."""
    write_json_atomic(aside / _MANIFEST, {"earlier_probe_files": names})


def _done_moving(aside: Path) -> None:
    """Delete ``aside/manifest.json`` after the last of the earlier probe's files moved."""
    (aside / _MANIFEST).unlink(missing_ok=True)


def _record_unfinished(folder: ProbeFolder) -> None:
    """Write ``folder/.unfinished-probe.json`` (atomically; the folder created if missing) naming no file and no batch
    folder yet, before the probe writes anything: each is added as the probe starts it (:func:`claim_probe_file`), so
    that what a probe killed before it is complete leaves there is known as its own (:func:`_unfinished`) and nothing
    it never started (a user's fresh file of a probe's name) is. The time it is written now (its modification time,
    kept as ``since`` when :func:`claim_probe_file` rewrites it) is what the next probe compares what it finds with
    (:func:`_not_older`). Called once :func:`_move_aside` has left none of them there."""
    if not folder.path.is_dir():
        prepare_output_dir(folder.path)
    write_json_atomic(folder.path / _UNFINISHED, {"probe_files": [], "probe_batch_folders": []})


def claim_probe_file(folder, name: str) -> None:
    """Name the file ``name`` (one of :data:`PROBE_FILES`) that a probe is about to write in ``folder`` in the record
    of the probe writing there (:func:`_record_unfinished`), just before the file (or its temporary file) is created
    and after its content is made (a report's figures rendered, tensors encoded): the record names only what the probe
    started writing, so a user's fresh file of a probe's name that it never started (one put there after a probe was
    killed while it made that file's content) is not taken for the killed probe's by the next one. ``folder`` may be
    the probe's folder, where the file is named, or one of its ``batch_K`` folders (created or not yet), where that
    folder is named in its parent's record. Nothing is done without a record there (a study's probe,
    :func:`gradprobe.probe.run.run_probe` called on its own) or when the name is in it already. The record is
    rewritten atomically (:func:`gradprobe.outputs.write_json_atomic`), keeping the time it was first written
    (``since``: what the next probe compares the files with, :func:`_unfinished`).

    Raises
    ------
    ValueError
        ``name`` is not one of :data:`PROBE_FILES`.
    OutputDirError (an OSError)
        The record cannot be read (:func:`_unfinished`'s refusal) or written (named).
    """
    if name not in PROBE_FILES:
        raise ValueError(f"{name!r} is no probe's file (a probe writes {', '.join(PROBE_FILES)})")
    folder = Path(folder)
    if os.path.lexists(folder / _UNFINISHED):
        key, top = "probe_files", folder
    elif _BATCH_DIR.fullmatch(folder.name) and os.path.lexists(folder.parent / _UNFINISHED):
        key, top, name = "probe_batch_folders", folder.parent, folder.name
    else:
        return
    record = _read_record(top)
    if name not in record[key]:
        record[key] = [*record[key], name]
        write_json_atomic(top / _UNFINISHED, record)


def _unrecord(folder: Path) -> None:
    """Delete ``folder``'s record of what a probe writes (:func:`_record_unfinished`) and its ``.tmp``."""
    for name in _UNFINISHED_FILES:
        _remove(folder / name)


def _unfinished(folder: Path, label: str = "--out") -> tuple[list[str], float]:
    """The files and ``batch_K`` folders that ``folder/.unfinished-probe.json`` names (:func:`_read_record`): what a
    probe killed there had started writing, its ``probe.json`` too (the record goes only once a probe is complete),
    and the record's time (seconds since the epoch); ``([], inf)`` without one.

    Raises
    ------
    OutputDirError (an OSError, errno EINVAL)
        :func:`_read_record`'s refusal; nothing is moved or deleted."""
    if not os.path.lexists(folder / _UNFINISHED):
        return [], math.inf
    record = _read_record(folder, label)
    return [*record["probe_files"], *record["probe_batch_folders"]], record["since"]


def _read_record(folder: Path, label: str = "--out") -> dict:
    """``folder/.unfinished-probe.json`` (:func:`_record_unfinished`) as ``{"probe_files": [...],
    "probe_batch_folders": [...], "since": t}``: the files and batch folders named (a record without
    ``probe_files`` names batch folders only; one of an older gradprobe names every one of :data:`PROBE_FILES`), and
    ``t`` the time it was first written, its ``since`` (:func:`claim_probe_file` keeps it there when it rewrites the
    record), else its modification time (seconds since the epoch).

    Raises
    ------
    OutputDirError (an OSError, errno EINVAL)
        The record cannot be read, names anything but a probe's files (:data:`PROBE_FILES`) and ``batch_K``
        folders, or its ``since`` is no finite number a float holds (:func:`_seconds`): named, with the fix (delete
        it and the files and batch folders the killed probe left, or choose another ``label``)."""
    path = folder / _UNFINISHED
    try:
        record = json.loads(path.read_text(encoding="utf-8-sig"))
        files, names = record.get("probe_files", []), record["probe_batch_folders"]
        since = record.get("since", path.stat().st_mtime)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        record, files, names, since = e, None, None, None
    since = _seconds(since)
    if (isinstance(files, list) and all(isinstance(n, str) and n in PROBE_FILES for n in files)
            and isinstance(names, list) and all(isinstance(n, str) and _BATCH_DIR.fullmatch(n) for n in names)
            and since is not None):
        return {"probe_files": files, "probe_batch_folders": names, "since": since}
    rm = "rm -r" if path.is_dir() and not path.is_symlink() else "rm"
    raise OutputDirError(errno.EINVAL, (
        f"{str(path)!r} (where a probe names the files and batch folders it is writing) is no list of them "
        f"({record!r}): delete it ({rm} {shell_word(path)}) and any file ({', '.join(PROBE_FILES)}) or batch_K folder "
        f"that a probe killed in {str(folder)!r} left, then probe again, or choose another {label}; nothing was "
        "moved"))


def _seconds(since) -> float | None:
    """A record's ``since`` (:func:`_read_record`) as a finite float (seconds since the epoch), else None: no number
    (a string, a bool, null), NaN or +-inf, or an integer too large for a float (``1`` and 400 zeros: ``float``
    raises OverflowError, as would the comparison with a file's time, :func:`_not_older`)."""
    if isinstance(since, bool) or not isinstance(since, (int, float)):
        return None
    try:
        seconds = float(since)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


#: Seconds by which a file a killed probe wrote may seem older than its record (:func:`_not_older`): file systems
#: whose timestamps are coarse (FAT: 2 s) round a later write down to before the record's.
_CLOCK_SLACK = 2.0


def _not_older(path: Path, since: float) -> bool:
    """Whether ``path`` (not followed, and for a folder every entry in it) was modified no earlier than ``since``
    (the record's time, :func:`_unfinished`) less :data:`_CLOCK_SLACK`: what a killed probe wrote after naming it.
    A file or folder moved there or copied keeping its times (``mv``, ``cp -a``) from before the record is a user's,
    kept. False when it cannot be read."""
    try:
        stamps = [path.lstat().st_mtime] + ([p.lstat().st_mtime for p in path.iterdir()]
                                            if path.is_dir() and not path.is_symlink() else [])
    except OSError:
        return False
    return min(stamps) >= since - _CLOCK_SLACK


def _killed_files(folder: Path, recorded: list[str], since: float) -> list[str]:
    """The files of ``recorded`` (:func:`_unfinished`) that a killed probe left in ``folder``: regular files (not
    links, not folders) named as one of :data:`PROBE_FILES`, written after the record (:func:`_not_older`, ``since``
    its time). A link of such a name is no probe's (it writes none), nor an older file: kept, and refused
    (:func:`_not_a_probe`)."""
    return [name for name in recorded if name in PROBE_FILES and not (folder / name).is_symlink()
            and (folder / name).is_file() and _not_older(folder / name, since)]


def _killed_batches(folder: Path, recorded: list[str], since: float) -> list[str]:
    """The batch folders of ``recorded`` (:func:`_unfinished`) that a killed probe left in ``folder``: real
    folders holding a probe's files only, or nothing (:func:`_batch_kind` ``"probe"`` or ``"debris"``), none of it
    older than the record (:func:`_not_older`, ``since`` its time). One holding other files too (a user's, put there
    since), an older one (moved or copied there), a link or a file is no probe's: kept (and refused where the probe
    writes, :func:`_refuse_batch_folders_in_the_way`)."""
    return [name for name in recorded
            if _batch_kind(folder / name) in ("probe", "debris") and _not_older(folder / name, since)]


def _is_probe_name(name) -> bool:
    """Whether ``name`` (a manifest's entry) is one :func:`_probe_names` could list."""
    return isinstance(name, str) and (name in PROBE_FILES or name.removesuffix(".tmp") in PROBE_FILES
                                      or _BATCH_DIR.fullmatch(name) is not None)


def _manifest(aside: Path) -> list[str] | None:
    """The earlier probe's file names in ``aside/manifest.json`` (:func:`_start_moving`); None without one (no move
    was under way, or the previous version of gradprobe left ``aside``, with none).

    Raises
    ------
    OutputDirError (an OSError)
        The manifest cannot be read or names other files (named, with the fix: move the files back by hand).
    """
    path = aside / _MANIFEST
    try:
        names = json.loads(path.read_text(encoding="utf-8"))["earlier_probe_files"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        names = e
    if isinstance(names, list) and all(_is_probe_name(n) for n in names):
        return names
    raise OutputDirError(errno.EINVAL, (
        f"{str(path)!r} (left by a probe that was killed while moving the earlier probe's files) is no list of a "
        f"probe's files ({names!r}): move the files of {str(aside)!r} back into {str(aside.parent)!r} by hand, delete "
        f"{str(aside)!r}, and probe again"))


def _leftover(folder: ProbeFolder, say, recorded: tuple[list[str], float], label: str = "--out") -> None:
    """Deal with a ``.earlier-probe/`` left by a killed probe (:func:`replacing_earlier_probe`), saying so first;
    ``recorded``: the files and batch folders the killed probe named as its own and the record's time
    (:func:`_unfinished`). Beside a record, the folder's ``probe.json`` is the killed probe's (the record goes only
    once a probe is complete), never taken for a newer complete probe; its files there are put aside for the earlier
    probe's only where a killed probe wrote them (:func:`_killed_files`: a file the record does not name, a link, or a
    file older than the record, is a user's: refused, nothing moved)."""
    aside = folder.path / EARLIER
    if not aside.is_dir():
        return _remove(aside)
    listed = _manifest(aside)
    kept = sorted(p.name for p in aside.iterdir() if p.name not in _MANIFEST_FILES)
    if listed is not None and not set(listed) <= set(kept):  # killed while moving: part of it still in the folder
        return _half_moved(folder, say, kept, [n for n in listed if n not in kept])
    unfinished = math.isfinite(recorded[1])  # a record there: the folder's probe was killed before it was complete
    if listed is None and (((folder.path / PROBE_JSON).exists() and not unfinished) or not kept):
        if kept:
            say(f"{shown(str(aside))} (left by an earlier probe that was killed: {', '.join(kept)}) is deleted: "
                f"the probe in {shown(str(folder.path))} is newer and is kept as the earlier probe")
        return _remove(aside)
    # all of it aside: the folder's probe files are the killed probe's (its batch folders as it recorded them,
    # :func:`_killed_batches`, those among the earlier probe's, :func:`_batch_folders_of`, and any of a name aside:
    # a user's batch_K of a probe's file names is kept)
    partial = sorted(set(_probe_names(folder.path, _batch_folders_of(aside / PROBE_JSON)))
                     | set(_killed_batches(folder.path, *recorded))
                     | {n for n in kept if _BATCH_DIR.fullmatch(n) and os.path.lexists(folder.path / n)})
    files = [n for n in partial if n in PROBE_FILES]
    theirs = sorted(set(files) - set(_killed_files(folder.path, *recorded))) if unfinished else []
    if theirs:  # a user's file where the earlier probe's goes back: refused before anything moves
        raise OutputDirError(errno.EEXIST, (
            f"{label} {str(folder.path)!r} holds {', '.join(theirs)}, which the probe killed there did not write (not "
            f"named in its record {_UNFINISHED}, a link, or older than the record), where the earlier probe it had "
            f"moved to {EARLIER}/ goes back: move {'them' if len(theirs) > 1 else 'it'} out of the folder and probe "
            f"again, or choose another {label}; nothing was moved"))
    say(f"restored the earlier probe in {shown(str(folder.path))} from {EARLIER}/ ({', '.join(kept)}), left by "
        "a probe that was killed" + (f"; its unfinished files ({', '.join(partial)}) were deleted" if partial else ""))
    _put_back(folder, kept, partial, listed is None, unrecord=True)


def _half_moved(folder: ProbeFolder, say, kept: list[str], rest: list[str]) -> None:
    """Put back the part ``kept`` of the earlier probe in ``.earlier-probe/`` beside the ``rest`` of it, still in the
    folder: a probe was killed while moving its files (either way), saying so first."""
    rest = [n for n in rest if (folder.path / n).exists()]
    if kept:
        say(f"restored the earlier probe in {shown(str(folder.path))} from {EARLIER}/ ({', '.join(kept)}), left by a "
            f"probe that was killed while moving the earlier probe's files; the rest of them ({', '.join(rest)}) were "
            f"still in {shown(str(folder.path))}")
    else:
        say(f"removed {shown(str(folder.path / EARLIER))}, left by a probe that was killed while moving the earlier "
            f"probe's files: it held none of them; all ({', '.join(rest)}) are still in {shown(str(folder.path))}")
    _put_back(folder, kept, [], False)


def _put_back(folder: ProbeFolder, kept: list[str], partial: list[str], name_them: bool,
              unrecord: bool = False) -> None:
    """Delete ``partial`` (a killed probe's unfinished files) and move ``kept`` from ``.earlier-probe/`` back into
    the folder, naming them in its manifest first when ``name_them`` (it holds none yet); with ``unrecord``, delete
    the killed probe's record of what it writes (:func:`_unrecord`) once those of ``partial`` are gone."""
    aside = folder.path / EARLIER
    try:
        if name_them:
            with contextlib.suppress(OSError):  # a full disk: put back as before, unnamed (killed now, it may be lost)
                _start_moving(aside, kept)
        for name in partial:
            _remove(folder.path / name)
        if unrecord:
            _unrecord(folder.path)
        for name in kept:
            (aside / name).rename(folder.path / name)
        _done_moving(aside)
        _remove(aside / f"{_MANIFEST}.tmp")
        aside.rmdir()
    except OSError as e:
        raise output_error(f"restoring the earlier probe from {EARLIER}/ in", folder.path, e) from e


def _not_a_probe(folder: Path, names: list[str], label: str = "--out", recorded: bool = False) -> OutputDirError:
    """The refusal of ``folder``, which holds files named as a probe's (``names``) but no ``probe.json``: they are
    not an earlier probe's (a user's own ``report.html``, or what a probe killed before its ``probe.json`` left),
    and a probe there would overwrite them; named with the fix. With ``recorded`` (a killed probe's record is there,
    :func:`_unfinished`), they are none of that probe's either (:func:`_killed_files`, :func:`_killed_batches`: not
    named in the record, links, or older than it), and the fix says so instead of offering to delete them. A
    ``probe.json`` beside that record (the killed probe's, or one of ``names``: a user's copied there) is no earlier
    probe's, so the refusal then says which files the killed probe did not write and that they are kept, not that the
    folder holds no ``probe.json``."""
    shown, one = ", ".join(names), len(names) == 1
    them, are = ("it", "it is") if one else ("them", "they are")
    not_its = (f"its record {_UNFINISHED} does not name {them}, or {are} {'a link' if one else 'links'} or older than "
               "the record")
    if recorded and os.path.lexists(folder / PROBE_JSON):
        return OutputDirError(errno.EEXIST, (
            f"{label} {str(folder)!r} holds {shown}, which the probe killed there before it was complete did not "
            f"write ({not_its}), so {are} no probe's and kept (a probe writes {', '.join(PROBE_FILES)}): a probe there "
            f"would overwrite {them}. Move {shown} out of {str(folder)!r} and probe again (the probe removes what the "
            f"killed one left), or choose another {label}"))
    why = (f"the probe killed there did not write {them}: {not_its}" if recorded else
           f"delete {them} if left by a probe that was killed before it wrote {PROBE_JSON}")
    return OutputDirError(errno.EEXIST, (
        f"{label} {str(folder)!r} holds {shown} but no {PROBE_JSON}, so {are} no earlier probe's (a probe writes "
        f"{', '.join(PROBE_FILES)}): a probe there would overwrite {them}. Choose another {label}, or move {shown} out "
        f"of {str(folder)!r} ({why})"))


def _move_aside(folder: ProbeFolder, say, label: str = "--out") -> None:
    """Refuse another command's folder; restore a leftover; without ``probe.json``, refuse complete files named as a
    probe's and ``batch_K`` folders holding any (:func:`_not_a_probe`: a user's own, or a complete probe copied
    there, cannot be told from a killed probe's) but those a killed probe recorded as its own (:func:`_killed_files`,
    :func:`_killed_batches`) and remove those, a killed probe's ``.tmp`` partials and ``batch_K`` folders of ``.tmp``
    partials only or nothing (:func:`_batch_kind` ``"debris"``), and its record (:func:`_unrecord`); with it, refuse the
    earlier probe's batch folders holding other files too; refuse a ``batch_K`` in the way of the probe's
    (:func:`_refuse_batch_folders_in_the_way`); move the earlier probe's files into ``EARLIER``. Every refusal comes
    before anything is removed or moved."""
    other = _other_output(folder.path, label)
    if other is not None:
        raise OutputDirError(errno.EEXIST, f"{label} {str(folder.path)!r} {other}")
    recorded = _unfinished(folder.path, label)  # read (or refused) before anything moves
    _leftover(folder, say, recorded, label)
    aside = folder.path / EARLIER
    # only a folder with probe.json holds an earlier probe, and only without a record: beside one it is the killed
    # probe's (the record goes once a probe is complete); _leftover may have put an earlier probe back, record gone
    top = (folder.path / PROBE_JSON).is_file() and not os.path.lexists(folder.path / _UNFINISHED)
    earlier = _batch_folders_of(folder.path / PROBE_JSON) if top else None  # its batch folders (None: any is listed)
    if top:
        _refuse_mixed_batch_folders(folder.path, label, earlier)
    names = _probe_names(folder.path, earlier)
    # what a killed probe recorded as its own
    killed = [] if top else _killed_files(folder.path, *recorded) + _killed_batches(folder.path, *recorded)
    partial = [] if top else [n for n in names if n.endswith(".tmp") or n in killed or (
        _BATCH_DIR.fullmatch(n) and _batch_kind(folder.path / n) == "debris")]
    whole = [] if top else [n for n in names if n not in partial]
    if whole:  # a complete file of a probe's name, or a batch_K holding one, may be a user's own: refused, kept
        raise _not_a_probe(folder.path, whole, label, recorded=math.isfinite(recorded[1]))
    _refuse_batch_folders_in_the_way(folder, names, earlier, label)
    for name in partial:  # .tmp partials, batch_K folders of those only and what it recorded: a killed probe's
        _remove(folder.path / name)
    _unrecord(folder.path)  # a killed probe's (its files gone)
    if partial:
        say(f"removed what a probe killed before it was complete left in {shown(str(folder.path))} "
            f"({', '.join(partial)})")
    folder.earlier = names if top else []
    folder.kept = sorted(p.name for p in folder.path.iterdir() if _BATCH_DIR.fullmatch(p.name)
                         and p.name not in folder.earlier)
    if not folder.earlier:
        return
    moved = []
    try:
        aside.mkdir()
        _start_moving(aside, folder.earlier)
        for name in folder.earlier:
            (folder.path / name).rename(aside / name)
            moved.append(name)
        _done_moving(aside)
    except OSError as e:
        for name in moved:
            (aside / name).rename(folder.path / name)
        with contextlib.suppress(OSError):
            _done_moving(aside)
            aside.rmdir()
        raise output_error("moving the earlier probe's files aside in", folder.path, e) from e


def _roll_back(folder: ProbeFolder) -> None:
    """After a failed probe: delete what it wrote (:data:`PROBE_FILES` and their ``.tmp`` partials, every ``batch_K``
    but those it found there and kept, :attr:`ProbeFolder.kept`) and its record of what it writes, then put the
    earlier probe's files back."""
    if not folder.path.is_dir():
        return
    aside = folder.path / EARLIER
    if folder.earlier and aside.is_dir():
        with contextlib.suppress(OSError):  # a full disk: put back as before, unnamed (killed now, it may be lost)
            _start_moving(aside, folder.earlier)
    for p in sorted(folder.path.iterdir()):
        if (p.name in _OURS and not p.is_dir()) or (_BATCH_DIR.fullmatch(p.name) and p.name not in folder.kept):
            _remove(p)
    _unrecord(folder.path)  # its files gone: before the earlier files come back
    for name in folder.earlier:
        if (aside / name).exists():
            (aside / name).rename(folder.path / name)
    with contextlib.suppress(OSError):
        _done_moving(aside)
        aside.rmdir()
