"""Wrong types and damaged files at the public API's boundary (FINDINGS 10, 12, 18 and the last bullet of 21).

- 10: :meth:`ProbeResult.write` refuses, before writing anything, a probe whose ``alignment.safetensors`` or
  ``tokens.jsonl`` is missing beside the other or damaged; ``.alignment``, ``.advantages()`` and ``.tokens()`` name
  the damaged file and the fix instead of a bare SafetensorError / JSONDecodeError.
- 12: :func:`gradprobe.sample_outcomes` loads a task spec string, and refuses a ``sampling`` that is no
  SamplingConfig (a dict of its fields is read as one), a non-integer ``samples`` and a negative ``seed``.
- 18: every other public entry point named in the finding refuses a wrong type with a TypeError or ValueError naming
  the argument (``name must be ..., got VALUE (TYPE)``).
- 21: :func:`gradprobe.load_study` on a study whose ``probe/probe.json`` is damaged raises (as its docstring says) with
  the fix for a study's probe: delete it and resume the study, not ``gradprobe probe``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import gradprobe
from gradprobe.api.probe_result import ProbeFileError

from helpers_training import tiny_plan

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- 10: a probe folder's files

def _probe_folder(folder: Path) -> Path:
    """A one-batch probe folder as ``gradprobe probe --out`` writes it: N = 2 completions of T = 3 tokens."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    entry = {"name": "outcome", "inner_product": 0.5, "per_group": [0.25, 0.25], "predicted_gain_per_update": 0.005,
             "tokens_per_update": 300, "predicted_gain_at_budget": 4.0}  # the fields gradprobe.load_probe needs
    (folder / "probe.json").write_text(json.dumps({"rewards": [entry], "config": {"model": "m"}}))
    mask = torch.tensor([[True, True, False], [True, True, True]])
    save_file({"alignment": torch.arange(6, dtype=torch.float32).reshape(2, 3) * mask,
               "completion_mask": mask, "advantages.outcome": torch.ones(2, 3, dtype=torch.float64) * mask},
              str(folder / "alignment.safetensors"))
    lines = [{"row": n, "prompt_id": "p", "score": 1.0, "truncated": False, "tokens": ["a"] * k, "texts": ["a"] * k,
              "alignment": [0.5] * k, "advantages": {"outcome": [1.0] * k}} for n, k in enumerate((2, 3))]
    (folder / "tokens.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def _truncate(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def test_intact_probe_folder_reads_and_copies(tmp_path):
    src = _probe_folder(tmp_path / "src")
    result = gradprobe.load_probe(src)
    assert tuple(result.alignment.shape) == (2, 3) and float(result.advantages("outcome").sum()) == 5.0
    assert len(result.tokens()) == 5
    out = result.write(tmp_path / "copy")
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "probe.json", "tokens.jsonl"]
    assert (out / "alignment.safetensors").read_bytes() == (src / "alignment.safetensors").read_bytes()


@pytest.mark.parametrize("missing, beside", [("alignment.safetensors", "tokens.jsonl"),
                                             ("tokens.jsonl", "alignment.safetensors")])
def test_write_refuses_a_probe_missing_one_batch_file(tmp_path, missing, beside):
    src = _probe_folder(tmp_path / "src")
    (src / missing).unlink()
    result = gradprobe.load_probe(src)
    with pytest.raises(ProbeFileError) as info:
        result.write(tmp_path / "copy")
    msg = str(info.value)
    assert f"{src / missing} is missing beside {beside}" in msg
    assert "nothing was written" in msg and f"re-run `gradprobe probe --out '{src}'`" in msg
    assert not (tmp_path / "copy").exists()


def _named_by_readers_and_refused_by_write(tmp_path, name: str, keep: int, why: str, reads) -> None:
    """``name`` cut to ``keep`` bytes: each of ``reads(result)`` and ``result.write`` name it as damaged (``why``)
    with the fix, and the copy is not made."""
    src = _probe_folder(tmp_path / "src")
    _truncate(src / name, keep)
    result = gradprobe.load_probe(src)
    for read in reads(result):
        with pytest.raises(ValueError) as info:
            read()
        msg = str(info.value)
        assert msg.startswith(f"{src / name} is damaged ({why}")
        assert f"re-run `gradprobe probe --out '{src}'`" in msg
    with pytest.raises(ValueError, match=re.escape(f"{src / name} is damaged ({why}")):
        result.write(tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_truncated_alignment_is_named_by_readers_and_refused_by_write(tmp_path):
    _named_by_readers_and_refused_by_write(
        tmp_path, "alignment.safetensors", 100, "SafetensorError: ",
        lambda r: (lambda: r.alignment, lambda: r.advantages("outcome"), lambda: r.completion_mask))


def test_truncated_tokens_are_named_by_tokens_and_refused_by_write(tmp_path):
    _named_by_readers_and_refused_by_write(tmp_path, "tokens.jsonl", 60, "line 1 is not valid JSON: ",
                                           lambda r: (r.tokens,))


def test_a_study_probe_damaged_file_gets_the_study_fix(tmp_path):
    study = tmp_path / "study"
    src = _probe_folder(study / "probe")
    (src / "arms.json").write_text("{}")
    _truncate(src / "alignment.safetensors", 100)
    with pytest.raises(ValueError) as info:  # a study without runs/ (shipped): resuming would train every run
        gradprobe.load_probe(src).alignment
    msg = str(info.value)
    assert f"({study} has no runs/: resuming it would train every run again): restore {src / 'probe.json'} from a " \
           "copy of the study" in msg
    (study / "runs").mkdir()  # a study with its run folders: resuming re-runs the probe only
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(src).alignment
    msg = str(info.value)
    assert f"delete {src / 'probe.json'} and resume the study with `gradprobe study '{study / 'plan.toml'}' " \
           f"--out '{study}'`" in msg
    assert "gradprobe probe --out" not in msg


# ----------------------------------------------------------------------------- 12: sample_outcomes

def test_sample_outcomes_loads_a_task_spec_string(tiny_policy):
    pool = gradprobe.load_task("chain_sum").problems("train", 2, seed=0)
    sampling = gradprobe.SamplingConfig(max_new_tokens=4)
    y = gradprobe.sample_outcomes(tiny_policy, "chain_sum", pool, samples=2, sampling=sampling)
    assert y.shape == (2, 2) and np.isfinite(y).all() and set(np.unique(y)) <= {0.0, 1.0}
    by_dict = gradprobe.sample_outcomes(tiny_policy, "chain_sum", pool, samples=2, sampling={"max_new_tokens": 4})
    assert by_dict.shape == (2, 2) and np.isfinite(by_dict).all()


@pytest.mark.parametrize("change, error, message", [
    ({"sampling": None}, TypeError, "sampling must be a SamplingConfig (gradprobe.SamplingConfig(...)) or a dict of "
                                    "its fields, got None (NoneType)"),
    ({"sampling": {"temperature": 1.0, "bogus": 2}}, TypeError, "sampling has an unknown field"),
    ({"samples": 2.5}, TypeError, "samples must be an integer, got 2.5 (float)"),
    ({"samples": "2"}, TypeError, "samples must be an integer, got '2' (str)"),
    ({"seed": -1}, ValueError, "seed must be >= 0, got -1"),
    ({"task": 3}, TypeError, "task must be a Task (gradprobe.load_task(...)) or a task spec string, got 3 (int)"),
    ({"problems": ["2 + 3 ="]}, TypeError, "problems must be a list of Problems"),
])
def test_sample_outcomes_checks_its_arguments_before_sampling(change, error, message):
    args = {"task": gradprobe.load_task("chain_sum"), "problems": gradprobe.load_task("chain_sum").problems(
        "train", 2, seed=0), "samples": 2, "sampling": gradprobe.SamplingConfig(max_new_tokens=4)}
    args.update(change)
    with pytest.raises(error) as info:  # policy None: the check must come before the policy is used
        gradprobe.sample_outcomes(None, args.pop("task"), args.pop("problems"), **args)
    assert message in str(info.value)


# ----------------------------------------------------------------------------- 18: wrong types at the boundary

@pytest.mark.parametrize("spec, shown", [(123, "123 (int)"), (None, "None (NoneType)"),
                                         (["chain_sum"], "['chain_sum'] (list)")])
def test_load_task_refuses_a_spec_that_is_no_string(spec, shown):
    with pytest.raises(TypeError, match=re.escape(f"spec must be a string (a task spec, e.g. 'chain_sum'), "
                                                  f"got {shown}")):
        gradprobe.load_task(spec)


@pytest.mark.parametrize("seed, error, shown", [(-1, ValueError, "-1 (int)"), (float("nan"), TypeError, "nan (float)"),
                                                ("1", TypeError, "'1' (str)")])
def test_task_problems_checks_the_seed(seed, error, shown):
    for task in (gradprobe.load_task("chain_sum"), gradprobe.load_task("chain_sum", fewshot=1)):
        with pytest.raises(error, match=re.escape(f"seed must be a non-negative integer, got {shown}")):
            task.problems("train", 3, seed=seed)
    assert len(gradprobe.load_task("chain_sum").problems("train", 3, seed=np.int64(2))) == 3


@pytest.mark.parametrize("args, message", [
    (("3", 3), "gold must be a string, got 3 (int); pass str(gold)"),
    (("3", None), "gold must be a string, got None (NoneType)"),
    ((3, "3"), "predicted must be a string or None, got 3 (int)"),
])
def test_answers_match_refuses_non_strings(args, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        gradprobe.answers_match(*args)
    assert gradprobe.answers_match("3", "3") and not gradprobe.answers_match(None, "3")


def test_extract_answer_refuses_a_non_string():
    with pytest.raises(TypeError, match=re.escape("text must be a string or None, got 123 (int)")):
        gradprobe.extract_answer(123)
    assert gradprobe.extract_answer("x\n#### 4") == "4" and gradprobe.extract_answer(None) is None


def test_register_reward_refuses_a_non_string_name_and_a_non_callable():
    with pytest.raises(TypeError, match=re.escape("name must be a string (use @register_reward(\"my_reward\")), got "
                                                  "123 (int)")):
        gradprobe.register_reward(123)
    with pytest.raises(TypeError, match=re.escape("register_reward('zz_not_a_function') decorates a function, got 3 "
                                                  "(int)")):
        gradprobe.register_reward("zz_not_a_function")(3)
    from gradprobe.rewards import REWARDS

    assert "zz_not_a_function" not in REWARDS


def test_sequence_reward_refuses_a_non_callable_when_wrapped():
    with pytest.raises(TypeError, match=re.escape("fn must be a callable reward function f(prompts, completions, "
                                                  "**columns), got 'notfn' (str)")):
        gradprobe.sequence_reward("notfn")
    with pytest.raises(TypeError, match=re.escape("name must be a string or None, got 3 (int)")):
        gradprobe.sequence_reward(lambda completions, **k: [0.0] * len(completions), name=3)


@pytest.mark.parametrize("field, value, message", [
    ("max_new_tokens", "64", "sampling.max_new_tokens must be an integer, got '64' (str)"),
    ("max_new_tokens", 2.5, "sampling.max_new_tokens must be an integer, got 2.5 (float)"),
    ("temperature", None, "sampling.temperature must be a number, got None (NoneType)"),
    ("batch_size", True, "sampling.batch_size must be an integer, got True (bool)"),
    ("backend", 3, "sampling.backend must be a string (one of hf, hf_paged, vllm), got 3 (int)"),
])
def test_sampling_config_refuses_wrong_types(field, value, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        gradprobe.SamplingConfig(**{field: value})
    assert gradprobe.SamplingConfig(max_new_tokens=64.0).max_new_tokens == 64  # a whole float is the integer
    assert type(gradprobe.SamplingConfig(max_new_tokens=64.0).max_new_tokens) is int


def test_probe_refuses_rewards_none_before_any_compute(monkeypatch):
    import gradprobe.probe.batches as batches

    monkeypatch.setattr(batches, "run_probe_batches", lambda *a, **k: pytest.fail("the probe's compute started"))
    with pytest.raises(TypeError, match=re.escape("rewards must be a list of rewards (names, functions or (name, "
                                                  "Reward) pairs) or a comma-separated string of names, got None "
                                                  "(NoneType)")):
        gradprobe.probe("tiny", rewards=None)


@pytest.mark.parametrize("load", ["load_probe", "load_study"])
def test_folder_readers_refuse_none(load):
    with pytest.raises(TypeError, match=re.escape("dir must be a path (str or os.PathLike), got None (NoneType)")):
        getattr(gradprobe, load)(None)


@pytest.mark.parametrize("value, shown", [(None, "None (NoneType)"), ({"name": "x"}, "{'name': 'x'} (dict)")])
def test_load_plan_refuses_a_non_path(value, shown):
    with pytest.raises(TypeError, match=re.escape(f"path must be a path (str or os.PathLike) of a plan TOML file, "
                                                  f"got {shown}")):
        gradprobe.load_plan(value)


def test_train_refuses_a_run_that_is_no_plan(tmp_path):
    with pytest.raises(TypeError, match=re.escape("run must be a RunConfig (plan.arm(name, seed)), a Plan "
                                                  "(gradprobe.load_plan(PATH)) or the path of a plan TOML file, got "
                                                  "{'name': 'x'} (dict)")):
        gradprobe.train({"name": "x"}, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_study_run_refuses_workers_that_are_no_integer(tmp_path, monkeypatch):
    import gradprobe.study.runner as runner

    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan())
    monkeypatch.setattr(runner, "run_study", lambda *a, **k: pytest.fail("the study started"))
    with pytest.raises(TypeError, match=re.escape("workers must be an integer or None, got '2' (str)")):
        gradprobe.Study(plan, tmp_path / "st").run(executor="local", workers="2")
    assert not (tmp_path / "st").exists()


# ----------------------------------------------------------------------------- 21: a study's damaged probe.json

@pytest.mark.parametrize("content, why", [("{\"rewards\": [", "is not valid JSON"),
                                          ("[1, 2]", "has no 'rewards' list")])
def test_load_study_names_the_study_fix_for_a_damaged_probe_json(tmp_path, content, why):
    study = tmp_path / "study_tiny"
    shutil.copytree(REPO / "data" / "study_tiny", study)
    probe_json = study / "probe" / "probe.json"
    probe_json.write_text(content)
    with pytest.raises(ValueError) as info:
        gradprobe.load_study(study)
    msg = str(info.value)
    assert msg.startswith(f"{probe_json} {why}")
    assert (f"this is the probe of a study without run folders ({study} has no runs/: resuming it would train every "
            f"run again): restore {probe_json} from a copy of the study") in msg  # a shipped study keeps no runs/
    assert "re-run `gradprobe probe`" not in msg
