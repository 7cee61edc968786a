"""Three refusals of the probe that did not name the field or the fix:

- ``gradprobe probe --seed 18446744073709551616`` ran until numpy/torch said ``Overflow when unpacking long long``
  (``gradprobe.probe(seed=2**64)`` the same, after the model loaded), and the probe took ``--seed 2**63``, which
  ``gradprobe train`` refuses; both now refuse a seed outside [0, 2**63 - 1] as train does, before any compute.
- ``gradprobe.probe(bootstrap=50)`` listed the valid keywords without saying that ``--bootstrap`` is ``n_bootstrap``
  in Python; every option of the command whose keyword is another name now names it.
- :func:`gradprobe.load_probe` on a folder where a probe was killed before its ``probe.json`` (or one still running)
  said ``probe.json not found; pass a `gradprobe probe --out` folder``; it now says what is there and the command.
"""

from __future__ import annotations

import argparse
import inspect
import json

import pytest

import gradprobe
from gradprobe.api import probe as api_probe
from gradprobe.api.probe_result import ProbeFileError
from gradprobe.cli import main
from gradprobe.cli.probe import _add_probe
from gradprobe.layout import UNFINISHED_PROBE
from gradprobe.outputs import shell_word
from gradprobe.probe.output import replacing_earlier_probe
from gradprobe.probe_settings import STAGES, BatchSettings, setting_names

TINY = dict(prompts=4, group=4, heldout_prompts=4, heldout_group=4, continuations=1, n_bootstrap=50, progress=False)
RANGE = "must be in [0, 2**63 - 1] (it seeds numpy and torch), got"


@pytest.fixture
def no_compute(monkeypatch):
    """The probe's compute replaced by a failure: a check that comes too late shows as this error."""
    def started(*args, **kwargs):
        raise AssertionError("the probe's compute started")

    monkeypatch.setattr("gradprobe.probe.batches.run_probe_batches", started)


@pytest.mark.parametrize("seed", ["18446744073709551616", "9223372036854775808", "-1"])
def test_the_probe_command_refuses_a_seed_train_refuses_when_parsed(tmp_path, capsys, monkeypatch, seed):
    with pytest.raises(SystemExit) as e:
        main(["probe", "--seed", seed, "--out", str(tmp_path / "p")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"gradprobe probe: error: argument --seed: {RANGE} {seed}"
    with pytest.raises(SystemExit) as e:  # the same words as train's
        main(["train", "--plan", str(tmp_path / "no_plan.toml"), "--arm", "grpo", "--seed", seed, "--out",
              str(tmp_path / "t")])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"gradprobe train: error: argument --seed: {RANGE} {seed}"
    assert not (tmp_path / "p").exists()
    taken = []  # the largest seed is taken, as train takes it
    monkeypatch.setattr("gradprobe.cli.probe_main", lambda args: taken.append(args.seed) or 0)
    assert main(["probe", "--seed", str(2**63 - 1), "--no-progress"]) == 0
    assert taken == [2**63 - 1]


@pytest.mark.parametrize("settings, message", [
    ({"seed": 2**64}, "seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), got "
                      "18446744073709551616"),
    ({"seed": 2**63}, "seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), got "
                      "9223372036854775808"),
    ({"seed": -1}, "seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), got -1"),
    ({"seed": 1e20}, "seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), got 1e+20"),
    ({"seed": 10**100}, "seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; --seed), got "
                        "1000000000000000000000000000000000000000... (101 characters)"),
    ({"batch": {"seed": 2**64}}, "batch.seed must be an integer in [0, 2**63 - 1] (it seeds numpy and torch; "
                                 "--seed), got 18446744073709551616"),
], ids=["2**64", "2**63", "-1", "1e20", "10**100", "batch-dict"])
def test_the_probe_api_refuses_a_seed_out_of_range_before_compute(tmp_path, no_compute, settings, message):
    with pytest.raises(ValueError) as e:
        gradprobe.probe("tiny", rewards=["outcome"], out=tmp_path / "p", **{**TINY, **settings})
    assert str(e.value) == message
    assert not (tmp_path / "p").exists()
    with pytest.raises(AssertionError, match="the probe's compute started"):  # the largest seed is taken
        gradprobe.probe("tiny", rewards=["outcome"], out=tmp_path / "q", **{**TINY, "seed": 2**63 - 1})


@pytest.mark.parametrize("key, value, message", [
    ("bootstrap", 50, "bootstrap is no setting of gradprobe.probe (it is --bootstrap of the command line): pass "
                      "n_bootstrap=50, its name in Python"),
    ("generation_batch_size", 8, "generation_batch_size is no setting of gradprobe.probe (it is "
                                 "--generation-batch-size of the command line): pass batch_size=8, its name in Python"),
    ("no_progress", True, "no_progress is no setting of gradprobe.probe (it is --no-progress of the command line): "
                          "pass progress=False, its name in Python"),
    ("trl_config", "grpo.yaml", "trl_config is no setting of gradprobe.probe (it is --trl-config of the command "
                                "line): gradprobe.probe reads no TRL config file; pass the settings it maps as "
                                "keywords (loss_type, group, max_new_tokens, lr, temperature, top_p, seed, "
                                "precondition, update_prompts) and its scale_rewards as the outcome variant among "
                                "rewards (outcome, outcome_batch or outcome_dr)"),
])
def test_a_command_line_name_of_a_probe_keyword_names_the_keyword(tmp_path, no_compute, key, value, message):
    with pytest.raises(ValueError) as e:  # was "unknown probe setting(s) bootstrap; valid: ..."
        gradprobe.probe("tiny", rewards=["outcome"], out=tmp_path / "p", **{key: value})
    assert str(e.value) == message
    assert not (tmp_path / "p").exists()


def test_every_probe_option_is_a_keyword_or_names_its_python_way():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    _add_probe(sub)
    dests = {a.dest for a in sub.choices["probe"]._actions if a.option_strings and a.dest != "help"}
    keywords = {*setting_names(), *STAGES, *inspect.signature(api_probe.probe).parameters} - {"settings"}
    renamed, only = set(api_probe._PYTHON_NAMES), set(api_probe._COMMAND_LINE_ONLY)
    assert dests - keywords == renamed | only  # an option under another keyword is named, and only those
    assert not (renamed | only) & keywords
    assert {name for name, _ in api_probe._PYTHON_NAMES.values()} <= keywords


def _record(folder, files):
    folder.mkdir()
    (folder / UNFINISHED_PROBE).write_text(json.dumps({"probe_files": files, "probe_batch_folders": []}))


@pytest.mark.parametrize("files", [[], ["tokens.jsonl", "alignment.safetensors"]])
def test_load_probe_of_a_probe_killed_before_its_probe_json_says_so(tmp_path, files):
    folder = tmp_path / "p"
    _record(folder, files)
    for name in files:
        (folder / name).write_text("x")
    for given in (folder, folder / "probe.json"):
        with pytest.raises(ProbeFileError) as e:  # was "probe.json not found; pass a `gradprobe probe ..."
            gradprobe.load_probe(given)
        assert str(e.value) == (f"{folder / 'probe.json'} not found: {folder} holds what a probe killed before it "
                                f"wrote probe.json left (its {UNFINISHED_PROBE} is there), or a probe still running "
                                f"there; once none runs, run `gradprobe probe --out {shell_word(folder)}` again "
                                "(with the same settings), which replaces what it left")


def test_load_probe_of_a_killed_study_probe_gives_the_study_fix(tmp_path):
    from gradprobe.layout import study_probe_advice

    study = tmp_path / "S"
    (study / "runs").mkdir(parents=True)
    (study / "plan.toml").write_text("# plan\n")
    (study / "study.json").write_text("{}")
    _record(study / "probe", [])
    (study / "probe" / "arms.json").write_text("{}")
    with pytest.raises(ProbeFileError) as e:  # `gradprobe probe --out S/probe` refuses a study's probe folder
        gradprobe.load_probe(study / "probe")
    file = study / "probe" / "probe.json"
    assert str(e.value) == f"{file} not found; {study_probe_advice(study, file, missing=True)}"
    assert "resume the study with `gradprobe study" in str(e.value) and "gradprobe probe --out" not in str(e.value)


def test_load_probe_while_a_probe_writes_its_folder_says_so(tmp_path):
    folder = tmp_path / "run ning"
    with replacing_earlier_probe(folder, label="out"):  # the probe's record is written before its first file
        with pytest.raises(ProbeFileError) as e:
            gradprobe.load_probe(folder)
    assert str(e.value).endswith(f"or a probe still running there; once none runs, run `gradprobe probe --out "
                                 f"{shell_word(folder)}` again (with the same settings), which replaces what it left")
    with pytest.raises(ProbeFileError) as e:  # the record is gone with the block: no probe there now
        gradprobe.load_probe(folder)
    assert str(e.value) == (f"{folder / 'probe.json'} not found; pass a `gradprobe probe --out` folder (it holds "
                            "probe.json)")


@pytest.mark.parametrize("seed, shown", [(2**63, "9223372036854775808"), (-1, "-1"),
                                         (10**100, "an integer of about 101 digits"),
                                         (10**5000, "an integer of about 5001 digits")],
                         ids=["2**63", "-1", "10**100", "10**5000"])
def test_batch_settings_refuse_a_seed_out_of_range_on_every_path(seed, shown):
    # a TRL config's seed and a plan's [probe] reach the probe through BatchSettings, not through --seed's parser
    with pytest.raises(ValueError) as e:
        BatchSettings(seed=seed)
    assert str(e.value) == f"seed (--seed) must be in [0, 2**63 - 1] (it seeds numpy and torch), got {shown}"
    assert BatchSettings(seed=2**63 - 1).seed == 2**63 - 1


@pytest.mark.parametrize("way", ["batches", "checkpoints"])
def test_probe_batches_whose_last_seed_leaves_the_range_are_refused_before_compute(tmp_path, monkeypatch, way):
    from gradprobe.probe import batches, checkpoints
    from gradprobe.probe_settings import ProbeConfig

    def started(*args, **kwargs):
        raise AssertionError("the probe's compute started")

    monkeypatch.setattr("gradprobe.probe.run.run_probe", started)
    monkeypatch.setattr(batches, "load_policy", started)
    config = ProbeConfig.from_dict({"model": "tiny", "rewards": ["outcome"], "seed": 2**63 - 2})
    run = (lambda n: batches.run_probe_batches(config, batches=n, out=tmp_path / "p")) if way == "batches" else (
        lambda n: checkpoints.run_probe_checkpoints(config, [tmp_path / "none"], batches=n, out=tmp_path / "p"))
    with pytest.raises(ValueError) as e:
        run(3)
    assert str(e.value) == ("seed (--seed) 9223372036854775806 with 3 probe batches (--probe-batches): batch k is "
                            "sampled with seed + k, up to 9223372036854775808, above 2**63 - 1 (what numpy and "
                            "torch take); give a seed <= 9223372036854775805, or fewer batches")
    assert not (tmp_path / "p").exists()
    with pytest.raises((AssertionError, ValueError)) as e:  # two batches end at 2**63 - 1: past the seed check
        run(2)
    assert "probe batches (--probe-batches)" not in str(e.value)
