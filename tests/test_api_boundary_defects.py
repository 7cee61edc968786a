"""Bad input at the public API's boundary is refused up front, naming the argument (FINDINGS 6, 14, 16, 17, 19):
an empty ``out``, a model folder as ``out`` / ``ProbeResult.write``'s ``dir``, a file as ``train``'s ``out``, an unknown
``forecaster``, ``continuations=0``, a negative ``seed``, a ``reference_curve`` that is a ReferenceCurve object (used
as it is), another object (TypeError) or empty. Each check happens before any model loads or probe runs: those
entry points are replaced with stubs that fail the test when reached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gradprobe
from gradprobe.api.probe_result import ProbeResult
from gradprobe.outputs import OutputDirError

from helpers_training import tiny_plan

TINY = dict(prompts=4, group=4, heldout_prompts=4, heldout_group=4, continuations=1, n_bootstrap=50, progress=False)


class Reached(Exception):
    """A stubbed compute entry point was reached: the check under test came too late."""


@pytest.fixture
def no_compute(monkeypatch):
    """``run_probe_batches`` (the probe's compute) and the run's model loading fail the test when reached."""
    import gradprobe.probe.batches as batches
    import gradprobe.training.run as run

    def reached(*a, **k):
        raise Reached("the compute started before the bad input was refused")

    monkeypatch.setattr(batches, "run_probe_batches", reached)
    monkeypatch.setattr(run, "load_run_policy", reached)
    monkeypatch.setattr(run, "_open_session", reached)


@pytest.fixture
def model_folder(tmp_path) -> Path:
    """A ``save_pretrained``-like folder: a model's config.json (no run's "run" key) beside model.safetensors."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64}))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def plan_file(tmp_path) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(tiny_plan())
    return path


# ----------------------------------------------------------------------------- 14: an empty out

def test_probe_refuses_an_empty_out(tmp_path, monkeypatch, no_compute):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^out is empty \(''\): give a path \(out='\.' is the current folder\)$"):
        gradprobe.probe("tiny", rewards=["outcome"], out="", **TINY)
    assert list(tmp_path.iterdir()) == []


def test_probe_result_write_refuses_an_empty_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.json").write_text(json.dumps({"rewards": []}))
    with pytest.raises(ValueError, match=r"^dir is empty \(' '\): give a path"):
        ProbeResult({"rewards": []}, src).write(" ")
    assert _listing(tmp_path) == ["src"]


def test_study_refuses_an_empty_out(plan_file):
    with pytest.raises(ValueError, match=r"^out is empty \(''\): give a path"):
        gradprobe.Study(plan_file, "")


def test_train_refuses_an_empty_out(tmp_path, monkeypatch, plan_file, no_compute):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^out is empty \(''\): give a path"):
        gradprobe.train(plan_file, "", arm="grpo", updates=1)
    assert _listing(tmp_path) == ["plan.toml"]  # no .lock, no run file in the current folder


# ----------------------------------------------------------------------------- 6: a model folder as the probe's out

def test_probe_refuses_a_model_folder_before_any_compute(model_folder, no_compute):
    before = _listing(model_folder)
    with pytest.raises(OutputDirError, match=r"holds a model \(config\.json \+ model\.safetensors\), not a probe's "
                                             r"output; .*choose another out \("):
        gradprobe.probe("tiny", rewards=["outcome"], out=model_folder, **TINY)
    assert _listing(model_folder) == before


def test_probe_result_write_refuses_a_tier_folder(tmp_path):
    tier = tmp_path / "tier"
    tier.mkdir()
    for name in ("config.json", "model.safetensors", "warmstart.json"):
        (tier / name).write_text("{}")
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.json").write_text(json.dumps({"rewards": []}))
    with pytest.raises(OutputDirError, match=r"^dir '.*tier' holds a model \(warmstart\.json\), not a probe's output"):
        ProbeResult({"rewards": []}, src).write(tier)
    assert _listing(tier) == ["config.json", "model.safetensors", "warmstart.json"]
    out = ProbeResult({"rewards": []}, src).write(tmp_path / "fresh")  # a new folder is still written
    assert _listing(out) == ["probe.json"]


# ----------------------------------------------------------------------------- 16: forecaster

@pytest.mark.parametrize("bad", ["bogus", None, 3])
def test_probe_checks_the_forecaster_up_front(bad, no_compute):
    with pytest.raises(ValueError, match=r"^forecaster \(--forecaster\) .* must be one of auto, probe, cost_only, "
                                         r"signal_proxy$"):
        gradprobe.probe("tiny", rewards=["outcome"], forecaster=bad, **TINY)


# ----------------------------------------------------------------------------- 19: continuations, seed, a file

@pytest.mark.parametrize("key, flag", [("continuations", "--continuations"), ("max_steps", "--max-steps")])
def test_probe_checks_mc_settings_up_front(key, flag, no_compute):
    settings = {**TINY, key: 0}
    with pytest.raises(ValueError, match=rf"^{key} \({flag}\) must be >= 1 \(.*\), got 0$"):
        gradprobe.probe("tiny", rewards=["outcome"], **settings)


def test_train_checks_the_seed_before_loading_the_model(tmp_path, plan_file, no_compute):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"^seed must be an integer in \[0, 2\*\*63 - 1\] .*got -1$"):
        gradprobe.train(plan_file, out, arm="grpo", updates=1, seed=-1)
    assert not out.exists()


def test_train_says_a_file_is_not_a_folder(tmp_path, plan_file, no_compute):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    with pytest.raises(OutputDirError, match=r"'.*afile' is a file, not a folder; choose another out$"):
        gradprobe.train(plan_file, afile, arm="grpo", updates=1)
    assert afile.read_text() == "mine"


# ----------------------------------------------------------------------------- 17: reference_curve

def _curve():
    from gradprobe.forecast import ReferenceCurve

    return ReferenceCurve(updates=[0, 10, 20, 30, 40], accuracy=[50.0, 60, 62.0, 63, 64])


def test_probe_takes_a_reference_curve_object_as_it_is(tmp_path, monkeypatch):
    import gradprobe.api.probe as api

    seen = {}

    def capture(**kw):
        seen.update(kw)
        raise Reached

    monkeypatch.setattr(api, "_probe_into", capture)
    curve = _curve()
    with pytest.raises(Reached):
        gradprobe.probe("tiny", rewards=["outcome"], reference_curve=curve, out=tmp_path / "p", **TINY)
    assert seen["curve"] is curve
    assert seen["curve_spec"] == "ReferenceCurve(updates 0-40, 5 points, 1 seed, mode 'sigmoid')"
    json.dumps(seen["curve_spec"])  # recorded in probe.json


def test_reference_curve_repr_is_short():
    assert repr(_curve()) == "ReferenceCurve(updates 0-40, 5 points, 1 seed, mode 'sigmoid')"


@pytest.mark.parametrize("bad, kind", [({"updates": [0, 1]}, "dict"), (123, "int"), (0, "int")])
def test_probe_refuses_a_reference_curve_of_another_type(bad, kind, no_compute):
    with pytest.raises(TypeError, match=rf"^reference_curve must be a path, 'default' or a ReferenceCurve, got "
                                        rf"{kind}; build a curve"):
        gradprobe.probe("tiny", rewards=["outcome"], reference_curve=bad, **TINY)


def test_probe_refuses_an_empty_reference_curve(no_compute):
    with pytest.raises(ValueError, match=r"^reference_curve is empty \(''\): give a path or 'default'"):
        gradprobe.probe("tiny", rewards=["outcome"], reference_curve="", **TINY)


# ----------------------------------------------------------------------------- the same checks on the command line

@pytest.mark.parametrize("extra, message", [
    (["--continuations", "0"], "continuations (--continuations) must be >= 1 (K, Monte-Carlo continuations drawn "
                               "from every step boundary), got 0"),
    (["--reference-curve", ""], "--reference-curve is empty (''): give a path or 'default', or omit the flag for "
                                "the model's shipped curve (if any)"),
])
def test_gradprobe_probe_refuses_bad_settings_before_any_compute(tmp_path, capsys, no_compute, extra, message):
    from gradprobe.cli import main

    out = tmp_path / "p"
    assert main(["probe", "--no-progress", "--out", str(out), *extra]) == 2
    assert capsys.readouterr().err == f"gradprobe probe: error: {message}\n"
    assert not out.exists()


def test_gradprobe_probe_refuses_a_tier_folder_before_any_compute(tmp_path, capsys, no_compute):
    from gradprobe.cli import main

    tier = tmp_path / "tier"
    tier.mkdir()
    for name in ("config.json", "model.safetensors", "gradprobe_tier.json"):
        (tier / name).write_text("{}")
    assert main(["probe", "--no-progress", "--out", str(tier)]) == 2
    assert capsys.readouterr().err == (
        f"gradprobe probe: error: --out {str(tier)!r} holds a model (gradprobe_tier.json), not a probe's output; a "
        "probe there would mix its files into it: choose another --out (an empty folder, or an earlier probe's)\n")
    assert _listing(tier) == ["config.json", "gradprobe_tier.json", "model.safetensors"]


def test_two_function_rewards_of_one_name_are_refused(tmp_path):
    """Two closures both named ``score`` (one rewarding the answer, one penalising it) were kept in a dict by name:
    the first vanished from the probe without a word (a trial user's table held 'outcome' and one 'score')."""
    def make(sign):
        def score(prompts, completions, **columns):
            return [sign * float("3" in c) for c in completions]
        return score

    with pytest.raises(ValueError) as e:
        gradprobe.probe("tiny", rewards=["outcome", make(1), make(-1)], out=tmp_path / "x", **TINY)
    assert str(e.value) == ("rewards[1] and rewards[2] are both named 'score' (their __name__), so one would replace "
                            "the other: give each function its own name, or pass (name, sequence_reward(fn)) pairs "
                            "with distinct names")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("key, way", [("calibration", "calib.apply(calib.load('default' or PATH), result)"),
                                      ("initial_accuracy", "load_reference_curve(PATH, initial_accuracy=...)")])
def test_a_command_line_only_option_says_how_python_takes_it(tmp_path, key, way):
    """gradprobe.probe(calibration='default') said "unknown probe setting(s) calibration; valid: ..." without the
    way the API applies a calibration."""
    with pytest.raises(ValueError) as e:
        gradprobe.probe("tiny", rewards=["outcome"], out=tmp_path / "x", **{key: 0.5}, **TINY)
    assert str(e.value).startswith(f"{key} is no setting of gradprobe.probe (it is --{key.replace('_', '-')} of the "
                                   "command line): ") and str(e.value).endswith(way)
    assert not (tmp_path / "x").exists()
