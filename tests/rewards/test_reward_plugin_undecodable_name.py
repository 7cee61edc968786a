"""A reward plug-in file or module whose name holds a byte that is not UTF-8 (``r\\xff.py``: valid on Linux, which
names files by bytes; ``os.fsdecode`` gives the lone surrogate ``\\udcff``): the file form crashed with
``'utf-8' codec can't encode character '\\udcff'`` before the file was read (the module name hashed the path as
UTF-8). It is now loaded, and the errors naming such a file or module show the byte escaped (``\\udcff``, as the
spec's ``repr`` does), so the message itself can be encoded as UTF-8 (a log file, a study's failure record)."""

from __future__ import annotations

import os
import sys

import pytest
from plugin_helpers import UNDECODABLE_NAMES, plugin_records_restored
from plugin_helpers import undecodable_file as _file

from gradprobe.rewards import UnknownRewardError, get_reward
from gradprobe.rewards.plugin import plugin_identity

pytestmark = UNDECODABLE_NAMES

NATIVE = "def reward(batch, ctx):\n    return 'native'\n"
TRL = "def reward(prompts, completions, **kwargs):\n    return [float(len(c) < 5) for c in completions]\n"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A fresh working directory; the reward registry, sys.path and the modules imported from it restored after."""
    monkeypatch.chdir(tmp_path)
    with plugin_records_restored(monkeypatch, tmp_path):
        yield tmp_path


@pytest.mark.parametrize("absolute", [False, True])
def test_a_file_named_with_an_undecodable_byte_loads(folder, absolute):
    name = _file(folder, b"r\xff.py", NATIVE)
    assert name == "r\udcff.py"
    spec = f"{folder}/{name}:reward" if absolute else f"{name}:reward"
    reward = get_reward(spec)
    assert reward.__name__ == "reward"
    assert reward.__wrapped__(None, None) == "native"  # the file's own function, read from the file
    identity = plugin_identity(spec)
    assert identity["file"] == os.path.join(os.path.realpath(folder), "r\udcff.py")
    assert os.fsencode(identity["file"]) == os.path.join(os.fsencode(os.path.realpath(folder)), b"r\xff.py")
    assert len(identity["sha256"]) == 64 and identity["modules"] == {}
    module = sys.modules[reward.__wrapped__.__module__]
    assert module.__name__.startswith("gradprobe_user_rewards.r\\udcff_")  # escaped: UTF-8 can encode the name
    module.__name__.encode("utf-8")


def test_a_trl_style_reward_in_such_a_file_is_wrapped(folder):
    name = _file(folder, b"t\xff.py", TRL)
    reward = get_reward(f"{name}:reward")
    assert reward.__name__ != "reward"  # wrapped by sequence_reward (a TRL-style function)
    [module] = [m for m in list(sys.modules.values())
                if getattr(m, "__file__", None) == os.path.join(os.path.realpath(folder), name)]
    assert module.reward(prompts=["p", "p"], completions=["ab", "abcdef"]) == [1.0, 0.0]


def test_an_import_error_in_such_a_file_names_it_escaped(folder):
    name = _file(folder, b"bad\xff.py", "1 / 0\n")
    with pytest.raises(UnknownRewardError) as e:
        get_reward(f"{name}:reward")
    path = os.path.join(os.path.realpath(folder), "bad\\udcff.py")
    assert str(e.value) == (f"reward 'bad\\udcff.py:reward': importing {path} raised ZeroDivisionError: "
                            "division by zero")
    str(e.value).encode("utf-8")  # no lone surrogate left in the message


def test_a_missing_file_or_module_with_such_a_name_is_named_escaped(folder):
    with pytest.raises(UnknownRewardError) as e:
        get_reward(os.fsdecode(b"gone\xff.py:reward"))
    assert str(e.value).startswith("reward 'gone\\udcff.py:reward': no file gone\\udcff.py (from ")
    str(e.value).encode("utf-8")
    name = _file(folder, b"m\xff.py", NATIVE)
    module = name[:-len(".py")]
    assert get_reward(f"{module}:reward").__wrapped__(None, None) == "native"  # MODULE:FUNCTION form loads
    with pytest.raises(UnknownRewardError) as e:
        get_reward(f"{module}:absent")
    assert str(e.value) == "reward 'm\\udcff:absent': m\\udcff has no 'absent'; its functions: reward"
    str(e.value).encode("utf-8")
