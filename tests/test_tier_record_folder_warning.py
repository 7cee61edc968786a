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
    monkeypatch.setattr(tiers, "_WARNED", set())
    with pytest.warns(UserWarning) as caught:
        assert tiers.tier_path("tiny") == shipped
        assert tiers.tier_path("tiny") == shipped  # said once: a command resolves the tier more than once
    record = damaged / "warmstart.json"
    assert [str(w.message) for w in caught] == [
        f"the cache build {damaged} is damaged ({record} is a folder, not the build's record file), so it is skipped; "
        f"delete {damaged} (the shipped build, if any, is used meanwhile), or remove {record} and rebuild it: "
        "`gradprobe warmstart --tier tiny --force`"]


def test_a_cache_build_whose_record_is_a_broken_link_is_skipped_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tiers, "_WARNED", set())
    shipped = tiers.tier_path("tiny")
    damaged = tiers.cache_root() / shipped.name
    damaged.mkdir(parents=True)
    (damaged / "warmstart.json").symlink_to(tmp_path / "gone.json")
    with pytest.warns(UserWarning, match="is a broken symbolic link, not the build's record file"):
        assert tiers.tier_path("tiny") == shipped


def test_an_unfinished_cache_build_is_skipped_without_a_word(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))
    shipped = tiers.tier_path("tiny")
    (tiers.cache_root() / shipped.name).mkdir(parents=True)  # no warmstart.json yet: a build still running
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tiers.tier_path("tiny") == shipped
