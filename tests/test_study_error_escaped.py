"""``gradprobe study`` prints its errors with control characters escaped (``\\x1b``), line by line: a study resumed
after its plug-in reward file ``e\\x1b[31m.py`` was edited printed ``now runs /tmp/.../e^[[31m.py`` with a raw escape,
which turned the terminal red (the message is built where the study's plug-ins are checked)."""

from __future__ import annotations

import gradprobe.study.runner as runner
from gradprobe.cli import main


def _refusing(message: str):
    def run_study(*args, **kwargs):
        raise runner.StudyError(message)
    return run_study


def test_a_study_error_naming_a_file_with_an_escape_prints_it_escaped(tmp_path, monkeypatch, capsys):
    plugin = tmp_path / "e\x1b[31m.py"
    message = (f"{tmp_path / 'study'}: reward '{plugin}:fn' now runs {plugin} (sha256 0123456789ab), not the code the "
               "study's runs started with")
    monkeypatch.setattr(runner, "run_study", _refusing(message))
    status = main(["study", str(tmp_path / "plan.toml"), "--out", str(tmp_path / "study"), "--executor", "inline"])
    err = capsys.readouterr().err
    assert status == 2
    assert "\x1b" not in err
    escaped = message.replace("\x1b", "\\x1b")
    assert err == f"gradprobe study: error: {escaped}\n"
    assert f"now runs {tmp_path}/e\\x1b[31m.py (sha256 0123456789ab)" in err


def test_the_line_breaks_of_an_error_are_kept_and_each_line_escaped(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "run_study", _refusing("first line \x07bell\nsecond\tline"))
    assert main(["study", str(tmp_path / "plan.toml"), "--out", str(tmp_path / "study")]) == 2
    assert capsys.readouterr().err == "gradprobe study: error: first line \\x07bell\nsecond\\tline\n"
