"""A cache build whose warmstart.json is a folder is damaged: ``tier_path`` skips it for the shipped copy and says so,
naming it and the fix (a breaker found it skipped without a word)."""

from __future__ import annotations

import warnings

import pytest

from gradprobe import tiers


def test_a_cache_build_with_a_record_folder_is_skipped_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    shipped = tiers.tier_path("tiny")
    assert shipped.parent == tiers.shipped_root()  # nothing in the cache yet: the shipped build
    damaged = tiers.cache_root() / shipped.name
    (damaged / "warmstart.json").mkdir(parents=True)
    with pytest.warns(UserWarning) as caught:
        assert tiers.tier_path("tiny") == shipped
    assert [str(w.message) for w in caught] == [
        f"the cache build {damaged} is damaged ({damaged / 'warmstart.json'} is a folder, not the build's record "
        f"file), so it is skipped; delete {damaged} (or rebuild it: `gradprobe warmstart --tier tiny --force`)"]


def test_an_unfinished_cache_build_is_skipped_without_a_word(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    shipped = tiers.tier_path("tiny")
    (tiers.cache_root() / shipped.name).mkdir(parents=True)  # no warmstart.json yet: a build still running
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tiers.tier_path("tiny") == shipped
