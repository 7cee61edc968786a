"""A study records which code each plug-in reward runs (study.json reward_plugins) and refuses, before any run, to
train the rest of an arm with an edited reward file: a trial user's arm averaged two versions of its reward over its
seeds (a seed without a checkpoint started afresh with the new code; a run's own record only guards a resume)."""

import json
import shutil
import sys

import pytest

from gradprobe.study.folder import StudyError
from gradprobe.study.runner import run_study

from helpers_training import tiny_plan
from plugin_helpers import forget_modules

V1 = "def fn(prompts, completions, **kwargs):\n    return [float(len(c) % 2) for c in completions]\n"
V2 = "def fn(prompts, completions, **kwargs):\n    return [float(len(c) % 3) for c in completions]\n"


@pytest.fixture(autouse=True)
def _modules_forgotten(tmp_path, monkeypatch):
    """sys.path restored and the modules imported from ``tmp_path`` (a reward's ``helper.py``) forgotten after each
    test, as a new process would not know them: a later test's own ``helper.py`` would get this one's."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    forget_modules(tmp_path)


def _forget(spec, folder):
    from gradprobe.rewards import REWARDS
    from gradprobe.rewards import plugin

    REWARDS.pop(spec, None)
    for origin in [o for o, name in plugin._ORIGINS.items() if name == spec]:
        del plugin._ORIGINS[origin]
    getattr(plugin, "_IDENTITIES", {}).pop(spec, None)
    for name in [k for k, m in sys.modules.items() if k.startswith("gradprobe_user_rewards.")
                 and str(getattr(m, "__file__", "")).startswith(str(folder))]:  # as a new process would not know it
        del sys.modules[name]


def test_an_edited_reward_is_refused_while_runs_of_it_remain(tmp_path):
    rw = tmp_path / "rw.py"
    rw.write_text(V1)
    spec = f"{rw}:fn"
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tiny_plan(arm="plug", reward=spec, seeds=[0, 1]))
    out = tmp_path / "study"
    res = run_study(plan_path, out, executor="inline", probe=False, analyze=False)
    assert res.ok, res.summary()
    recorded = json.loads((out / "study.json").read_text())["reward_plugins"]
    import hashlib

    assert recorded == {spec: {"file": str(rw.resolve()), "sha256": hashlib.sha256(V1.encode()).hexdigest(),
                               "modules": {}}}
    shutil.rmtree(out / "runs" / "plug" / "seed1")  # seed 1 still to train
    rw.write_text(V2)
    _forget(spec, tmp_path)
    with pytest.raises(StudyError) as e:
        run_study(plan_path, out, executor="inline", probe=False, analyze=False)
    v1, v2 = (hashlib.sha256(v.encode()).hexdigest()[:12] for v in (V1, V2))
    assert str(e.value) == (
        f"{out}: reward {spec!r} now runs {rw.resolve()} (sha256 {v2}), not the code the study's runs started with "
        f"({rw.resolve()}, sha256 {v1}, {out / 'study.json'} reward_plugins): its remaining runs would train another "
        "reward than its finished ones; restore the reward file as it was (or run from the directory the study "
        "started in), or run the plan as a new study under a new --out")
    assert not (out / "runs" / "plug" / "seed1").exists()  # nothing was run
    rw.write_text(V1)  # the fix: the file as it was
    _forget(spec, tmp_path)
    assert run_study(plan_path, out, executor="inline", probe=False, analyze=False).ok
    assert (out / "runs" / "plug" / "seed1" / "summary.json").is_file()


def test_reuse_runs_refuses_runs_trained_with_other_reward_code(tmp_path):
    """--reuse-runs copied a run trained with an edited reward file into a study whose other runs and probe ran the
    new code (a trial user's arm mixed the two); a helper module's edit counts too; the same code is reused."""
    import hashlib

    rw = tmp_path / "rw.py"
    rw.write_text("from helper import K\n" + V1.replace("% 2", "% K"))
    helper = tmp_path / "helper.py"
    helper.write_text("K = 2\n")
    spec = f"{rw}:fn"
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tiny_plan(arm="plug", reward=spec, seeds=[0]))
    assert run_study(plan_path, tmp_path / "A", executor="inline", probe=False, analyze=False).ok

    def second(name):
        _forget(spec, tmp_path)
        said = []
        assert run_study(plan_path, tmp_path / name, executor="inline", probe=False, analyze=False,
                         reuse_from=[tmp_path / "A"], say=said.append).ok
        return next(s for s in said if s.startswith("--reuse-runs"))

    assert "reused 1 finished run(s)" in second("same")
    old = hashlib.sha256(rw.read_bytes()).hexdigest()[:12]
    rw.write_text(rw.read_text().replace("% K", "% (K + 1)"))
    new = hashlib.sha256(rw.read_bytes()).hexdigest()[:12]
    assert second("edited") == (
        f"--reuse-runs {tmp_path / 'A'}: reused 0 finished run(s) with this plan's configuration; not reused: plug "
        f"seed 0 (trained with other reward code: {rw.resolve()} sha256 {old} then, {rw.resolve()} sha256 {new} now)")
    rw.write_text(rw.read_text().replace("% (K + 1)", "% K"))
    helper.write_text("K = 3\n")
    line = second("helper")
    assert "reused 0 finished run(s)" in line and "(trained with other reward code: reward " in line
    assert f"imports the helper module {tmp_path / 'helper.py'}, which was edited" in line
