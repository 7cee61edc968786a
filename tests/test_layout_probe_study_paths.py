"""A study's probe is the study's whatever path names it, and ``gradprobe probe --out`` on it gives the fix that works.

1. ``layout.probe_study``/``output_kind`` resolve the folder: ``.`` inside ``STUDY/probe`` (or its
   ``guided/<arm>``), ``STUDY/x/../probe``, ``probe`` typed inside ``STUDY`` and a link to ``STUDY/probe`` are the
   study's probe when ``arms.json`` is missing (they were ``"probe"``, so ``gradprobe probe --out .`` overwrote the
   study's probe); the study is shown as typed where the path names it, else resolved;
2. the refusal of ``--out STUDY/probe`` (and ``STUDY/probe/guided/ARM``) tells a study without ``runs/`` (every
   shipped study) to choose another ``--out``, not to resume the study (which would train every run again); with
   ``runs/`` it names the ``gradprobe study`` command that resumes it;
3. a study's ``probe/`` (or ``probe/guided``) that is itself a link to a folder elsewhere is the study's too (the
   path as given names it, though the resolved one does not: ``--out STUDY/probe`` overwrote its probe.json), and
   so is a missing ``probe/guided/NEWARM`` (a probe written there was taken for the study's on the next run);
   ``STUDY/figures/../probe`` shows the study as ``STUDY``;
4. any other path inside a study's probe, existing or missing (``probe/batch_3``, which ``load_probe(STUDY/probe)``
   would read as the study's batch 3; ``probe/newdir``; ``probe/guided`` of a study without guided arms;
   ``probe/guided/NEWARM`` of an arm the study has not) is refused as inside it, with no resume named (resuming
   never writes it); the missing ``probe/`` of a study that has none says so, with the study's fix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.layout import output_kind, probe_study, study_probe_refusal

ROOT = Path(__file__).resolve().parents[1]
_PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--no-progress"]
_INSIDE = ("is inside the probe folder of study {study} ({study}/probe), which only the study writes: choose another "
           "{option} (an empty folder, or an earlier probe's)")
_NO_RUNS = ("of a study without run folders ({study} has no runs/: resuming it to write its probe again would train "
            "every run again): leave it as it is and choose another --out (an empty folder, or an earlier probe's)")


def _inside(study, option: str = "--out") -> str:
    return _INSIDE.format(study=study, option=option)


@pytest.fixture
def study(tmp_path) -> Path:
    """A copy of the shipped guided study (its tables and probes only) whose probe lost its arms.json."""
    out = shutil.copytree(ROOT / "data" / "study_tiny_guided", tmp_path / "s",
                          ignore=shutil.ignore_patterns("figures", "*.gz"))
    (out / "probe" / "arms.json").unlink()
    (out / "x").mkdir()
    return out


@pytest.fixture
def no_compute(monkeypatch):
    monkeypatch.setattr(probe_batches, "run_probe_batches", lambda *a, **k: pytest.fail("the probe ran"))


def test_dot_inside_the_probe_is_the_studys(study, monkeypatch):
    monkeypatch.chdir(study / "probe")  # restored by monkeypatch
    assert probe_study(".") == probe_study(Path(".")) == study.resolve()
    assert output_kind(".") == ("study probe", f"plan.toml + study.json in {study.resolve()}")
    monkeypatch.chdir(study / "probe" / "guided" / "guided")
    assert probe_study(".") == study.resolve()
    assert output_kind(".") == ("guided probe", "probe/guided/guided")


def test_dotted_relative_and_linked_paths_are_the_studys(study, tmp_path, monkeypatch):
    assert probe_study(f"{study}/x/../probe") == study  # as typed, `x/..` removed (normpath): it names the study
    assert output_kind(f"{study}/x/../probe") == ("study probe", f"plan.toml + study.json in {study}")
    assert probe_study(f"{study}/probe/.") == probe_study(f"{study}/probe/") == study
    link = tmp_path / "link"
    link.symlink_to(study / "probe")
    assert probe_study(link) == study.resolve()  # the link's parent is no study: the resolved one is shown
    assert output_kind(link) == ("study probe", f"plan.toml + study.json in {study.resolve()}")
    monkeypatch.chdir(study)
    assert probe_study("probe") == study.resolve()  # not "." (what the user typed names no study)
    monkeypatch.chdir(study / "x")
    assert probe_study("../probe") == Path("..")
    assert probe_study(tmp_path) is None and output_kind(study / "x") is None


def test_probe_out_dot_and_a_link_are_refused_before_any_compute(study, tmp_path, monkeypatch, capsys, no_compute):
    before = (study / "probe" / "probe.json").read_bytes()
    monkeypatch.chdir(study / "probe")
    assert main(_PROBE + ["--out", "."]) == 2
    resolved = study.resolve()
    assert capsys.readouterr().err.strip() == (
        f"gradprobe probe: error: --out '.' is a study's probe folder (the probe/ of study {resolved}, whose "
        f"arms.json is missing) {_NO_RUNS.format(study=resolved)}")
    link = tmp_path / "link"
    link.symlink_to(study / "probe" / "guided" / "guided")
    assert main(_PROBE + ["--out", f"{link}/"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gradprobe probe: error: --out {str(link)!r} is a study's probe folder (the probe/ of study {resolved}, "
        f"whose arms.json is missing) {_NO_RUNS.format(study=resolved)}")
    assert (study / "probe" / "probe.json").read_bytes() == before
    assert sorted(p.name for p in (study / "probe").iterdir()) == ["guided", "probe.json"]


@pytest.mark.parametrize("arms", [False, True])
def test_the_refusal_without_runs_says_choose_another_out(study, capsys, no_compute, arms):
    if arms:
        shutil.copy(ROOT / "data" / "study_tiny_guided" / "probe" / "arms.json", study / "probe" / "arms.json")
    shown = {True: ("arms.json there", "arms.json in its probe/")}.get(
        arms, (f"the probe/ of study {study}, whose arms.json is missing",) * 2)
    for folder, said in zip((study / "probe", study / "probe" / "guided" / "guided"), shown):
        expected = f"is a study's probe folder ({said}) {_NO_RUNS.format(study=study)}"
        assert study_probe_refusal(folder) == expected
        assert main(_PROBE + ["--out", str(folder)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"gradprobe probe: error: --out {str(folder)!r} {expected}" and "gradprobe study" not in err


@pytest.mark.parametrize("arms", [False, True])
def test_the_refusal_with_runs_names_the_resume(study, capsys, no_compute, arms):
    (study / "runs").mkdir()
    if arms:
        shutil.copy(ROOT / "data" / "study_tiny_guided" / "probe" / "arms.json", study / "probe" / "arms.json")
    shown = {True: ("arms.json there", "arms.json in its probe/")}.get(
        arms, (f"the probe/ of study {study}, whose arms.json is missing",) * 2)
    for folder, said in zip((study / "probe", study / "probe" / "guided" / "guided"), shown):
        expected = (f"is a study's probe folder ({said}); to redo it delete {folder / 'probe.json'} and resume the "
                    f"study with `gradprobe study '{study / 'plan.toml'}' --out '{study}'`, which re-runs the missing "
                    "probe (finished runs are kept); else choose another --out")
        assert study_probe_refusal(folder) == expected
        assert main(_PROBE + ["--out", str(folder)]) == 2
        assert capsys.readouterr().err.strip() == f"gradprobe probe: error: --out {str(folder)!r} {expected}"


def test_no_refusal_for_other_folders(study, tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "probe.json").write_text("{}")
    assert study_probe_refusal(tmp_path / "p") is None and study_probe_refusal(study) is None
    assert study_probe_refusal(tmp_path / "missing") is None


def test_a_probe_folder_linked_elsewhere_is_refused(study, tmp_path, capsys, no_compute, monkeypatch):
    (study / "runs").mkdir()
    (tmp_path / "ext").mkdir()
    shutil.move(study / "probe", tmp_path / "ext" / "store_probe")
    (study / "probe").symlink_to(Path("..", "ext", "store_probe"))  # s/probe -> ../ext/store_probe
    before = (study / "probe" / "probe.json").read_bytes()
    folder = study / "probe"
    assert probe_study(folder) == study and probe_study(f"{folder}/") == study
    assert output_kind(folder) == ("study probe", f"plan.toml + study.json in {study}")
    expected = (f"is a study's probe folder (the probe/ of study {study}, whose arms.json is missing); to redo it "
                f"delete {folder / 'probe.json'} and resume the study with `gradprobe study '{study / 'plan.toml'}' "
                f"--out '{study}'`, which re-runs the missing probe (finished runs are kept); else choose another "
                "--out")
    assert study_probe_refusal(folder) == expected
    assert main(_PROBE + ["--out", str(folder)]) == 2
    assert capsys.readouterr().err.strip() == f"gradprobe probe: error: --out {str(folder)!r} {expected}"
    monkeypatch.chdir(tmp_path)  # relative, as typed
    assert main(_PROBE + ["--out", "s/probe"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gradprobe probe: error: --out 's/probe' is a study's probe folder (the probe/ of study s, ")
    assert "`gradprobe study 's/plan.toml' --out 's'`" in err
    assert (study / "probe" / "probe.json").read_bytes() == before
    assert sorted(p.name for p in (study / "probe").iterdir()) == ["guided", "probe.json"]


def test_a_guided_folder_linked_elsewhere_is_refused(study, tmp_path, capsys, no_compute):
    shutil.copy(ROOT / "data" / "study_tiny_guided" / "probe" / "arms.json", study / "probe" / "arms.json")
    (tmp_path / "ext").mkdir()
    shutil.move(study / "probe" / "guided", tmp_path / "ext" / "store_guided")
    (study / "probe" / "guided").symlink_to(Path("..", "..", "ext", "store_guided"))
    folder = study / "probe" / "guided" / "guided"
    before = (folder / "probe.json").read_bytes()
    assert probe_study(folder) == study
    assert output_kind(folder) == ("guided probe", "probe/guided/guided")
    expected = f"is a study's probe folder (arms.json in its probe/) {_NO_RUNS.format(study=study)}"
    assert study_probe_refusal(folder) == expected
    assert main(_PROBE + ["--out", str(folder)]) == 2
    assert capsys.readouterr().err.strip() == f"gradprobe probe: error: --out {str(folder)!r} {expected}"
    assert (folder / "probe.json").read_bytes() == before


@pytest.mark.parametrize("arms", [False, True])
def test_a_missing_guided_folder_is_refused(study, capsys, no_compute, arms):
    """A missing ``guided/NEWARM`` of an arm the study has not is inside its probe (the study never writes it)."""
    if arms:
        shutil.copy(ROOT / "data" / "study_tiny_guided" / "probe" / "arms.json", study / "probe" / "arms.json")
    folder = study / "probe" / "guided" / "newarm"
    assert probe_study(folder) == study and output_kind(folder) is None  # output_kind reads existing folders only
    expected = _inside(study)
    assert study_probe_refusal(folder) == expected
    assert main(_PROBE + ["--out", str(folder)]) == 2
    assert capsys.readouterr().err.strip() == f"gradprobe probe: error: --out {str(folder)!r} {expected}"
    assert not folder.exists()
    assert sorted(p.name for p in (study / "probe" / "guided").iterdir()) == ["guided"]
    (study / "runs").mkdir()  # with run folders too: resuming never writes it, so no resume is named
    assert study_probe_refusal(folder) == expected


@pytest.mark.parametrize("runs", [False, True])
def test_a_missing_guided_arm_that_arms_json_names_keeps_the_studys_fix(study, runs):
    """``guided/guided`` deleted, still named in arms.json (``probe_dir``): the study writes it, so its fix stays."""
    shutil.copy(ROOT / "data" / "study_tiny_guided" / "probe" / "arms.json", study / "probe" / "arms.json")
    folder = study / "probe" / "guided" / "guided"
    shutil.rmtree(folder)
    if runs:
        (study / "runs").mkdir()
        assert study_probe_refusal(folder) == (
            f"is a study's probe folder (arms.json in its probe/); to redo it resume the study with `gradprobe study "
            f"'{study / 'plan.toml'}' --out '{study}'`, which re-runs the missing probe (finished runs are kept); else "
            "choose another --out")
    else:
        assert study_probe_refusal(folder) == (
            f"is a study's probe folder (arms.json in its probe/) {_NO_RUNS.format(study=study)}")
    assert study_probe_refusal(study / "probe" / "guided" / "other") == _inside(study)


def test_the_study_is_shown_without_dot_dot(study, tmp_path, capsys, no_compute, monkeypatch):
    (study / "figures").mkdir()
    monkeypatch.chdir(tmp_path)
    assert probe_study("s/figures/../probe") == Path("s")
    assert probe_study("s/figures/../probe/guided/guided") == Path("s")
    assert output_kind("s/figures/../probe") == ("study probe", "plan.toml + study.json in s")
    assert main(_PROBE + ["--out", "s/figures/../probe"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gradprobe probe: error: --out 's/figures/../probe' is a study's probe folder (the probe/ of study s, whose "
        f"arms.json is missing) {_NO_RUNS.format(study='s')}")


@pytest.fixture
def shipped(tmp_path) -> dict:
    """Copies of the shipped guided study (g: arms.json, probe/guided/guided) and of study_tiny (s: no guided arm)."""
    keep = shutil.ignore_patterns("figures", "*.gz")
    return {name: shutil.copytree(ROOT / "data" / source, tmp_path / name, ignore=keep)
            for name, source in (("g", "study_tiny_guided"), ("s", "study_tiny"))}


_INSIDE_PATHS = [("g", "probe/batch_3"), ("g", "probe/guided/guided/batch_1"), ("g", "probe/guided/newarm/sub"),
                 ("g", "probe/newdir"), ("g", "probe/newdir/guided/a"), ("g", "probe/.earlier-probe"),
                 ("s", "probe/guided"), ("s", "probe/guided/new"), ("s", "probe/batch_1")]


@pytest.mark.parametrize("runs", [False, True])
@pytest.mark.parametrize("name,inside", _INSIDE_PATHS)
def test_missing_paths_inside_a_studys_probe_are_refused(shipped, tmp_path, monkeypatch, capsys, no_compute, runs,
                                                         name, inside):
    """Any missing folder inside a study's probe (not only guided/NEWARM) is refused, with or without runs/, and
    nothing is written; relative paths show the study as typed."""
    study = shipped[name]
    if runs:
        (study / "runs").mkdir()
    before = sorted(str(p.relative_to(study)) for p in (study / "probe").rglob("*"))
    folder = study / inside
    assert study_probe_refusal(folder) == _inside(study)
    assert main(_PROBE + ["--out", str(folder)]) == 2
    assert capsys.readouterr().err.strip() == f"gradprobe probe: error: --out {str(folder)!r} {_inside(study)}"
    monkeypatch.chdir(tmp_path)
    assert study_probe_refusal(f"{name}/{inside}") == _inside(name)
    assert study_probe_refusal(f"{name}/probe/guided/../{inside.split('/')[-1]}") == _inside(name)  # normpath'd
    assert sorted(str(p.relative_to(study)) for p in (study / "probe").rglob("*")) == before


def test_existing_folders_inside_a_studys_probe_are_refused_and_nothing_written(shipped, tmp_path, monkeypatch):
    """An empty folder, and one holding an earlier probe, inside a study's probe are refused by ProbeResult.write
    (which `load_probe(STUDY/probe)` would read as the study's batch 3); a nested new folder elsewhere is written."""
    import gradprobe
    from gradprobe.outputs import OutputDirError

    g = shipped["g"]
    result = gradprobe.load_probe(g / "probe" / "guided" / "guided")
    (g / "probe" / "mine").mkdir()
    shutil.copytree(g / "probe" / "guided" / "guided", g / "probe" / "batch_3")
    for folder in (g / "probe" / "mine", g / "probe" / "batch_3", g / "probe" / "batch_7"):
        before = sorted(str(p.relative_to(g)) for p in (g / "probe").rglob("*"))
        with pytest.raises(OutputDirError) as refused:
            result.write(folder)
        assert str(refused.value) == f"dir {str(folder)!r} {_inside(g, 'dir')}"  # the argument, not --out
        assert sorted(str(p.relative_to(g)) for p in (g / "probe").rglob("*")) == before
    written = result.write(tmp_path / "out1" / "a" / "b" / "c")  # no false refusal: nested new folders
    assert (Path(written) / "probe.json").is_file()


def test_a_study_without_a_probe_says_it_has_none_yet(tmp_path, capsys, no_compute, monkeypatch):
    """``V/probe`` of a study V (plan.toml + analysis.json) that has no probe/: "no probe/ yet", with the study's fix;
    ``W/probe`` beside a bare plan.toml (no study) and a plain folder named probe are no study's."""
    v, w = tmp_path / "v", tmp_path / "w"
    for folder in (v, w):
        folder.mkdir()
        (folder / "plan.toml").write_text("x")
    (v / "analysis.json").write_text("{}")
    (w / "probe").mkdir()
    (tmp_path / "a" / "probe").mkdir(parents=True)
    said = f"is the probe folder of study {v} (plan.toml + analysis.json), which has no probe/ yet"
    expected = (f"{said} and only the study writes it; {v} has no runs/ (resuming it to write its probe would train "
                "every run again): choose another --out (an empty folder, or an earlier probe's)")
    assert study_probe_refusal(v / "probe") == expected
    assert main(_PROBE + ["--out", str(v / "probe")]) == 2
    assert capsys.readouterr().err.strip() == f"gradprobe probe: error: --out {str(v / 'probe')!r} {expected}"
    assert not (v / "probe").exists()
    assert study_probe_refusal(v / "probe" / "guided" / "a") == _inside(v)
    (v / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    assert study_probe_refusal("v/probe") == (
        "is the probe folder of study v (plan.toml + analysis.json), which has no probe/ yet; to write it resume the "
        "study with `gradprobe study 'v/plan.toml' --out 'v'`, which runs the missing probe (finished runs are "
        "kept); else choose another --out")
    for other in ("w/probe", "w/probe/guided/x", "a/probe", "a/probe/batch_1", "out1/a/b/c", "v/probe2",
                  "v/runs/probe"):
        assert study_probe_refusal(other) is None, other


def test_paths_inside_a_linked_probe_are_refused(shipped, tmp_path):
    """Inside a study's probe/ that is a link elsewhere (the path as given names it), and inside a link to a study's
    probe (the resolved path names it)."""
    s = shipped["s"]
    (tmp_path / "ext").mkdir()
    shutil.move(s / "probe", tmp_path / "ext" / "store")
    (s / "probe").symlink_to(Path("..", "ext", "store"))
    assert study_probe_refusal(s / "probe" / "batch_2") == _inside(s)
    (tmp_path / "link").symlink_to(shipped["g"] / "probe")
    assert study_probe_refusal(tmp_path / "link" / "batch_2") == _inside(shipped["g"])


def test_a_folder_below_an_unrelated_arms_json_is_not_refused(tmp_path):
    """Only a folder named as a study names its probe counts as an ancestor: a user folder that happens to hold a file
    arms.json (itself still taken for a study's probe, as before) does not refuse every --out below it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "arms.json").write_text("{}")
    assert study_probe_refusal(work) is not None  # the folder itself: a study's probe that lost its study
    for below in (work / "run1", work / "a" / "b", work / "probe"):
        assert study_probe_refusal(below) is None
    assert study_probe_refusal(work / "run1" / "batch_1") is None


def test_the_api_refusals_name_the_argument_not_the_flag(shipped, tmp_path):
    """ProbeResult.write(dir) and gradprobe.probe(out=) refused for a study's probe, or another command's folder, tell
    the caller to choose another `dir` / `out`, the argument they passed, not the command's --out."""
    import gradprobe
    from gradprobe.outputs import OutputDirError

    g = shipped["g"]
    result = gradprobe.load_probe(g / "probe" / "guided" / "guided")
    with pytest.raises(OutputDirError) as refused:
        result.write(g / "probe")
    assert str(refused.value).endswith("choose another dir (an empty folder, or an earlier probe's)")
    assert "--out" not in str(refused.value).split(": leave it as it is")[-1]
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "metrics.jsonl").write_text("")
    with pytest.raises(OutputDirError) as refused:
        gradprobe.probe("tiny-qwen2", "chain_sum", out=run, progress=False)
    assert str(refused.value).startswith(f"out {str(run)!r} holds a training run")
    assert str(refused.value).endswith("choose another out (an empty folder, or an earlier probe's)")
