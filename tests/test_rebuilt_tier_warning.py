"""``--model tiny`` resolves to a build in the cache before the shipped one, and a rebuild under another transformers
release gives other weights (a trial user: ``gradprobe warmstart --tier tiny`` under transformers 5.25.0 built weights
that differ from the shipped 5.24.0 build's, and the probe's outcome alignment flipped sign), while the shipped curve
and calibration still applied without a word. Such a build is now warned of by name (:func:`warn_if_rebuilt_tier`).
"""

from __future__ import annotations

import json
import shutil
import warnings

import pytest

from gradprobe.models import RebuiltTierWarning, load_policy, warn_if_rebuilt_tier
from gradprobe.tiers import shipped_root, tier_path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    shipped = tier_path("tiny")
    assert shipped.parent == shipped_root()  # nothing in this test's cache yet
    copy = tmp_path / "cache" / "tiers" / shipped.name
    shutil.copytree(shipped, copy)
    return shipped, copy


def test_a_cached_copy_of_the_shipped_build_is_not_warned(cache):
    shipped, copy = cache
    assert tier_path("tiny") == copy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_rebuilt_tier("tiny", copy) is False
        assert warn_if_rebuilt_tier("tiny", shipped) is False


def test_a_rebuild_with_other_weights_is_warned_naming_both_builds(cache):
    shipped, copy = cache
    weights = bytearray((copy / "model.safetensors").read_bytes())
    weights[-1] ^= 1  # the last byte of the last tensor: other weights, still a loadable file
    (copy / "model.safetensors").write_bytes(bytes(weights))
    record = json.loads((copy / "warmstart.json").read_text())
    record["versions"]["transformers"] = "9.9.9"
    (copy / "warmstart.json").write_text(json.dumps(record))
    with pytest.warns(RebuiltTierWarning) as seen:
        policy = load_policy("tiny")
    msg = str(seen[0].message)
    assert msg.startswith(f"--model tiny is the build in the cache, {copy} (built with transformers 9.9.9, torch "), msg
    assert "whose weights differ from the shipped build's (transformers 5.24.0, torch" in msg, msg
    assert f"delete {copy} to use the shipped build, or pass a --reference-curve (and --calibration)" in msg, msg
    assert policy.name == "tiny"
