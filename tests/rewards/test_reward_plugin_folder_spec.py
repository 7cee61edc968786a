"""``--rewards mydir:fn`` where ``mydir`` is a folder (no ``__init__.py``): Python imports it as a namespace package,
so the reward was refused as "mydir has no 'fn'; its functions: none", as though a module were found. It is named a
folder now, with the file form as the fix (as ``mydir/:fn`` already was)."""

from __future__ import annotations

import pytest
from plugin_helpers import plugin_records_restored

from gradprobe.rewards import UnknownRewardError
from gradprobe.rewards.plugin import load_reward_plugin


@pytest.mark.parametrize("name", ["mydir", "my\tdir"])
def test_a_folder_named_as_a_module_is_named_a_folder(tmp_path, monkeypatch, name):
    (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path)
    shown, where = (text.replace("\t", "\\t") for text in (name, str(tmp_path / name)))
    with plugin_records_restored(monkeypatch, tmp_path):
        with pytest.raises(UnknownRewardError) as e:
            load_reward_plugin(f"{name}:fn")
    assert str(e.value) == (
        f"reward {name + ':fn'!r}: {shown} is a folder (found as {where}), not "
        f"a Python module; name the file that defines the function ({shown}/FILE.py:FUNCTION), or write it as "
        "MODULE:FUNCTION (a module importable from the working directory or sys.path) or path/to/file.py:FUNCTION")
