"""A plug-in reward that raises during `gradprobe train` (update 3 of 4): one line with the reward's error, what a
rerun does with the folder's checkpoint, and that a fixed reward needs a new --out (a resume checks the reward file's
sha256); a trial user saw the error alone."""

import json

from gradprobe.cli import main

from helpers_training import tiny_plan

PLUGIN = '''
CALLS = []


def flaky(prompts, completions, **kwargs):
    CALLS.append(1)
    if len(CALLS) == 3:
        raise RuntimeError("the grader's service is down")
    return [float(len(c) % 2) for c in completions]
'''


def test_a_reward_raising_midway_says_what_a_rerun_does(tmp_path, capsys):
    (tmp_path / "rw.py").write_text(PLUGIN)
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(reward=f"{tmp_path / 'rw.py'}:flaky", budget={"updates": 4},
                              train={"checkpoint_every": 1}, eval={"sampled": False}))
    out = tmp_path / "run"
    assert main(["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    ckpt = json.loads((out / "checkpoint.json").read_text())
    assert ckpt["update"] == 2
    assert err.startswith("gradprobe train: error: reward ") and "the grader's service is down" in err
    assert err.endswith(f"; if the failure was transient (the reward's file unchanged), running the same command "
                        f"again resumes from {ckpt['checkpoint']} (update 2) in {out}; after fixing the reward, "
                        "start the run under a new --out (a resume with an edited reward file is refused: its first "
                        "updates were trained with the old one)")


def test_a_reward_raising_before_any_checkpoint_says_the_same_folder_takes_the_fixed_reward(tmp_path, capsys):
    """Was: "after fixing the reward, start the run under a new --out (a resume with an edited reward file is
    refused...)", though with no checkpoint the rerun starts from update 0 and takes the edited file."""
    (tmp_path / "rw.py").write_text(PLUGIN.replace("len(CALLS) == 3", "len(CALLS) == 1"))
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(reward=f"{tmp_path / 'rw.py'}:flaky", budget={"updates": 2},
                              train={"checkpoint_every": 1}, eval={"sampled": False}))
    out = tmp_path / "run"
    args = ["train", "--plan", str(plan), "--arm", "grpo", "--out", str(out), "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert not (out / "checkpoint.json").exists() and "the grader's service is down" in err
    assert err.endswith("; the run kept no checkpoint: after fixing the reward (or as it is, if the failure was "
                        "transient), running the same command again starts the run from update 0")
    (tmp_path / "rw.py").write_text(PLUGIN.replace("len(CALLS) == 3", "False"))  # fixed: the same --out trains
    assert main(args) == 0
    assert json.loads((out / "summary.json").read_text())["updates"] == 2
