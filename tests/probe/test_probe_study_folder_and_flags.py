"""``gradprobe probe --out`` refuses a study's probe folder (``arms.json``, and its ``guided/<arm>`` folders) while
``gradprobe study``'s own probe still writes there; ``--guidance`` refuses a repeated key and an empty value and its
help names the defaults; the last line names every file written (calibrated.json included)."""

from __future__ import annotations

import json

import pytest

import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.forecast import default_curve_path
from gradprobe.study.probe_plan import arms_table
from gradprobe.study.worker import _probe
from gradprobe.training.plan import load_plan

from helpers_rollout import one_thread
from study_helpers import toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

_PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
          "--group", "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8", "--bootstrap",
          "20", "--no-progress", "--reference-curve", str(default_curve_path())]
_SMALL = {"prompts": 2, "group": 2, "heldout_prompts": 2, "heldout_group": 2, "n_bootstrap": 20,
          "progress": False}


@pytest.fixture
def no_compute(monkeypatch):
    monkeypatch.setattr(probe_batches, "run_probe_batches", lambda *a, **k: pytest.fail("the probe ran"))


def test_a_studys_probe_folder_is_refused(tmp_path, capsys, no_compute):
    probe = tmp_path / "study" / "probe"
    (probe / "guided" / "hinted").mkdir(parents=True)
    for folder in (probe, probe / "guided" / "hinted"):
        (folder / "probe.json").write_text('{"study": true}')
    (probe / "arms.json").write_text("{}")
    assert main(_PROBE + ["--out", str(probe)]) == 2
    no_runs = (f"of a study without run folders ({probe.parent} has no runs/: resuming it to write its probe again "
               "would train every run again): leave it as it is and choose another --out (an empty folder, or an "
               "earlier probe's)")
    assert capsys.readouterr().err.strip() == (
        f"gradprobe probe: error: --out {str(probe)!r} is a study's probe folder (arms.json there) {no_runs}")
    guided = probe / "guided" / "hinted"
    assert main(_PROBE + ["--out", str(guided)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gradprobe probe: error: --out {str(guided)!r} is a study's probe folder (arms.json in its probe/) {no_runs}")
    assert sorted(p.name for p in probe.iterdir()) == ["arms.json", "guided", "probe.json"]
    assert (probe / "probe.json").read_text() == (guided / "probe.json").read_text() == '{"study": true}'


def test_the_studys_own_probe_is_not_refused(tmp_path):
    """Regression guard: gradprobe study writes arms.json first, then its probe beside it (worker._probe ->
    run_probe, never through the CLI's replacing_earlier_probe), so the guard that refuses a study's probe folder
    to ``gradprobe probe --out`` must not stop the study's own probe."""
    plan = load_plan(write_plan(tmp_path, toy_plan("probe_guard", seeds=(0,))))
    out = tmp_path / "study" / "probe"
    out.mkdir(parents=True)
    (out / "arms.json").write_text(json.dumps(arms_table(plan, _SMALL)))
    res = _probe(plan, out, _SMALL)
    assert res["rewards"] == ["outcome"] and json.loads((out / "probe.json").read_text())["config"]["prompts"] == 2
    assert (out / "arms.json").exists() and _probe(plan, out, _SMALL) == {"skipped": True}


@pytest.mark.parametrize("value, message", [
    ("fraction=0.25,prefix=0.5,fraction=0.5", "key 'fraction' is given twice ('fraction=0.25,prefix=0.5,fraction=0.5')"),
    ("prefix=0.5, prefix = 1", "key 'prefix' is given twice"),
    ("", "--guidance is empty; omit the flag for no guidance"),
    ("  ", "--guidance is empty; omit the flag for no guidance"),
])
def test_guidance_flag_refuses_a_repeated_key_and_an_empty_value(tmp_path, capsys, no_compute, value, message):
    assert main(_PROBE + ["--guidance", value, "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradprobe probe: error: ") and message in err and not (tmp_path / "p").exists()


def test_guidance_help_names_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a key left out takes its default (fraction 0.25, prefix 0.5, cap 2.0)" in text


def test_the_last_line_names_every_file_written_with_calibration(tmp_path, capsys):
    out = tmp_path / "p"
    assert main(_PROBE + ["--out", str(out), "--calibration", "default"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == (f"wrote {out}/alignment.safetensors, {out}/calibrated.json, {out}/probe.json, {out}/report.html "
                    f"and {out}/tokens.jsonl")
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "calibrated.json", "probe.json",
                                                     "report.html", "tokens.jsonl"]
