"""``gradprobe probe`` and its folder (gradprobe.probe.output.replacing_earlier_probe): SIGTERM is rolled back as
Ctrl-C is (exit 143, one line, the earlier probe put back, the previous handler restored), and a ``.earlier-probe/``
left by a probe killed by SIGKILL is put back (or, beside a complete probe, deleted) with a line saying so, never
deleted silently."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import gradprobe.cli.probe as probe_cli
import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.forecast import default_curve_path
from gradprobe.layout import UNFINISHED_PROBE
from gradprobe.probe.output import EARLIER, replacing_earlier_probe

_PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
          "--group", "2", "--no-progress", "--reference-curve", str(default_curve_path())]
_OLD = {"probe.json": '{"old": true}', "report.html": "<p>old</p>", "calibrated.json": "{}"}


def _files(folder: Path) -> dict:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def _folder(tmp_path, current=None, leftover=_OLD):
    """DIR with the user's notes.txt, ``current`` probe files and a leftover ``.earlier-probe/`` holding ``leftover``."""
    out = tmp_path / "p"
    (out / EARLIER).mkdir(parents=True)
    for name, text in leftover.items():
        (out / EARLIER / name).write_text(text)
    for name, text in (current or {}).items():
        (out / name).write_text(text)
    (out / "notes.txt").write_text("mine")
    return out


def _sigterm(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises at the next bytecode; never reached
    pytest.fail("SIGTERM did not stop the probe")


def test_sigterm_in_probe_exits_143_and_puts_the_earlier_probe_back(tmp_path, capsys, monkeypatch):
    out = tmp_path / "p"
    out.mkdir()
    for name, text in _OLD.items():
        (out / name).write_text(text)
    (out / "notes.txt").write_text("mine")

    def terminated(config, *, batches, out):
        (Path(out) / "probe.json").write_text('{"partial": true}')
        (Path(out) / "batch_0").mkdir()
        _sigterm()

    monkeypatch.setattr(probe_batches, "run_probe_batches", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert main(_PROBE + ["--out", str(out)]) == 143
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back
    err = capsys.readouterr().err
    assert err.strip() == (f"gradprobe probe: terminated (SIGTERM); the unfinished probe's files in {out} were removed; "
                           "the earlier probe's files there (calibrated.json, probe.json, report.html) were put back, "
                           "so nothing partial is left as if complete (run the same command again to probe)")
    assert _files(out) == {**_OLD, "notes.txt": "mine"} and sorted(p.name for p in out.iterdir()) == [
        "calibrated.json", "notes.txt", "probe.json", "report.html"]


def test_sigterm_before_the_probe_started(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(probe_cli, "_config_from_args", _sigterm)
    assert main(_PROBE + ["--out", str(tmp_path / "new")]) == 143
    assert capsys.readouterr().err.strip() == (f"gradprobe probe: terminated (SIGTERM) before the probe started; "
                                               f"nothing was written to {tmp_path / 'new'}")
    assert not (tmp_path / "new").exists()


def test_a_leftover_is_restored_then_replaced(tmp_path):
    out = _folder(tmp_path, current={"tokens.jsonl": "killed probe's partial"})  # a probe killed by SIGKILL
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:
        assert folder.earlier == ["calibrated.json", "probe.json", "report.html"]  # the restored probe, aside again
        assert _files(out / EARLIER) == _OLD
        assert sorted(p.name for p in out.iterdir()) == [EARLIER, UNFINISHED_PROBE, "notes.txt"]  # its record
        (out / "probe.json").write_text("new")
    assert said == [f"restored the earlier probe in {out} from {EARLIER}/ (calibrated.json, probe.json, "
                                    "report.html), left by a probe that was killed; its unfinished files "
                                    "(tokens.jsonl) were deleted"]
    assert _files(out) == {"probe.json": "new", "notes.txt": "mine"} and not (out / EARLIER).exists()


def test_a_restored_leftover_survives_a_failed_probe(tmp_path, capsys, monkeypatch):
    out = _folder(tmp_path)

    def interrupted(config, *, batches, out):
        (Path(out) / "probe.json").write_text('{"partial": true}')
        raise KeyboardInterrupt

    monkeypatch.setattr(probe_batches, "run_probe_batches", interrupted)
    assert main(_PROBE + ["--out", str(out)]) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == (f"gradprobe probe: warning: restored the earlier probe in {out} from {EARLIER}/ "
                        "(calibrated.json, probe.json, report.html), left by a probe that was killed")
    assert len(lines) == 2 and "(calibrated.json, probe.json, report.html) were put back" in lines[1]
    assert _files(out) == {**_OLD, "notes.txt": "mine"} and not (out / EARLIER).exists()


def test_a_leftover_beside_a_complete_probe_is_deleted_after_saying_so(tmp_path):
    current = {"probe.json": '{"current": true}', "report.html": "<p>current</p>"}
    out = _folder(tmp_path, current=current)
    with pytest.warns(UserWarning, match=r"\.earlier-probe \(left by an earlier probe that was killed: "
                                         r"calibrated\.json, probe\.json, report\.html\) is deleted") as caught:
        with pytest.raises(ValueError, match="bad reward"):
            with replacing_earlier_probe(out) as folder:
                assert folder.earlier == ["probe.json", "report.html"] and _files(out / EARLIER) == current
                (out / "tokens.jsonl").write_text("")
                raise ValueError("bad reward")
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].endswith(f"the probe in {out} is newer and is kept as the earlier probe")
    assert _files(out) == {**current, "notes.txt": "mine"} and not (out / EARLIER).exists()
