"""``ProbeResult.batch(k)`` and ``ProbeResult.advantages(reward)`` refuse arguments of the wrong type, and a batch a
probe does not have is named against the batches it has (a probe of one batch has no ``batch_K/`` folder)."""

import re

import pytest

import gradprobe
from gradprobe.api.probe_result import ProbeFileError
from test_probe_result_write_safety import _probe_folder


@pytest.mark.parametrize("k", ["1", True, 1.0, None])
def test_batch_number_of_another_type_is_refused(tmp_path, k):
    result = gradprobe.load_probe(_probe_folder(tmp_path / "p", batches=2))
    with pytest.raises(TypeError, match=re.escape(f"batch(k): k must be an integer batch number (0, 1, ...), "
                                                  f"got {k!r}")):
        result.batch(k)


@pytest.mark.parametrize("k", [0, 1, -1])
def test_a_probe_of_one_batch_says_it_has_no_batch_folders(tmp_path, k):
    folder = _probe_folder(tmp_path / "p")
    with pytest.raises(ProbeFileError) as e:
        gradprobe.load_probe(folder).batch(k)
    assert str(e.value) == (
        f"{folder / f'batch_{k}' / 'probe.json'} not found: this probe has no batch_K/ folders (one probe batch: "
        "this result's own files are that batch; `gradprobe probe --probe-batches N` with N > 1 writes one folder "
        "per batch)")


@pytest.mark.parametrize("k", [2, -1])
def test_a_batch_beyond_the_probe_names_its_batches(tmp_path, k):
    folder = _probe_folder(tmp_path / "p", batches=2)
    result = gradprobe.load_probe(folder)
    assert result.batch(1).rewards == ["outcome"]
    with pytest.raises(ProbeFileError) as e:
        result.batch(k)
    assert str(e.value) == (f"{folder / f'batch_{k}' / 'probe.json'} not found: this probe's batches are 0, 1 "
                            "(.batch(k) reads batch_k/)")


@pytest.mark.parametrize("reward", [3, None, ["outcome"]])
def test_advantages_of_a_reward_that_is_no_name_is_refused(tmp_path, reward):
    result = gradprobe.load_probe(_probe_folder(tmp_path / "p"))
    assert result.advantages("outcome").shape == (2, 3)
    with pytest.raises(TypeError, match=re.escape(f"advantages(reward): reward must be a probed reward's name, one "
                                                  f"of outcome; got {reward!r}")):
        result.advantages(reward)
