"""A ``tokens.jsonl`` cut at a line boundary (``head -5``) is refused, not read as the batch: by
:meth:`gradprobe.api.ProbeResult.tokens` and by :func:`gradprobe.probe.report_html.read_tokens` (the report's heat
maps), each naming the file, both counts and the fix; for ``--probe-batches N`` against batch 0's completions, not
the pooled count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gradprobe
from gradprobe.probe.report_html import read_tokens
from helpers_probe_json import pooled_shipped

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "study_tiny_heldout4k" / "probe" / "probe.json"


def _line(n: int, names: list[str]) -> str:
    return json.dumps({"row": n, "prompt_id": f"p{n // 8}", "score": 1.0, "truncated": False, "tokens": ["a", "b"],
                       "texts": ["a", "b"], "alignment": [0.5, -0.25],
                       "advantages": {name: [1.0, 2.0] for name in names}}) + "\n"


def _folder(folder: Path, raw: dict, lines: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probe.json").write_text(json.dumps(raw))
    names = [r["name"] for r in raw["rewards"]]
    (folder / "tokens.jsonl").write_text("".join(_line(n, names) for n in range(lines)))
    return folder


def test_tokens_refuses_a_file_cut_at_a_line_boundary(tmp_path):
    raw = json.loads(SHIPPED.read_text())
    assert raw["batch"]["completions"] == 128
    whole = _folder(tmp_path / "whole", raw, 128)
    frame = gradprobe.load_probe(whole).tokens()
    assert len(frame) == 256 and frame["completion"].nunique() == 128  # two tokens per completion
    cut = _folder(tmp_path / "cut", raw, 5)
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(cut).tokens()
    msg = str(info.value)
    assert str(cut / "tokens.jsonl") in msg
    assert "holds 5 completion lines" in msg and "records 128 completions" in msg
    assert "restore it, or re-run `gradprobe probe --out" in msg


def test_report_reader_refuses_a_cut_file_and_reads_a_whole_one(tmp_path):
    raw = json.loads(SHIPPED.read_text())
    whole = _folder(tmp_path / "whole", raw, 128)
    assert [r["row"] for r in read_tokens(whole, raw)] == list(range(128))
    cut = _folder(tmp_path / "cut", raw, 5)
    with pytest.raises(ValueError, match=r"cut/tokens\.jsonl holds 5 completion lines but its probe\.json records "
                                         r"128 completions"):
        read_tokens(cut, raw)
    more = _folder(tmp_path / "more", raw, 129)  # an extra line is refused too
    with pytest.raises(ValueError, match="holds 129 completion lines"):
        read_tokens(more, raw)


def test_several_batches_count_batch_0s_completions(tmp_path):
    pooled = pooled_shipped()
    assert pooled["batch"]["completions"] == 256 and pooled["batches"][0]["batch"]["completions"] == 128
    top = tmp_path / "multi"
    top.mkdir()
    (top / "probe.json").write_text(json.dumps(pooled))
    batch0 = json.loads(SHIPPED.read_text())
    _folder(top / "batch_0", batch0, 128)
    assert len(read_tokens(top, pooled)) == 128  # batch 0's 128, not the pooled 256
    assert gradprobe.load_probe(top).batch(0).tokens()["completion"].nunique() == 128
    _folder(top / "batch_0", batch0, 5)
    with pytest.raises(ValueError, match=r"batch_0/tokens\.jsonl holds 5 completion lines but its probe\.json records "
                                         r"128 completions"):
        read_tokens(top, pooled)
    with pytest.raises(ValueError) as info:
        gradprobe.load_probe(top).batch(0).tokens()
    assert "records 128 completions" in str(info.value)
    assert f"--out {top}`" in str(info.value) or f"--out '{top}'`" in str(info.value)  # the whole probe re-run
