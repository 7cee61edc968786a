"""How ``gradprobe study``'s last line says the probe's state: a resumed study whose probe had already finished
printed ``probe: skipped``, which a trial user read as the probe having been left out."""

from __future__ import annotations

from pathlib import Path

from gradprobe.study.result import StudyResult


def _probe_said(probe: str) -> str:
    line = StudyResult(out=Path("st"), plan_sha256="0" * 64, probe=probe).summary().splitlines()[0]
    return line.split("; probe: ", 1)[1].split("; wall time", 1)[0]


def test_a_probe_done_earlier_is_said_so_and_the_other_states_as_they_are():
    assert _probe_said("skipped") == "already done (probe.json kept)"
    assert StudyResult(out=Path("st"), plan_sha256="0" * 64, probe="skipped").probe == "skipped"  # the API's value
    assert [_probe_said(p) for p in ("done", "off", "failed: boom")] == ["done", "off", "failed: boom"]
