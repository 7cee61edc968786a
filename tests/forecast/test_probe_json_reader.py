"""Every reader of a probe.json reads it as :func:`gradprobe.load_probe` does
(:func:`gradprobe.outputs.read_probe_json`): a UTF-8 byte-order mark an editor wrote is read, a file that is not UTF-8
or not JSON is refused in one line naming the file and the fix. And :func:`gradprobe.forecast.forecast_section`
refuses a null or text ``rewards`` item in one line (it raised a TypeError), and checks a probe.json read from
``source`` against its own records (:func:`gradprobe.forecast.probe_input.check_entry_inputs`).

Fixture: the shipped single-batch probe of ``data/study_tiny`` (model tiny, rewards outcome, mc_value, mc_advantage,
hybrid_0.5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "data" / "study_tiny"
PROBE = STUDY / "probe" / "probe.json"
BOM = b"\xef\xbb\xbf"
LATIN1 = '{"rewards": [], "note": "caf\xe9"}'.encode("latin-1")  # byte 0xe9 at position 28: no UTF-8
BROKEN = b'{"rewards": ['
TINY = dict(prompts=4, group=4, heldout_prompts=4, heldout_group=4, continuations=1, n_bootstrap=50, progress=False)


def _shipped() -> dict:
    return json.loads(PROBE.read_text(encoding="utf-8"))


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# ---- the reader ------------------------------------------------------------------------------------------------------

def test_reader_reads_a_bom_as_the_file_without_it_and_names_the_file_and_fix_in_each_refusal(tmp_path):
    from gradprobe.outputs import read_probe_json

    file = tmp_path / "probe.json"
    file.write_bytes(BOM + PROBE.read_bytes())
    assert read_probe_json(file, "FIX") == _shipped()
    file.write_bytes(LATIN1)
    with pytest.raises(ValueError) as e:
        read_probe_json(file, "FIX")
    assert _one_line(e) == (f"{file} is not UTF-8 text ('utf-8' codec can't decode byte 0xe9 in position 28: "
                            "invalid continuation byte); FIX")
    file.write_bytes(BROKEN)
    with pytest.raises(ValueError) as e:
        read_probe_json(file, "FIX")
    assert _one_line(e) == f"{file} is not valid JSON (Expecting value: line 1 column 14 (char 13)); FIX"
    for text in ("[1, 2]", '{"rewards": null}', "{}"):
        file.write_text(text)
        with pytest.raises(ValueError) as e:
            read_probe_json(file, "FIX")
        assert _one_line(e) == f"{file} has no 'rewards' list: not a probe.json of gradprobe probe; FIX"
    with pytest.raises(FileNotFoundError) as e:
        read_probe_json(tmp_path / "none.json", "FIX", missing="RUN IT")
    assert str(e.value) == f"{tmp_path / 'none.json'} is missing; RUN IT"


# ---- report.html (gradprobe.probe.report_html.write_probe_report) ----------------------------------------------------

def test_report_reads_a_bom_probe_json_as_without_it_and_refuses_a_damaged_one_in_one_line(tmp_path):
    from gradprobe.layout import rerun_advice
    from gradprobe.probe.report_html import write_probe_report

    out = tmp_path / "p"
    out.mkdir()
    (out / "probe.json").write_bytes(PROBE.read_bytes())
    plain = write_probe_report(out).read_text()
    assert "mc_advantage" in plain
    (out / "probe.json").write_bytes(BOM + PROBE.read_bytes())
    assert write_probe_report(out).read_text() == plain  # the same page
    for content, why in ((LATIN1, "is not UTF-8 text ('utf-8' codec can't decode byte 0xe9 in position 28"),
                         (BROKEN, "is not valid JSON (Expecting value: line 1 column 14 (char 13))")):
        (out / "probe.json").write_bytes(content)
        with pytest.raises(ValueError) as e:
            write_probe_report(out)
        msg = _one_line(e)
        assert msg.startswith(f"{out / 'probe.json'} {why}") and msg.endswith(f"; {rerun_advice(out)}")
    assert (out / "report.html").read_text() == plain  # a refused file leaves the page as it was


# ---- gradprobe.probe's result (gradprobe.api.probe, read back from the folder it wrote) ------------------------------

def _probe_writing(monkeypatch, content: bytes):
    """``gradprobe.probe`` whose compute (``_probe_into``) only writes ``content`` as the folder's probe.json."""
    import gradprobe
    import gradprobe.api.probe as api

    def write(*, folder, **_):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "probe.json").write_bytes(content)

    monkeypatch.setattr(api, "_probe_into", write)
    return lambda out: gradprobe.probe("tiny", rewards=["outcome"], out=out, **TINY)


def test_probe_result_reads_a_bom_probe_json_as_without_it(tmp_path, monkeypatch):
    plain = _probe_writing(monkeypatch, PROBE.read_bytes())(tmp_path / "a")
    bom = _probe_writing(monkeypatch, BOM + PROBE.read_bytes())(tmp_path / "b")
    assert bom.raw == plain.raw == _shipped()
    assert bom.folder == tmp_path / "b"


@pytest.mark.parametrize("content, why", [
    (LATIN1, "is not UTF-8 text ('utf-8' codec can't decode byte 0xe9 in position 28: invalid continuation byte)"),
    (BROKEN, "is not valid JSON (Expecting value: line 1 column 14 (char 13))")], ids=["latin1", "truncated"])
def test_probe_result_refuses_a_damaged_probe_json_naming_the_file(tmp_path, monkeypatch, content, why):
    with pytest.raises(ValueError) as e:
        _probe_writing(monkeypatch, content)(tmp_path / "p")
    assert _one_line(e).startswith(f"{tmp_path / 'p' / 'probe.json'} {why}; re-run `gradprobe probe --out ")


# ---- calib: a study's probe (calib.dataset.check_probe_numbers) ------------------------------------------------------

def test_calib_checks_a_study_probe_with_a_bom_as_without_it(tmp_path):
    from calib.dataset import check_probe_numbers
    from calib.integrity import StudyFormatError

    study = shutil.copytree(STUDY, tmp_path / "study_tiny", ignore=shutil.ignore_patterns("figures", "*.gz"))
    file = study / "probe" / "probe.json"
    edited = _shipped()
    edited["rewards"][1]["tokens_per_update"] = True  # read as 1 token per update, were it not refused
    messages = []
    for prefix in (b"", BOM):
        file.write_bytes(prefix + json.dumps(edited, indent=2).encode())
        with pytest.raises(StudyFormatError) as e:
            check_probe_numbers(study)
        messages.append(str(e.value))
    assert messages[0] == messages[1]  # the BOM file is checked as the one without (it was skipped)
    assert messages[0].startswith(f"{file} field rewards[1].tokens_per_update ")
    file.write_bytes(BOM + PROBE.read_bytes())
    assert check_probe_numbers(study) is None  # the intact file with a BOM passes


# ---- forecast_section on a probe.json dict ---------------------------------------------------------------------------

@pytest.mark.parametrize("item, shown", [(None, "null"), ("x", '"x"'), (3, "3")])
def test_forecast_section_refuses_a_reward_item_that_is_no_object_in_one_line(item, shown):
    """The message is the forecast's own check's (probe_batches_of), the file (``source``) and its fix named."""
    from gradprobe.forecast import forecast_section
    from helpers_probe_json import refusal

    raw = _shipped()
    raw["rewards"].insert(1, item)
    for source, file in ((None, "probe.json"), (PROBE, str(PROBE))):
        with pytest.raises(ValueError) as e:
            forecast_section(raw, source=source)
        assert _one_line(e).startswith(f"{file} field rewards[1] is {shown}, not an object; ")
        assert str(e.value) == refusal(raw, source)


def test_forecast_section_checks_a_probe_json_read_from_source_against_its_records():
    """tokens_per_update doubled with the gains at the budget halved: the entry agrees with itself (probe_batches_of
    passes it) but not with the batch's generated tokens (4477 + 21043 continuation tokens = 25520)."""
    from gradprobe.forecast import forecast_section

    raw = _shipped()
    entry = raw["rewards"][1]
    entry["tokens_per_update"] *= 2
    entry["predicted_gain_at_budget"] /= 2
    entry["gain_interval_at_budget"] = [x / 2 for x in entry["gain_interval_at_budget"]]
    before = [r["forecast_gain"] for r in forecast_section(_shipped())["rows"]]
    in_memory = [r["forecast_gain"] for r in forecast_section(raw)["rows"]]  # a dict put together in memory: read
    assert before[1] == pytest.approx(-4.6246, abs=1e-4) and in_memory[1] == pytest.approx(-6.1136, abs=1e-4)
    with pytest.raises(ValueError) as e:
        forecast_section(raw, source=PROBE)
    assert _one_line(e).startswith(f"{PROBE} field rewards[1].tokens_per_update (reward 'mc_value') is 51040, but "
                                   "batch.generated_tokens and rewards[1].generated_tokens give 25520 ")
    assert [r["forecast_gain"] for r in forecast_section(_shipped(), source=PROBE)["rows"]] == before
