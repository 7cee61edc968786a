"""``gradprobe.rank_prompts(progress=False)`` hides the progress bar, as ``gradprobe.probe(progress=False)`` does;
``no_progress=True`` (the old spelling) still works with a DeprecationWarning naming ``progress=False``."""

from __future__ import annotations

import warnings

import pytest

import gradprobe
import gradprobe.api.prompts as prompts


@pytest.fixture
def settings_given(monkeypatch):
    """The RankSettings rank_prompts hands to the work (nothing is computed)."""
    seen = []
    monkeypatch.setattr(prompts, "rank", lambda model, task, pool, *, out, settings, **identity:
                        seen.append(settings) or "table")
    return seen


@pytest.mark.parametrize("progress, hidden", [(False, True), (True, False)])
def test_progress_is_the_keyword(settings_given, progress, hidden):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, progress=progress, seed=3) == "table"
    assert settings_given[0].no_progress is hidden and settings_given[0].seed == 3


def test_the_default_shows_the_bar(settings_given):
    gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4)
    assert settings_given[0].no_progress is False


def test_no_progress_still_works_with_a_deprecation_warning(settings_given):
    with pytest.warns(DeprecationWarning) as record:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, no_progress=True)
    assert settings_given[0].no_progress is True
    assert len(record) == 1 and record[0].filename == __file__  # points at the caller's line
    assert str(record[0].message) == ("rank_prompts(no_progress=...) is deprecated: pass progress=False to hide the "
                                      "progress bar (as gradprobe.probe does); progress=True, the default, shows it")


@pytest.mark.parametrize("options, message", [
    ({"progress": False, "no_progress": True}, "rank_prompts got both progress= and no_progress=; pass progress= "
                                               "alone (progress=False hides the progress bar)"),
    ({"progress": 0}, "progress must be True or False, got 0"),
    ({"samples": 2}, "unknown rank_prompts setting 'samples'; valid: batch_size, data_seed, decay, device, dtype, "
                     "feature_batch_size, fit_prompts, max_new_tokens, metadata_keys, prior_strength, "
                     "probe_samples, progress, resamples, seed, skip_malformed, temperature"),
])
def test_bad_spellings_are_refused(settings_given, options, message):
    with pytest.raises(ValueError) as info:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, **options)
    assert str(info.value) == message and settings_given == []
