"""The fix named when loading a damaged tier built with another recipe than its tier's default one.

``build_tier(name, config=TinyTierConfig(...))`` builds any recipe, but ``gradprobe warmstart --tier NAME`` only the
default one of its tier: the ``gradprobe warmstart --tier tiny --out FOLDER --force`` that loading named replaced such
a folder with the default model (another shape, 2500 steps), and in the cache built another folder, leaving the
damaged one as it was. The message now gives the ``build_tier`` call of the recorded recipe, which rebuilds it.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from gradprobe.models import TierDamagedError, load_policy
from gradprobe.tiers import TinyTierConfig, cache_root, config_hash

from helpers_warmstart import SHIPPED

#: A recipe of the shipped tier's shape, cheap to build (seconds).
CHEAP = {"steps": 2, "batch_size": 2, "micro_batch_size": 2, "eval_prompts": 2, "eval_samples": 1,
         "eval_max_new_tokens": 8, "threads": 1}
CALL = ("build_tier('tiny', seed=0, config=TinyTierConfig(steps=2, batch_size=2, micro_batch_size=2, eval_prompts=2, "
        "eval_samples=1, eval_max_new_tokens=8, threads=1), ")


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _custom_damaged_copy(folder):
    """Copy the shipped tier to ``folder``, record ``CHEAP`` as its recipe and damage its config.json."""
    shutil.copytree(SHIPPED, folder)
    record = json.loads((folder / "warmstart.json").read_text())
    record["config"].update(CHEAP)
    (folder / "warmstart.json").write_text(json.dumps(record))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 2}))
    return folder


def test_a_damaged_build_of_another_recipe_names_the_build_tier_call_that_rebuilds_it(tmp_path):
    folder = _custom_damaged_copy(tmp_path / "mytier")
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(folder))
    message = str(err.value)
    assert message == (
        f"the tier in {folder} is damaged: {folder / 'config.json'} is damaged (num_hidden_layers is 2, the build's "
        f"recipe gives 4); force=True replaces the whole folder, so first copy elsewhere what you keep in {folder} "
        "(any file of yours in it is lost); rebuild it with Python, as its recipe is not the default tiny recipe, the "
        "only one `gradprobe warmstart` builds: `from gradprobe.tiers import TinyTierConfig; from gradprobe.warmstart "
        f"import build_tier; {CALL}out={str(folder)!r}, force=True)`")
    exec(re.findall(r"`([^`]*)`", message)[-1], {})  # the call named rebuilds that recipe there
    record = json.loads((folder / "warmstart.json").read_text())
    assert TinyTierConfig(**record["config"]) == TinyTierConfig(**CHEAP)
    assert load_policy(str(folder)).model.config.num_hidden_layers == 4


def test_a_damaged_cache_build_of_another_recipe_names_the_call_without_out(tmp_path):
    folder = _custom_damaged_copy(cache_root() / f"tiny-{config_hash(TinyTierConfig(**CHEAP), 0)}")
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(folder))
    assert str(err.value).endswith(f"; rebuild it with Python, as its recipe is not the default tiny recipe, the only "
                                   "one `gradprobe warmstart` builds: `from gradprobe.tiers import TinyTierConfig; "
                                   f"from gradprobe.warmstart import build_tier; {CALL}force=True)`")
