"""``ProbeResult.write(DIR)`` skipped the folder rules of ``gradprobe probe --out``: it overwrote a user's own
``report.html`` (or ``tokens.jsonl``) in a folder without ``probe.json``, and writing into an earlier probe's folder
kept that probe's ``calibrated.json`` beside the new ``probe.json`` (calibrated for other rewards). It now applies the
command's checks (:func:`gradprobe.probe.output.replacing_earlier_probe`) and replaces an earlier probe whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gradprobe
from gradprobe.outputs import OutputDirError


def _entry(reward: str) -> dict:
    """A reward entry with the fields gradprobe.load_probe needs (the table's, and the forecast's per_group)."""
    return {"name": reward, "inner_product": 0.5, "per_group": [0.25, 0.25], "predicted_gain_per_update": 0.005,
            "tokens_per_update": 300, "predicted_gain_at_budget": 4.0}


def _probe_folder(folder: Path, reward: str = "outcome", batches: int = 0) -> Path:
    """A probe folder as ``gradprobe probe --out`` writes it: N = 2 completions of T = 3 tokens (in each of
    ``batches`` ``batch_K/`` folders too)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "probe.json").write_text(json.dumps({"rewards": [_entry(reward)], "config": {"model": "m"}}))
    mask = torch.tensor([[True, True, False], [True, True, True]])
    lines = [{"row": n, "prompt_id": "p", "score": 1.0, "truncated": False, "tokens": ["a"] * k, "texts": ["a"] * k,
              "alignment": [0.5] * k, "advantages": {reward: [1.0] * k}} for n, k in enumerate((2, 3))]
    for d in [folder, *(folder / f"batch_{k}" for k in range(batches))]:
        d.mkdir(exist_ok=True)
        (d / "probe.json").write_text(json.dumps({"rewards": [_entry(reward)], "config": {"model": "m"}}))
        save_file({"alignment": torch.arange(6, dtype=torch.float32).reshape(2, 3) * mask, "completion_mask": mask,
                   f"advantages.{reward}": torch.ones(2, 3, dtype=torch.float64) * mask},
                  str(d / "alignment.safetensors"))
        (d / "tokens.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


@pytest.mark.parametrize("mine", ["report.html", "tokens.jsonl"])
def test_write_refuses_a_folder_holding_a_users_file_of_a_probes_name(tmp_path, mine):
    result = gradprobe.load_probe(_probe_folder(tmp_path / "p"))
    user = tmp_path / "userdir"
    user.mkdir()
    (user / mine).write_text("<p>mine</p>")
    (user / "notes.txt").write_text("notes")
    with pytest.raises(OutputDirError) as info:
        result.write(user)
    msg = str(info.value)
    assert msg.startswith(f"dir {str(user)!r} holds {mine} but no probe.json, so it is no earlier probe's"), msg
    assert "a probe there would overwrite it. Choose another dir, or move" in msg, msg
    assert _tree(user) == {mine: b"<p>mine</p>", "notes.txt": b"notes"}  # nothing written, moved or deleted


def test_write_replaces_an_earlier_probe_whole_calibrated_json_and_batches_included(tmp_path):
    result = gradprobe.load_probe(_probe_folder(tmp_path / "p", "outcome"))
    target = _probe_folder(tmp_path / "stale", "format", batches=2)
    # as gradprobe writes it (versions, config.probe_batches): the probe of its batch_0 and batch_1
    (target / "probe.json").write_text(json.dumps({"rewards": [_entry("format")], "versions": {"gradprobe": "0"},
                                                   "config": {"model": "m", "probe_batches": 2}}))
    (target / "calibrated.json").write_text('{"calibrated_for": ["format"]}')
    (target / "report.html").write_text("<p>old report</p>")
    (target / "notes.txt").write_text("mine")  # not a probe's file: kept
    assert result.write(target) == target
    assert sorted(p.name for p in target.iterdir()) == ["alignment.safetensors", "notes.txt", "probe.json",
                                                        "tokens.jsonl"]
    assert (target / "notes.txt").read_text() == "mine"
    back = gradprobe.load_probe(target)
    assert [r["name"] for r in back.raw["rewards"]] == ["outcome"]
    assert float(back.advantages("outcome").sum()) == 5.0


def test_write_copies_only_the_probes_files_and_a_failed_copy_puts_the_earlier_probe_back(tmp_path, monkeypatch):
    src = _probe_folder(tmp_path / "p", "outcome", batches=1)
    (src / "calibrated.json").write_text('{"calibrated_for": ["outcome"]}')
    (src / "my_notes.txt").write_text("the source's own notes")  # not the probe's: not copied
    result = gradprobe.load_probe(src)
    out = result.write(tmp_path / "copy")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "alignment.safetensors", "batch_0", "batch_0/alignment.safetensors", "batch_0/probe.json",
        "batch_0/tokens.jsonl", "calibrated.json", "probe.json", "tokens.jsonl"]
    target = _probe_folder(tmp_path / "earlier", "format")
    (target / "calibrated.json").write_text('{"calibrated_for": ["format"]}')
    before = _tree(target)
    real = shutil.copyfile

    def failing(a, b, *args, **kwargs):
        if Path(a).name == "probe.json" and Path(a).parent == src:
            raise OSError(28, "No space left on device")
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", failing)
    with pytest.raises(OSError, match="No space left"):
        result.write(target)
    assert _tree(target) == before  # the earlier probe whole again, nothing of the failed copy


def test_write_refuses_its_own_batch_folders_parent(tmp_path):
    src = _probe_folder(tmp_path / "p", batches=2)
    before = _tree(src)
    with pytest.raises(OutputDirError, match=r"holds this probe's folder .*batch_0.* choose another dir"):
        gradprobe.load_probe(src).batch(0).write(src)
    assert _tree(src) == before


def test_write_refuses_a_batch_folder_of_its_own(tmp_path):
    """The other way round (a reviewer): the probe written into its own ``batch_0/`` moved that batch's files aside
    and then failed reading them (a bare FileNotFoundError); the folder was restored, but the error named nothing."""
    src = _probe_folder(tmp_path / "p", batches=2)
    before = _tree(src)
    with pytest.raises(OutputDirError, match=r"is a folder of this probe's own .* choose another dir"):
        gradprobe.load_probe(src).write(src / "batch_0")
    assert _tree(src) == before
