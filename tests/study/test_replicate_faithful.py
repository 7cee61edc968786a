"""gradprobe study --replicate of a study that is not plain grpo: a plug-in reward file or a task data file edited
since the source study ran is refused (a replicate changes only the seeds and the held-out set), before anything is
written into --out or any run starts; unchanged code and data are replicated."""

from __future__ import annotations

import hashlib
import json

import pytest
from plugin_helpers import forget_reward, plugin_records_restored
from study_helpers import make_study, toy_plan

import gradprobe.study.replicate as replicate
from gradprobe.cli import main

HELPER = "K = 1.0\n"
REWARD = "from rwhelp import K\n\n\ndef f(prompts, completions, **kw):\n    return [K for _ in completions]\n"
ARMS = ('[arms.grpo]\nreward = "outcome"\n[arms.mine]\nreward = "rw.py:f"\nlr_scale = 2.0\n'
        '[arms.half]\nreward = "outcome"\nselection = "half"\n')


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(autouse=True)
def _plugins_forgotten(tmp_path, monkeypatch):
    """Each test's ``rw.py:f`` is loaded anew (as a new process would) and forgotten after."""
    with plugin_records_restored(monkeypatch, tmp_path):
        yield


def _rows(k: int) -> str:
    """40 JSONL rows ``{prompt: "i+k=", answer: "i+k"}``: a task's data file (``k`` tells two contents apart)."""
    return "".join(json.dumps({"prompt": f"{i}+{k}=", "answer": str(i + k)}) + "\n" for i in range(40))


def _source(tmp_path, monkeypatch, *, task: str | None = None):
    """A finished hand-made study ``src`` in ``tmp_path`` (the working directory) whose arms use the plug-in reward
    ``rw.py:f`` (lr_scale 2) and prompt selection, its study.json recording the reward's code (and ``task``'s data)
    as the study recorded them when it started; ``run_study`` replaced by a stub recording its calls."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rw.py").write_text(REWARD)
    (tmp_path / "rwhelp.py").write_text(HELPER)
    plan = toy_plan("faithful", seeds=(0, 1), arms=ARMS)
    study = {"reward_plugins": {"rw.py:f": {"file": str(tmp_path / "rw.py"), "sha256": _sha(REWARD),
                                "modules": {"rwhelp.py": _sha(HELPER)}}}}
    if task is not None:
        (tmp_path / "data.jsonl").write_text(_rows(1))
        plan = plan.replace('name = "chain_sum"', f'name = "{task}"')
        study["task_data"] = {task: {"file": str(tmp_path / "data.jsonl"),
                                     "sha256": _sha((tmp_path / "data.jsonl").read_text())}}
    src = make_study(tmp_path / "src", seeds=2, items=False, plan=plan)
    record = json.loads((src / "study.json").read_text())
    (src / "study.json").write_text(json.dumps({**record, **study}))
    calls = []
    monkeypatch.setattr(replicate, "run_study", lambda *a, **k: calls.append(a) or pytest.fail("run_study ran"))
    return src, calls


def _replicate(src, out) -> int:
    return main(["study", "--replicate", str(src), "--out", str(out), "--executor", "inline", "--no-probe",
                 "--no-analysis"])


class _Ran(Exception):
    """Raised by the stub of ``run_study`` once it has read the replicate's plan."""


def _replicated_plan(monkeypatch, src, out) -> str:
    """The plan text ``--replicate src --out out`` hands to ``run_study`` (stopped there: no run starts)."""
    seen = []

    def ran(plan_path, *args, **kwargs):
        seen.append(plan_path.read_text())
        raise _Ran

    monkeypatch.setattr(replicate, "run_study", ran)
    with pytest.raises(_Ran):
        _replicate(src, out)
    return seen[0]


def test_replicate_refuses_an_edited_plug_in_reward_and_runs_it_restored(tmp_path, monkeypatch, capsys):
    src, calls = _source(tmp_path, monkeypatch)
    edited = REWARD.replace("K for", "0.0 for")
    (tmp_path / "rw.py").write_text(edited)  # edited after the source study ran
    assert _replicate(src, tmp_path / "rep") == 2
    err = capsys.readouterr().err
    assert "reward 'rw.py:f' now runs" in err and "not the code the study" in err
    assert _sha(REWARD)[:12] in err and _sha(edited)[:12] in err
    assert "reward_plugins" in err and "as a new study" in err
    assert calls == [] and not (tmp_path / "rep").exists()  # nothing written, nothing run

    (tmp_path / "rw.py").write_text(REWARD)  # restored: a new process replicates the same arms on fresh seeds
    forget_reward("rw.py:f", tmp_path)

    calls.append(_replicated_plan(monkeypatch, src, tmp_path / "rep"))
    assert 'reward = "rw.py:f"\nlr_scale = 2.0\n' in calls[0] and 'selection = "half"' in calls[0]
    assert "seeds = [2, 3]" in calls[0]
    record = json.loads((tmp_path / "rep" / "replicate_of.json").read_text())
    assert record["source"] == "../src" and record["seeds"] == [2, 3]


def test_replicate_refuses_edited_task_data(tmp_path, monkeypatch, capsys):
    src, calls = _source(tmp_path, monkeypatch, task="jsonl:data.jsonl")
    (tmp_path / "data.jsonl").write_text(_rows(2))
    assert _replicate(src, tmp_path / "rep") == 2
    err = capsys.readouterr().err
    assert "data.jsonl" in err and "its content differs" in err and "task_data" in err
    assert calls == [] and not (tmp_path / "rep").exists()


def test_replicate_refuses_an_edited_helper_module(tmp_path, monkeypatch, capsys):
    src, calls = _source(tmp_path, monkeypatch)
    (tmp_path / "rwhelp.py").write_text("K = 0.0\n")  # the reward's helper module, edited after the study ran
    assert _replicate(src, tmp_path / "rep") == 2
    err = capsys.readouterr().err
    assert "helper module" in err and "rwhelp.py" in err and _sha(HELPER)[:12] in err and "as a new study" in err
    assert calls == [] and not (tmp_path / "rep").exists()


def test_replicate_refuses_a_source_whose_plan_was_edited_after_its_runs(tmp_path, monkeypatch, capsys):
    src, calls = _source(tmp_path, monkeypatch)
    record = json.loads((src / "study.json").read_text())
    frozen = (src / "plan.toml").read_text()
    (src / "study.json").write_text(json.dumps({**record, "plan_sha256": _sha(frozen)}))
    (src / "plan.toml").write_text(frozen + '[arms.added]\nreward = "outcome"\nlr_scale = 0.5\n')  # after the runs
    assert _replicate(src, tmp_path / "rep") == 2
    err = capsys.readouterr().err
    assert "--replicate:" in err and "was edited after the study froze it" in err and _sha(frozen)[:12] in err
    assert calls == [] and not (tmp_path / "rep").exists()


def test_replicate_says_when_the_held_out_set_is_the_originals(tmp_path, monkeypatch, capsys):
    """A data folder whose whole test.jsonl is the held-out set: the new data seed draws the same items, so the
    replicate's plan and its note say it evaluates on the original's held-out items, not a fresh set."""
    src, calls = _source(tmp_path, monkeypatch)
    (tmp_path / "dset").mkdir()
    (tmp_path / "dset" / "train.jsonl").write_text(_rows(1))
    (tmp_path / "dset" / "test.jsonl").write_text(  # 4 rows: the plan's [heldout] prompts, so all of them
        "".join(json.dumps({"prompt": f"{i}*3=", "answer": str(3 * i)}) + "\n" for i in range(4)))
    text = (src / "plan.toml").read_text().replace('name = "chain_sum"', 'name = "jsonl:dset"')
    (src / "plan.toml").write_text(text)

    calls.append(_replicated_plan(monkeypatch, src, tmp_path / "rep"))
    assert "the original's held-out set (the task's held-out items do not depend on the data seed" in calls[0]
    assert "a fresh held-out set" not in calls[0]
    assert "evaluates on the original's held-out items: only its training seeds are fresh" in capsys.readouterr().err


def test_a_replicate_replicated_again_keeps_one_header_naming_its_seeds():
    """The header of the replicate replicated named the seeds of the first replicate; the new plan keeps one header,
    its own, and the rest of the plan as it was."""
    plan = toy_plan("twice", seeds=(0, 1), arms=ARMS)
    first = replicate.replicate_plan_text(plan, seeds=(2, 3), heldout_seed=2, source="a", source_sha256="s1")
    second = replicate.replicate_plan_text(first, seeds=(4, 5), heldout_seed=4, source="b", source_sha256="s2")
    assert second.count("# Replicate of") == 1 and "[2, 3]" not in second
    assert second.startswith("# Replicate of the study in b (plan sha256 s2)") and "# [4, 5] and a fresh" in second
    assert second.split("--replicate.\n", 1)[1] == first.split("--replicate.\n", 1)[1].replace(
        "seeds = [2, 3]", "seeds = [4, 5]").replace("seed = 2", "seed = 4")


def _killed_replicate(tmp_path, monkeypatch):
    """A finished source study and its replicate in ``rep``, killed once its plan was frozen (before any run)."""
    import gradprobe.study.orchestrator as orchestrator

    src, _ = _source(tmp_path, monkeypatch)
    monkeypatch.setattr(replicate, "run_study", orchestrator.run_study)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(orchestrator, "_run", stopped)
    assert _replicate("src", "rep") == 130  # named from the working directory, tmp_path
    monkeypatch.setattr(orchestrator, "_run", _stub_run)
    return src, tmp_path / "rep"


def _stub_run(*args, **kwargs):
    raise _Ran


def test_a_killed_replicate_resumes_with_the_source_named_another_way(tmp_path, monkeypatch):
    """The replicate's plan names its source in a header comment, so an absolute path (or another working directory)
    wrote another plan and the resume was refused as a changed plan, naming a deleted temporary file."""
    src, rep = _killed_replicate(tmp_path, monkeypatch)
    frozen = (rep / "plan.toml").read_bytes()
    with pytest.raises(_Ran):  # past the frozen plan's check: the runs would start
        _replicate(f"{src.resolve()}/", rep.resolve())
    assert (rep / "plan.toml").read_bytes() == frozen


def test_a_replicate_on_other_seeds_into_its_folder_is_refused_and_its_record_kept(tmp_path, monkeypatch, capsys):
    """The refused replicate rewrote replicate_of.json with its seeds (5, 6) over the frozen replicate's (2, 3)."""
    src, rep = _killed_replicate(tmp_path, monkeypatch)
    record = (rep / "replicate_of.json").read_text()
    capsys.readouterr()
    assert main(["study", "--replicate", str(src), "--out", str(rep), "--seed-offset", "5", "--executor", "inline",
                 "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert "holds the replicate of" in err and "on seeds [2, 3]" in err and "not this one on seeds [5, 6]" in err
    assert "resume it with --seed-offset 2" in err and "nothing was written" in err
    assert (rep / "replicate_of.json").read_text() == record
