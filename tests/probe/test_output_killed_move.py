"""A probe killed (SIGKILL) at any point of :func:`gradprobe.probe.output.replacing_earlier_probe`'s file moves
loses no file of the earlier probe: the next probe into the folder finds either the earlier probe whole (put back,
then moved aside again) or, once the new probe had finished, the new one. A killed move used to leave the earlier
probe split between ``.earlier-probe/`` and the folder, and the next probe either deleted the part aside (the
``probe.json`` still in the folder taken for a newer probe) or deleted the part still in the folder (taken for the
killed probe's unfinished files).

Each kill point is simulated by stopping the process's file operations (rename, replace, unlink, rmdir, mkdir,
rmtree in the folder or its ``.earlier-probe/``) before the k-th one, raising :class:`_Killed`, a BaseException that
no handler of the module catches, so nothing after it runs, as after SIGKILL; every k is tried."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

from gradprobe.layout import UNFINISHED_PROBE
from gradprobe.probe.output import EARLIER, claim_probe_file, replacing_earlier_probe

# a 2-batch probe's probe.json as gradprobe writes it (versions, config): its batch_0 and batch_1 are its own
_PROBE_JSON = json.dumps({"rewards": [], "versions": {}, "config": {"probe_batches": 2},
                          "batches": [{"rewards": []}, {"rewards": []}]})
_EARLIER = {"alignment.safetensors": "old a", "batch_0/probe.json": "old batch 0", "batch_1/probe.json": "old batch 1",
            "calibrated.json": "old cal", "probe.json": _PROBE_JSON, "report.html": "old report",
            "tokens.jsonl": "old tokens"}
_NEW = {"alignment.safetensors": "new a", "tokens.jsonl": "new tokens", "probe.json": "new probe"}  # in write order
_MINE = {"notes.txt": "mine"}
_NAMES = {name.split("/")[0] for name in _EARLIER}  # the earlier probe's names in the folder


class _Killed(BaseException):
    """The process was killed here (SIGKILL): no except clause of the module catches it, nothing after it runs."""


class _Killer:
    """Counts the file operations on ``out`` and ``out/.earlier-probe`` and raises :class:`_Killed` instead of the
    one numbered ``at`` (0-based) and every one after it."""

    def __init__(self, out: Path, at: float):
        self.out, self.at, self.ops = out, at, []

    def step(self, what: str, path) -> None:
        path = Path(path)
        if path.parent not in (self.out, self.out / EARLIER):
            return
        if len(self.ops) >= self.at:
            raise _Killed(f"{what} {path.relative_to(self.out)}")
        self.ops.append(f"{what} {path.relative_to(self.out)}")


@contextlib.contextmanager
def _killed_at(out: Path, at: float):
    killer = _Killer(out, at)
    rename, replace, unlink, rmdir, mkdir = Path.rename, os.replace, Path.unlink, Path.rmdir, Path.mkdir
    rmtree = shutil.rmtree

    def path_op(what, real):
        def op(self, *args, **kwargs):
            killer.step(what, self)
            return real(self, *args, **kwargs)
        return op

    def os_replace(src, dst, *args, **kwargs):
        killer.step("replace", dst)
        return replace(src, dst, *args, **kwargs)

    def shutil_rmtree(path, *args, **kwargs):
        killer.step("rmtree", path)
        return rmtree(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "rename", path_op("rename", rename))
        mp.setattr(Path, "unlink", path_op("unlink", unlink))
        mp.setattr(Path, "rmdir", path_op("rmdir", rmdir))
        mp.setattr(Path, "mkdir", path_op("mkdir", mkdir))
        mp.setattr(os, "replace", os_replace)
        mp.setattr(shutil, "rmtree", shutil_rmtree)
        yield killer


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _write(folder: Path, files: dict) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def _write_as_a_probe(out: Path, files: dict) -> None:
    """Write ``files`` (names in ``out``) as a probe's writers do: each named in the probe's record first."""
    for name, text in files.items():
        claim_probe_file(out, name)
        (out / name).write_text(text)


def _earlier_folder(out: Path) -> Path:
    _write(out, {**_EARLIER, **_MINE})
    return out


def _leftover_folder(out: Path) -> Path:
    """What a probe killed (by the previous version too: no manifest) while it ran leaves: the earlier probe whole in
    .earlier-probe/, the killed probe's unfinished files (no probe.json) in the folder."""
    _write(out / EARLIER, _EARLIER)
    _write(out, {"tokens.jsonl": "killed tokens", "alignment.safetensors": "killed a", **_MINE})
    return out


def _probe(out: Path, *, finish: bool) -> None:
    """One probe into ``out``: writes the new files (all of them when ``finish``, else two and raises)."""
    with replacing_earlier_probe(out, say=lambda line: None):
        _write_as_a_probe(out, _NEW if finish else dict(list(_NEW.items())[:2]))
        if not finish:
            raise ValueError("the probe failed")


def _next_probe(out: Path) -> tuple[dict, list[str]]:
    """The next probe into ``out``, failing at once: what it found as the earlier probe (asserted moved aside whole,
    then put back), and the lines it said."""
    said = []
    with pytest.raises(ZeroDivisionError):
        with replacing_earlier_probe(out, say=said.append):
            aside = _tree(out / EARLIER)
            left = sorted(p.name for p in out.iterdir() if p.name != UNFINISHED_PROBE)  # but its own record
            assert left == sorted([EARLIER, *_MINE]), "left in the folder"
            1 / 0
    found = _tree(out)
    assert found == {**aside, **_MINE}, "not put back whole"
    assert not (out / EARLIER).exists()
    return aside, said


def _sweep(tmp_path, make, run, allowed):
    """Kill ``run`` before each of its file operations in turn; the next probe must find a probe of ``allowed``
    whole. Returns the kill points that broke that, with what was found instead."""
    with _killed_at(make(tmp_path / "count"), float("inf")) as counter:
        with contextlib.suppress(ValueError):
            run(counter.out)
    broken = []
    for k in range(len(counter.ops) + 1):
        out = make(tmp_path / f"kill{k}")
        with _killed_at(out, k), contextlib.suppress(_Killed, ValueError):
            run(out)
        left = _tree(out)
        aside_left = (out / EARLIER).is_dir() and any(p.name in _NAMES for p in (out / EARLIER).iterdir())
        try:
            found, said = _next_probe(out)
        except (AssertionError, OSError) as e:
            found, said = f"error {e}", []
        where = f"killed before op {k} ({counter.ops[k]})" if k < len(counter.ops) else "not killed"
        if found not in allowed:
            lost = sorted(set(_EARLIER) - set(found)) if isinstance(found, dict) else found
            broken.append(f"{where}: left {sorted(left)}; the next probe found {sorted(found)}, lost {lost}")
        elif aside_left and not said:  # a .earlier-probe/ holding the earlier probe's files is never removed unsaid
            broken.append(f"{where}: the next probe said nothing of {EARLIER}/")
    return counter.ops, broken


def test_every_kill_point_of_a_successful_probe_keeps_one_whole_probe(tmp_path):
    ops, broken = _sweep(tmp_path, _earlier_folder, lambda out: _probe(out, finish=True), [_EARLIER, _NEW])
    assert len(ops) >= 7 and broken == []


def test_every_kill_point_of_a_failed_probe_keeps_the_earlier_probe(tmp_path):
    ops, broken = _sweep(tmp_path, _earlier_folder, lambda out: _probe(out, finish=False), [_EARLIER])
    assert len(ops) >= 2 * len(_EARLIER) and broken == []


@pytest.mark.parametrize("leftover", ["killed while it ran", "killed while moving"])
def test_every_kill_point_of_restoring_a_leftover_keeps_the_earlier_probe(tmp_path, leftover):
    """The leftover of a probe killed while it ran (a manifest-less .earlier-probe/, as the previous version left it)
    or while it moved the earlier files aside (half of them) is put back; a kill while putting it back, or while
    moving it aside again, loses nothing either."""
    make = _leftover_folder if leftover == "killed while it ran" else (lambda out: _split(out, 3))
    ops, broken = _sweep(tmp_path, make, lambda out: _probe(out, finish=False), [_EARLIER])
    assert len(ops) >= 2 * len(_EARLIER) and broken == []


def test_a_failed_probe_that_wrote_probe_json_killed_while_rolling_back(tmp_path):
    """The block wrote a complete probe, then raised (Ctrl-C while printing): the roll-back deletes the new files and
    puts the earlier back. Killed in between, the next probe must not keep the half-deleted new probe as complete
    and delete the earlier one."""

    def run(out):
        with replacing_earlier_probe(out, say=lambda line: None):
            _write_as_a_probe(out, _NEW)
            raise ValueError("interrupted after probe.json")

    ops, broken = _sweep(tmp_path, _earlier_folder, run, [_EARLIER, _NEW])
    assert broken == []


def _split(out: Path, moved: int) -> Path:
    """``out`` left by a probe killed after it moved ``moved`` of the earlier files aside (sorted order)."""
    _earlier_folder(out)
    with _killed_at(out, float("inf")) as counter:
        _probe(out, finish=True)
    first = next(k for k, op in enumerate(counter.ops) if op.startswith("rename") and EARLIER not in op.split()[1])
    shutil.rmtree(out)
    _earlier_folder(out)
    with _killed_at(out, first + moved), contextlib.suppress(_Killed):
        _probe(out, finish=True)
    return out


@pytest.mark.parametrize("moved, aside, rest", [
    (2, "alignment.safetensors, batch_0", "batch_1, calibrated.json, probe.json, report.html, tokens.jsonl"),
    (5, "alignment.safetensors, batch_0, batch_1, calibrated.json, probe.json", "report.html, tokens.jsonl"),
])
def test_a_half_moved_earlier_probe_is_put_back_saying_so(tmp_path, moved, aside, rest):
    out = _split(tmp_path / "p", moved)
    assert sorted(p.name for p in (out / EARLIER).iterdir() if p.name in _EARLIER or p.is_dir()) == aside.split(", ")
    found, said = _next_probe(out)
    assert found == _EARLIER
    assert said == [f"restored the earlier probe in {out} from {EARLIER}/ ({aside}), left by a probe that was killed "
                    f"while moving the earlier probe's files; the rest of them ({rest}) were still in {out}"]


def test_a_probe_killed_before_it_moved_any_earlier_file_leaves_them_all_in_place(tmp_path):
    out = _split(tmp_path / "p", 0)
    assert (out / EARLIER).is_dir()  # holding only the list of the files it was about to move
    found, said = _next_probe(out)
    assert found == _EARLIER
    assert said == [f"removed {out / EARLIER}, left by a probe that was killed while moving the earlier probe's "
                    f"files: it held none of them; all (alignment.safetensors, batch_0, batch_1, calibrated.json, "
                    f"probe.json, report.html, tokens.jsonl) are still in {out}"]


@pytest.mark.parametrize("text", ["{", '{"earlier_probe_files": ["../notes.txt"]}'])
def test_an_unreadable_list_of_the_earlier_files_is_refused_touching_nothing(tmp_path, text):
    out = _split(tmp_path / "p", 2)
    manifest = next(p for p in (out / EARLIER).iterdir() if p.name not in _NAMES)  # the list, beside the two moved
    manifest.write_text(text)
    before = _tree(out)
    with pytest.raises(OSError, match=r"is no list of a probe's files .*: move the files of .* back into .* by hand"):
        with replacing_earlier_probe(out, say=lambda line: None):
            pytest.fail("probed")
    assert _tree(out) == before


def test_a_manifest_less_half_moved_leftover_is_handled_as_before(tmp_path):
    """A .earlier-probe/ the previous version left half moved holds no list of the earlier files: as before, the
    probe.json in the folder is taken for a newer probe and the leftover is deleted, saying so."""
    out = tmp_path / "p"
    _write(out / EARLIER, {k: v for k, v in _EARLIER.items() if k < "probe.json"})
    _write(out, {**{k: v for k, v in _EARLIER.items() if k >= "probe.json"}, **_MINE})
    found, said = _next_probe(out)
    assert found == {"probe.json": _PROBE_JSON, "report.html": "old report", "tokens.jsonl": "old tokens"}
    assert said == [f"{out / EARLIER} (left by an earlier probe that was killed: alignment.safetensors, batch_0, "
                    f"batch_1, calibrated.json) is deleted: the probe in {out} is newer and is kept as the earlier "
                    "probe"]



def test_load_probe_refuses_a_half_moved_folder(tmp_path):
    """A probe killed while it moved the earlier files aside (3 of 7 moved, probe.json still in the folder) leaves a
    probe.json whose alignment.safetensors is gone: load_probe names the half-moved state and the fix instead of
    reading it as whole; the same folder read before the kill was read."""
    from gradprobe.api.probe_result import ProbeFileError, load_probe

    out = _earlier_folder(tmp_path / "out")
    assert load_probe(out).raw == json.loads(_PROBE_JSON)
    with pytest.raises(_Killed), _killed_at(out, 5):  # mkdir, the manifest's os.replace, then 3 moves
        _probe(out, finish=True)
    assert (out / EARLIER / "manifest.json").is_file() and (out / "probe.json").is_file()
    assert not (out / "alignment.safetensors").exists()
    with pytest.raises(ProbeFileError, match=rf"^{out} holds part of a probe: a probe was killed while it moved the "
                       rf"earlier probe's files between {out} and {out / EARLIER} \(its manifest.json names them\); "
                       rf"the next `gradprobe probe --out {out}` puts them back first, or move them back by hand$"):
        load_probe(out)
