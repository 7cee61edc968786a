"""``gradprobe.Study(...).run(executor="local")`` from a script without an ``if __name__ == "__main__":`` guard:
refused before anything runs, naming the script, the guard and ``executor="inline"`` (was: every spawned worker
re-ran the script and died, reported as "e.g. out of memory", then an AnalysisError on an empty runs.csv)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from gradprobe.api.study import unguarded_main_script

PLAN = """seeds = [0, 1]
[model]
name = "tiny-qwen2"
[task]
name = "chain_sum"
pool = 16
[train]
prompts_per_update = 2
group = 4
[budget]
updates = 1
[arms.grpo]
reward = "outcome"
"""


@pytest.mark.parametrize("text, refused", [
    ("import gradprobe\ngradprobe.Study('p.toml', 'out').run()\n", True),
    ("import gradprobe\nif __name__ == '__main__':\n    gradprobe.Study('p.toml', 'out').run()\n", False),
    ('if __name__=="__main__":\n    pass\n', False),
    ("if '__main__' == __name__:\n    pass\n", False),
    ("# __name__ is mentioned but never compared\nx = __name__\n", True),
])
def test_a_script_is_refused_only_without_the_guard(tmp_path, monkeypatch, text, refused):
    script = tmp_path / "job.py"
    script.write_text(text)
    main = types.ModuleType("__main__")
    main.__file__, main.__spec__ = str(script), None  # `python job.py`
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert unguarded_main_script() == (str(script) if refused else None)


def test_modules_packages_and_notebooks_are_not_re_run(tmp_path, monkeypatch):
    script = tmp_path / "job.py"
    script.write_text("x = 1\n")
    for spec_name, expected in (("job", str(script)), ("pkg.__main__", None), ("__main__", None)):
        main = types.ModuleType("__main__")
        main.__file__, main.__spec__ = str(script), types.SimpleNamespace(name=spec_name)  # `python -m ...`
        monkeypatch.setitem(sys.modules, "__main__", main)
        assert unguarded_main_script() == expected, spec_name
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # a notebook: no __file__
    assert unguarded_main_script() is None


def test_the_study_is_refused_before_it_runs(tmp_path):
    script, plan, out = tmp_path / "job.py", tmp_path / "plan.toml", tmp_path / "study"
    plan.write_text(PLAN)
    script.write_text(f"import gradprobe\ngradprobe.Study({str(plan)!r}, {str(out)!r}).run(executor='local', workers=2)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"gradprobe.study.folder.StudyError: executor='local' starts worker processes that "
                           f"re-import your script {script}")
    assert "`if __name__ == \"__main__\":` guard" in last and "executor='inline'" in last and last.endswith(
        "Nothing was run.")
    assert not out.exists()


def test_a_study_none_of_whose_runs_finished_says_so(tmp_path, monkeypatch):
    """runs.csv with only its header (every run failed) is "nothing to read", with the runner's summary, not an
    AnalysisError from reading the empty table."""
    import gradprobe
    import gradprobe.study.runner as runner
    from gradprobe.study.folder import StudyError

    plan, out = tmp_path / "plan.toml", tmp_path / "study"
    plan.write_text(PLAN)

    def failed_study(plan_path, out_dir, **kw):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "runs.csv").write_text("arm,seed,update,generated_tokens,device_seconds,accuracy\n")
        return types.SimpleNamespace(summary=lambda: "2 runs failed: grpo seed 0, grpo seed 1")

    monkeypatch.setattr(runner, "run_study", failed_study)
    with pytest.raises(StudyError, match="no run of the study finished, so there is nothing to read:\n2 runs failed"):
        gradprobe.Study(plan, out).run(executor="inline")
