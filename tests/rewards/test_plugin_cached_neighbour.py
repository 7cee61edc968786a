"""A reward file importing a module beside it (``helper.py``) whose name the process already imported from another
plug-in folder (gradprobe.rewards.plugin): Python imports a module name once per process, so the second reward ran
the first folder's helper (or failed on a name it lacks) while its record named its own. It is refused, naming both
files and the fix; a helper shared by two files of one folder, and a file beside a standard-library name, are not."""

from __future__ import annotations

import pytest

from gradprobe.rewards import get_reward
from gradprobe.rewards.base import UnknownRewardError

from plugin_helpers import forget_modules, plugin_records_restored

READER = "from helper import score\n"


def _folder(root, name: str, value: float):
    folder = root / name
    folder.mkdir()
    (folder / "helper.py").write_text(f"def score(prompts, completions, **kwargs):\n"
                                      f"    return [{value}] * len(completions)\n")
    (folder / "r.py").write_text(READER)
    (folder / "r2.py").write_text("import helper\n\ndef twice(prompts, completions, **kwargs):\n"
                                  "    return [2 * x for x in helper.score(prompts, completions)]\n")
    return folder


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with plugin_records_restored(monkeypatch, tmp_path):
        yield tmp_path.resolve()
    forget_modules(tmp_path)


def test_a_helper_of_another_folder_already_imported_is_refused_naming_both_files(root):
    a, b = _folder(root, "a", 1.0), _folder(root, "b", 2.0)
    assert get_reward(f"{a / 'r.py'}:score") is not None
    assert get_reward(f"{a / 'r2.py'}:twice") is not None  # one folder's helper, shared: no refusal
    with pytest.raises(UnknownRewardError) as e:
        get_reward(f"{b / 'r.py'}:score")
    assert str(e.value) == (
        f"reward '{b / 'r.py'}:score': {b / 'r.py'} imports 'helper', and this process has already imported 'helper' "
        f"from {a / 'helper.py'}, not {b / 'helper.py'} beside it (Python imports a module name once per process, so "
        "the reward would run the other file's code); rename one of the two modules, or load this reward in a fresh "
        "process (a new kernel)")


def test_a_file_beside_a_standard_library_name_is_not_refused(root):
    folder = root / "c"
    folder.mkdir()
    (folder / "json.py").write_text("X = 1\n")  # import json gets the standard library's, as before
    (folder / "r.py").write_text("import json\n\ndef score(prompts, completions, **kwargs):\n"
                                 "    return [float(len(json.dumps(c))) for c in completions]\n")
    assert get_reward(f"{folder / 'r.py'}:score") is not None
