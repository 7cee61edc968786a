"""``gradprobe rank-prompts`` / ``gradprobe.rank_prompts`` on a JSONL pool whose rows hold columns the loader keeps
apart in ``Problem.metadata["data_columns"]``: the keys that are no features are refused before the model is
loaded (no output folder left behind), ``--batch-size``'s help says the sample depends on it, and a listed key
holding a comma is refused.

Before: ``--metadata-keys level`` with ``level: [2]`` on one row ran and imputed that row's level as missing;
``--metadata-keys data_columns`` was refused with the fix "make each such value a number"; ``--metadata-keys row``
ran with the loader's row index as a feature; ``--batch-size``'s help said only "sequences per generate call",
though the sampled completions (so the ranking) change with it; ``metadata_keys=["a,b"]`` was read as 'a' and 'b'.
"""

from __future__ import annotations

import json

import pytest

import gradprobe
from gradprobe.cli import main


def _data(tmp_path):
    rows = [{"prompt": f"What is {i} + 1?", "answer": str(i + 1), "level": [2] if i == 3 else i % 3, "steps": i}
            for i in range(6)]
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.mark.parametrize("key, said", [
    ("level", "metadata key 'level' (--metadata-keys) is not a number: [2] in prompt jsonl/train/3 (line 4)"),
    ("data_columns", "metadata key 'data_columns' (--metadata-keys) is no metadata key"),
    ("row", "metadata key 'row' (--metadata-keys) is an identifier"),
])
def test_rank_prompts_refuses_keys_that_are_no_features_before_the_model(tmp_path, capsys, key, said):
    out = tmp_path / "o"
    rc = main(["rank-prompts", "--model", "no-such-model", "--task", f"jsonl:{_data(tmp_path)}", "--pool", "6",
               "--metadata-keys", key, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and said in err and "no-such-model" not in err  # refused before the model is looked up
    assert "(keys numeric in every prompt holding them: steps)" in err and not out.exists()


def test_the_python_api_refuses_them_too(tmp_path):
    with pytest.raises(ValueError, match=r"^metadata key 'data_columns' \(--metadata-keys\) is no metadata key"):
        gradprobe.rank_prompts("no-such-model", f"jsonl:{_data(tmp_path)}", 6, metadata_keys=["steps", "data_columns"],
                               progress=False)


def test_batch_size_help_says_the_sample_depends_on_it(capsys):
    with pytest.raises(SystemExit):
        main(["rank-prompts", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("--batch-size BATCH_SIZE sequences per generate call; the sampled completions depend on it (micro-batch "
            "composition), so give the same value with the same --seed to reproduce a run") in text


def test_a_listed_key_holding_a_comma_is_refused_not_split(tmp_path):
    """``metadata_keys=["a,b"]`` was stored joined and read back as the two keys 'a' and 'b'."""
    with pytest.raises(ValueError) as err:
        gradprobe.rank_prompts("no-such-model", f"jsonl:{_data(tmp_path)}", 6, metadata_keys=["steps", "level,steps"])
    assert str(err.value) == ("metadata_keys (--metadata-keys) key 'level,steps' holds a comma, which separates keys: "
                              "give each key as its own list item, and rename a data column whose name holds a comma")
