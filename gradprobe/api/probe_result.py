"""The probe's result as a typed object: :class:`ProbeResult`, and :func:`load_probe` to read a folder back.

A probe folder (``gradprobe probe --out DIR``, :func:`gradprobe.probe`, or a study's ``probe/``)
holds ``probe.json`` and, for one probe batch, ``alignment.safetensors`` and ``tokens.jsonl``
(file names: :mod:`gradprobe.layout`). :class:`ProbeResult` reads them on first use: a DataFrame per
reward (:attr:`ProbeResult.table`), the per-token alignment a_ijt (:attr:`ProbeResult.alignment`,
shape (N, T)) and the tokens with every reward's advantage (:meth:`ProbeResult.tokens`).

Importing this module imports neither torch nor pandas (they load on first use, inside the
methods that need them: the front door ``import gradprobe`` stays light).
"""

from __future__ import annotations

import errno
import functools
import json
import numbers
import os
import shutil
import weakref
from pathlib import Path

from ..layout import (ALIGNMENT_SAFETENSORS, EARLIER_MANIFEST, EARLIER_PROBE, PROBE_BATCH_DIR, PROBE_FILES, PROBE_JSON,
                      TOKENS_JSONL, UNFINISHED_PROBE, probe_study, rerun_advice, study_probe_advice)
from ..outputs import (PER_UPDATE_FIELDS, OutputDirError, api_out, is_json_number, json_float, json_short,
                       naming_out, per_update_problem, prepare_output_dir, read_probe_json, refuse_file_in_the_way,
                       shell_word)
from ..tables import holds_surrogate, shown, surrogates_escaped

__all__ = ["ProbeResult", "load_probe", "ProbeFileError"]


class ProbeFileError(FileNotFoundError):
    """A probe folder lacks a file (the message names it and the command that writes it)."""


#: :attr:`ProbeResult.table`'s forecast columns read as numbers, in the table's order -> their fields in a row of
#: probe.json's forecast section (an interval's ends as ``gain_interval[0]``...)
_FORECAST_COLUMNS = {"forecast_gain": "forecast_gain", "forecast_gain_low": "gain_interval[0]",
                     "forecast_gain_high": "gain_interval[1]", "forecast_accuracy": "forecast_accuracy", "rho": "rho",
                     "rho_raw": "rho_raw", "rho_low": "rho_interval[0]", "rho_high": "rho_interval[1]",
                     "rho_snr": "snr", "effective_updates": "effective_updates", "gain_probe": "gain_probe",
                     "gain_cost_only": "gain_cost_only", "gain_signal_proxy": "gain_signal_proxy"}

#: the files of one probe batch that come together: a folder holding one of them holds both
_BATCH_FILES = (ALIGNMENT_SAFETENSORS, TOKENS_JSONL)

#: the fields of a reward entry :attr:`ProbeResult.table` reads, which the probe writes in every entry (since its first
#: version): missing or null is refused, saying who needs it and why (:func:`check_fields`)
_TABLE_FIELDS = {"inner_product": ("the table needs it", "its inner_product column"),
                 "predicted_gain_per_update": ("the table and the forecasts need it", "the first-order gain per "
                                               "update, the table's gain_per_update"),
                 "tokens_per_update": ("the forecasts need it", "the generated tokens per update, which the token "
                                       "budget is divided by"),
                 "predicted_gain_at_budget": ("the table needs it", "its gain_at_budget column")}
#: the fields of a reward entry the forecast reads (:func:`gradprobe.forecast.probe_input.check_batches`), in a
#: single-batch probe.json's entries and in each batch's of a multi-batch one (whose pooled entries hold them too)
_FORECAST_FIELDS = {"per_group": ("the forecasts need it", "the per-group alignments the entry's efficiency is "
                                  "measured from"),
                    "tokens_per_update": _TABLE_FIELDS["tokens_per_update"],
                    "predicted_gain_per_update": _TABLE_FIELDS["predicted_gain_per_update"]}


def damaged(path: Path, why: str) -> ValueError:
    """The error for a probe file that cannot be read: ``path`` named, ``why`` and the fix (:func:`rerun_advice`
    of its folder)."""
    return ValueError(f"{path} is damaged ({why}); {rerun_advice(path.parent)}")


def check_batch_file(path: Path) -> None:
    """Refuse ``path`` (an ``alignment.safetensors`` or ``tokens.jsonl``) unless it reads: the safetensors header
    (``safe_open``, no tensor data) or every non-blank line of the JSONL as a JSON object. Cheap: no tensor is
    loaded.

    Raises
    ------
    ValueError
        The file is damaged (truncated, not a safetensors file, a line that is no JSON object): :func:`damaged`.
    """
    if path.name == ALIGNMENT_SAFETENSORS:
        from safetensors import safe_open  # torch-bound reader: deferred (module docstring)

        try:
            with safe_open(str(path), framework="pt") as f:
                if "alignment" not in f.keys():
                    raise damaged(path, "it holds no 'alignment' tensor")
        except ValueError:
            raise
        except Exception as e:  # SafetensorError (truncated header), OSError
            raise damaged(path, f"{type(e).__name__}: {e}") from e
        return
    with open(path, "rb") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                _jsonl_row(path, i, line)


def _jsonl_row(path: Path, index: int, line) -> dict:
    """Line ``index`` (1-based) of ``path`` as a JSON object, or :func:`damaged` naming the line."""
    try:
        row = json.loads(line)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise damaged(path, f"line {index} is not valid JSON: {e}") from e
    if not isinstance(row, dict):
        raise damaged(path, f"line {index} is a JSON {type(row).__name__}, not an object")
    return row


def expected_completions(raw: dict) -> int | None:
    """The completions of the probe batch whose ``probe.json`` content is ``raw``: its ``batch.completions`` (N =
    B * G, one line each of the batch's ``tokens.jsonl`` and one row each of its alignment), else ``batch.prompts``
    times ``batch.group``; None when the record gives no whole number (a foreign file: nothing to check against)."""
    batch = raw.get("batch") if isinstance(raw, dict) else None
    if not isinstance(batch, dict):
        return None
    n = batch.get("completions")
    if is_json_number(n, integer=True) and n > 0:
        return int(n)
    b, g = batch.get("prompts"), batch.get("group")
    if is_json_number(b, integer=True) and is_json_number(g, integer=True) and b > 0 and g > 0:
        return int(b) * int(g)
    return None


def check_token_lines(path: Path, lines: int, expected: int | None) -> None:
    """Refuse a ``tokens.jsonl`` at ``path`` of ``lines`` completion lines when its ``probe.json`` says the batch has
    ``expected`` completions (:func:`expected_completions`; None: no check): a file cut at a line boundary (``head``)
    reads as valid JSON lines, but its heat maps and :meth:`ProbeResult.tokens` would show part of the batch.

    Raises
    ------
    ValueError
        ``lines != expected``: the file, both counts and the fix (restore the file, or write the probe again) named.
    """
    if expected is None or lines == expected:
        return
    folder = path.parent
    if PROBE_BATCH_DIR.fullmatch(folder.name) and (folder.parent / PROBE_JSON).is_file():
        folder = folder.parent  # batch_K of a multi-batch probe: the probe is written again as a whole
    raise ValueError(f"{path} holds {lines} completion lines but its {PROBE_JSON} records {expected} completions "
                     f"(one line each): the file is incomplete or was edited; restore it, or {rerun_advice(folder)}")


class ProbeResult:
    """One probe's result: per-reward table, per-token alignment, tokens, files.

    Attributes
    ----------
    raw : dict
        The content of ``probe.json`` (``config``, ``rewards``, ``ledger``, ``reference``, ``batch``,
        ``costs``, ``forecast``...; README, "The probe command").
    folder : Path or None
        Where the probe's files are (a temporary folder for :func:`probe` without ``out``, removed
        when this object is garbage-collected; :meth:`write` copies them).
    """

    def __init__(self, raw: dict, folder: str | Path | None = None, *, _temporary: bool = False):
        self.raw = raw
        self.folder = None if folder is None else Path(folder)
        self._alignment = None
        if _temporary and self.folder is not None:
            weakref.finalize(self, shutil.rmtree, str(self.folder), True)

    def __repr__(self) -> str:
        """Model, task, rewards (names as ``repr`` writes them: controls and bidi escaped), the probe batch B x G
        and, for several probe batches pooled, their number; never raises, whatever dict :attr:`raw` is."""
        cfg = self.raw.get("config")
        cfg = cfg if isinstance(cfg, dict) else {}
        rewards = self.raw.get("rewards")
        names = [r.get("name") if isinstance(r, dict) else r for r in rewards] if isinstance(rewards, list) else rewards
        n = cfg.get("probe_batches")
        pooled = f", batches={n}" if is_json_number(n, integer=True) and n > 1 else ""  # the table pools them
        return (f"ProbeResult(model={cfg.get('model')!r}, task={cfg.get('task')!r}, rewards={names}, "
                f"batch={cfg.get('prompts')}x{cfg.get('group')}{pooled}, "
                f"folder={str(self.folder) if self.folder else None!r})")

    @property
    def rewards(self) -> list[str]:
        """The probed rewards' names, in the table's order."""
        return [r["name"] for r in self.raw["rewards"]]

    @property
    def table(self):
        """One row per reward (index ``reward``), the numbers ``gradprobe probe`` prints.

        Columns (the raw first-order probe, always present):

        - ``inner_product``: <g_R, u>, the reward's policy gradient along the (preconditioned)
          reference update u; ``inner_product_low``, ``inner_product_high``: its bootstrap
          interval over prompts (95%); ``snr``: its signal-to-noise ratio;
        - ``gain_per_update``: 100 * lr * <g_R, u>, accuracy points per update (first order);
        - ``tokens_per_update``: generated tokens per training update c_R (continuations included);
        - ``gain_at_budget``: (T / c_R) * gain_per_update at the token budget T, accuracy points
          (the RAW extrapolation, without diminishing returns: expected to overestimate);
        - ``no_signal``: True for a reward whose every advantage is 0 on the probe batch (equal rewards in every
          group, or None/NaN for every completion): its ``inner_product``, interval, ``snr`` and gains are exact
          zeros, not a measurement (what ``gradprobe probe`` warns about under its table), also without a forecast.

        With a forecast (``probe.json``'s ``forecast`` section available: a reference curve was
        given or the model has a shipped one; DESIGN.md, "Forecast"), also:
        ``forecast_gain`` (accuracy points vs grpo at the budget), ``forecast_gain_low``/``_high``
        (its interval), ``forecast_accuracy`` (points), ``rho`` (efficiency ratio
        <g_R, u> / <g_outcome, u> shrunk by its SNR), ``rho_raw``, ``rho_low``/``rho_high``,
        ``rho_snr``, ``effective_updates`` (n_R = (T / c_R) rho_R, updates), ``gain_probe``,
        ``gain_cost_only``, ``gain_signal_proxy`` (each forecaster's gain, points), ``method`` and
        ``verdict`` (text), ``no_verdict_reason`` (None, or why the row gives no verdict: its numbers are read off
        a reference curve that carries none at the budget, or its rho rests on too few groups; ``gradprobe probe``
        marks such numbers with ``*``).

        Returns
        -------
        pandas.DataFrame
            Shape (R, columns), R = number of probed rewards; NaN where probe.json has null.

        Raises
        ------
        ValueError
            A number field of ``probe.json`` holds no number (true/false, which is never read as 1 or 0, or text
            other than ``"inf"``/``"-inf"``: :func:`gradprobe.outputs.json_float`): the message names the file, the
            field (e.g. ``rewards[0].snr``) and the fix; so does a ``tokens_per_update`` that is no finite number
            > 0 (:func:`gradprobe.outputs.per_update_problem`), a field of :data:`_TABLE_FIELDS` (``inner_product``,
            ``predicted_gain_per_update``, ``tokens_per_update``, ``predicted_gain_at_budget``) that is missing or
            null (the probe writes each in every entry), an interval (``interval``, a forecast row's
            ``gain_interval`` / ``rho_interval``) that is neither null nor a list of two, a reward entry without a
            text ``name``, or a ``forecast`` section that is not an object (or, available, holds no list of row
            objects, or a row whose ``arm`` is no text). One line each.
        """
        import pandas as pd

        rows = self._rows()
        if not any(map(holds_surrogate, rows)):  # pandas' text labels are UTF-8
            table = pd.DataFrame.from_dict(rows, orient="index")
        else:  # a name pandas' text labels cannot hold: the rows by number, then the names as labels of any object
            table = pd.DataFrame.from_dict(dict(enumerate(rows.values())), orient="index")
            table.index = pd.Index(list(rows), dtype=object)
        table.index.name = "reward"
        return table

    def _rows(self) -> dict:
        """:attr:`table`'s rows, reward -> column -> value, after checking every field it reads (:attr:`table`'s
        ValueError)."""
        rows = {}
        for i, r in enumerate(self.raw["rewards"]):
            where = f"rewards[{i}]"
            if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                self._refuse(where if not isinstance(r, dict) else f"{where}.name",
                             r if not isinstance(r, dict) else r.get("name"), "it must be a reward object with a name")
            for key, why in _TABLE_FIELDS.items():
                if r.get(key) is None:
                    self._missing(f"{where}.{key}", key in r, why)
            num = functools.partial(self._number, where)
            lo, hi = self._pair(where, "interval", r.get("interval"))
            rows[r["name"]] = {
                "inner_product": num("inner_product", r["inner_product"]), "inner_product_low": num("interval[0]", lo),
                "inner_product_high": num("interval[1]", hi), "snr": num("snr", r.get("snr")),
                "gain_per_update": num("predicted_gain_per_update", r["predicted_gain_per_update"]),
                "tokens_per_update": int(self._cost(where, "tokens_per_update", r["tokens_per_update"])),
                "gain_at_budget": num("predicted_gain_at_budget", r["predicted_gain_at_budget"])}
        for r, why in zip(self.raw["rewards"], self._no_signal()):  # every entry read: a dict with a text name
            rows[r["name"]]["no_signal"] = why is not None
        for name, columns in self._forecast_rows(set(rows)).items():
            rows[name].update(columns)
        return rows

    def _no_signal(self) -> list:
        """Per entry of ``rewards`` why it gives no gradient on the probe batch(es) (every advantage 0: its zeros
        measure nothing), else None: the entry's recorded ``no_signal_reason``, or for a ``probe.json`` written
        before entries recorded it, :func:`gradprobe.forecast.result.no_signal_reason` of its numbers (as
        ``gradprobe probe``'s printout does, :func:`gradprobe.probe.table.no_signal_entries`)."""
        from ..forecast.result import no_signal_reason  # numpy and pandas: the table has loaded them

        rewards = self.raw["rewards"]
        if all("no_signal_reason" in r for r in rewards):
            return [r["no_signal_reason"] for r in rewards]
        ref = next((r for r in rewards if r.get("name") == "outcome"), None)  # grpo's reward, the reference
        batches = int((self.raw.get("config") or {}).get("probe_batches") or 1)
        return [no_signal_reason([r], [ref], batches=batches) for r in rewards]

    def _forecast_rows(self, names: set) -> dict:
        """Reward -> :attr:`table`'s forecast columns, from probe.json's ``forecast`` section where it is available
        (:meth:`_forecast_section`); ValueError naming a number field that holds no number."""
        out = {}
        for j, f in enumerate(self._forecast_section()):
            name = f.get("arm") or f.get("reward")
            if name not in names:
                continue
            num = functools.partial(self._number, f"forecast.rows[{j}]")
            glo, ghi = self._pair(f"forecast.rows[{j}]", "gain_interval", f.get("gain_interval"))
            rlo, rhi = self._pair(f"forecast.rows[{j}]", "rho_interval", f.get("rho_interval"))
            f = {**f, "gain_interval[0]": glo, "gain_interval[1]": ghi, "rho_interval[0]": rlo,
                 "rho_interval[1]": rhi}
            out[name] = {**{column: num(key, f.get(key)) for column, key in _FORECAST_COLUMNS.items()},
                         "method": f.get("method"), "verdict": f.get("verdict"),
                         "no_verdict_reason": f.get("no_verdict_reason")}
        return out

    def _forecast_section(self) -> list:
        """The rows of probe.json's ``forecast`` section where it is available (else []), after checking the shape
        :attr:`table` reads: the section an object or null, its ``rows`` a list of objects, each ``arm`` (else
        ``reward``) text or null, each ``gain_interval`` / ``rho_interval`` a pair or null. Its numbers are not
        checked here (:attr:`table` names one that is no number; ``calib apply`` checks them against a recompute).
        ValueError (one line: the file, the field, its value, the shape and the fix) otherwise."""
        fc = self.raw.get("forecast")
        if fc is not None and not isinstance(fc, dict):
            self._refuse("forecast", fc, "it must be the forecast section (an object) or null")
        if not (fc or {}).get("available"):
            return []
        if not isinstance(fc.get("rows"), list):
            self._refuse("forecast.rows", fc.get("rows"), "an available forecast section holds a list of rows")
        for j, f in enumerate(fc["rows"]):
            if not isinstance(f, dict):
                self._refuse(f"forecast.rows[{j}]", f, "it must be a forecast row (an object)")
            name = f.get("arm") or f.get("reward")
            if name is not None and not isinstance(name, str):
                self._refuse(f"forecast.rows[{j}].{'arm' if f.get('arm') else 'reward'}", name, "it must be text")
            for key in ("gain_interval", "rho_interval"):
                self._pair(f"forecast.rows[{j}]", key, f.get(key))
        return fc["rows"]

    def _pair(self, where: str, key: str, value) -> tuple:
        """An interval ``where.key`` of probe.json as (low, high): (None, None) for null; ValueError naming the field
        unless it is a list of two."""
        if value is None:
            return None, None
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            self._refuse(f"{where}.{key}", value, "it must be [low, high], two numbers, or null")
        return tuple(value)

    def _fix(self) -> tuple:
        """(how a message names probe.json, its fix)."""
        if self.folder is None:
            return PROBE_JSON, "re-run the probe"
        return self.folder / PROBE_JSON, rerun_advice(self.folder)

    def _refuse(self, field: str, value, what: str):
        """Raise the one-line ValueError of a field of probe.json whose value has another shape than ``what``."""
        file, fix = self._fix()
        raise ValueError(f"{file} field {field} is {json_short(value)}: {what}; {fix}")

    def _missing(self, field: str, null: bool, why: tuple):
        """Raise :func:`missing_field`'s ValueError for this result's probe.json."""
        raise missing_field(*self._fix(), field, null, why)

    def _number(self, where: str, key: str, value) -> float:
        """A number of ``probe.json`` (field ``where.key``) as :func:`gradprobe.outputs.json_float` reads it; a value
        that is none (true/false, text, a list) raises ValueError naming the file, the field and the fix."""
        try:
            return json_float(value)
        except ValueError as e:
            file, fix = self._fix()
            raise ValueError(f"{file} field {where}.{key} is {json_short(value)}: {e}; {fix}") from None

    def _cost(self, where: str, key: str, value):
        """``value`` of ``probe.json``'s per-update cost ``where.key`` as it is, or ValueError naming the file, the
        field, what is accepted and the fix (:func:`gradprobe.outputs.per_update_problem`)."""
        why = per_update_problem(key, value)
        if why:
            file, fix = self._fix()
            raise ValueError(f"{file} field {where}.{key} {why}; {fix}")
        return value

    def _file(self, name: str) -> Path:
        if self.folder is None:
            raise ProbeFileError(f"this probe result has no folder, so no {name}; run gradprobe.probe(...) or "
                                 "read a `gradprobe probe --out DIR` folder with gradprobe.load_probe(DIR)")
        path = self.folder / name
        if not path.is_file():
            batches = sorted(p.name for p in self.folder.glob("batch_*") if p.is_dir())
            hint = (f"; this probe has {len(batches)} batches: read one with .batch(k) (files in "
                    f"{self.folder}/batch_K/)" if batches else
                    "; `gradprobe probe --out DIR` writes it (a study's probe/ folder keeps probe.json only)")
            raise ProbeFileError(f"{path} not found{hint}")
        return path

    def batch(self, k: int) -> ProbeResult:
        """Batch ``k``'s own result (``--probe-batches N`` > 1 and ``--checkpoints`` write ``batch_K/`` folders;
        with ``--checkpoints``, ``raw["batches"][k]["checkpoint"]`` names batch ``k``'s policy).

        Raises
        ------
        TypeError
            ``k`` is not an integer (``.batch(1)`` or a numpy integer, not ``.batch("1")`` or ``.batch(True)``).
        ProbeFileError
            No ``batch_k/probe.json`` in this probe's folder: the message names the batches it has (``batch_0`` ..),
            or says that a probe of one batch has no ``batch_K/`` folders (its own files are that batch).
        """
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):  # numpy's integers too (np.arange)
            raise TypeError(f"batch(k): k must be an integer batch number (0, 1, ...), got {k!r}")
        k = int(k)
        if self.folder is not None and not (self.folder / f"batch_{k}" / PROBE_JSON).is_file():
            have = sorted(int(p.name[6:]) for p in self.folder.glob("batch_*") if PROBE_BATCH_DIR.fullmatch(p.name)
                          and (p / PROBE_JSON).is_file())
            raise ProbeFileError(f"{self.folder / f'batch_{k}' / PROBE_JSON} not found: " + (
                f"this probe's batches are {', '.join(map(str, have))} (.batch(k) reads batch_k/)" if have else
                "this probe has no batch_K/ folders (one probe batch: this result's own files are that batch; "
                "`gradprobe probe --probe-batches N` with N > 1 writes one folder per batch)"))
        result = load_probe(self._file(f"batch_{k}/{PROBE_JSON}").parent)
        result._parent = self  # a temporary folder lives as long as any result reading it
        return result

    def _tensors(self) -> dict:
        if self._alignment is None:
            from safetensors.torch import load_file

            path = self._file(ALIGNMENT_SAFETENSORS)
            try:
                tensors = load_file(str(path))
            except Exception as e:  # SafetensorError (a truncated or foreign file), OSError
                raise damaged(path, f"{type(e).__name__}: {e}") from e
            for key in ("alignment", "completion_mask"):
                if key not in tensors:
                    raise damaged(path, f"it holds no {key!r} tensor")
            self._alignment = tensors
        return self._alignment

    @property
    def alignment(self):
        """Per-token alignment a_ijt = <grad log pi(y_ijt), u> (DESIGN.md, "The probe").

        Returns
        -------
        torch.Tensor
            Shape (N, T): N = B * G completions (row n is prompt n // G, completion n % G), T the
            longest completion (tokens); the model's dtype; 0 off the completion mask
            (:attr:`completion_mask`). Units: change of the token's log-probability per unit step
            along u. A new copy on each read: changing it in place (``a[~mask] = nan``) leaves the result's own.

        Raises
        ------
        ProbeFileError
            The folder holds no ``alignment.safetensors`` (a study's probe, or several probe
            batches: use :meth:`batch`).
        ValueError
            ``alignment.safetensors`` cannot be read (truncated, not a safetensors file): the message names it and
            the fix (re-run ``gradprobe probe --out DIR``; for a study's probe, resume the study).
        """
        return self._tensors()["alignment"].clone()

    @property
    def completion_mask(self):
        """torch.Tensor (N, T), bool: True on generated, non-pad tokens; a new copy on each read, as
        :attr:`alignment`. Raises as :attr:`alignment`."""
        return self._tensors()["completion_mask"].clone().bool()

    def advantages(self, reward: str):
        """Reward ``reward``'s per-token advantages A^R, torch.Tensor (N, T), float64, 0 off the mask; a new copy on
        each read, as :attr:`alignment`.

        Raises
        ------
        TypeError
            ``reward`` is not a string (the probed names are listed).
        KeyError
            ``reward`` was not probed (the probed names are listed, and one that differs from it only by case or
            spaces is suggested: ``Outcome`` -> ``outcome``).
        ProbeFileError, ValueError
            As :attr:`alignment`.
        """
        from ..probe.output import advantages_key  # torch is loaded by now: the tensors need it

        if not isinstance(reward, str):
            raise TypeError(f"advantages(reward): reward must be a probed reward's name, one of "
                            f"{_names_shown(self.rewards)}; got {reward!r}")

        key = advantages_key(reward)
        tensors = self._tensors()
        if key not in tensors:
            near = [n for n in self.rewards if _loose(n) == _loose(reward)]
            hint = f"; did you mean {near[0]!r}? (names match exactly: case and spaces count)" if near else ""
            raise KeyError(f"reward {reward!r} was not probed; probed: {_names_shown(self.rewards)}{hint}")
        return tensors[key].clone()

    def tokens(self):
        """Every completion token as a row (from ``tokens.jsonl``).

        Returns
        -------
        pandas.DataFrame
            Columns ``completion`` (row n of the batch, 0..N-1), ``prompt_id``, ``score`` (the
            verifier's reward of the completion), ``truncated``, ``position`` (t, 0-based token index
            in the completion), ``token`` (the vocabulary's piece), ``text`` (what the token adds to
            the decoded completion), ``alignment`` (a_t), and ``advantage_<reward>`` (A^R_t) per
            probed reward. A token's contribution to <g_R, u> is proportional to
            ``advantage_<reward> * alignment`` (up to the loss's per-token weight).

        Raises
        ------
        ProbeFileError
            The folder holds no ``tokens.jsonl``.
        ValueError
            ``tokens.jsonl`` is damaged (empty, a truncated line, a line without a token field, a ``score``,
            ``alignment`` or ``advantages`` value that is no number, e.g. ``true``: never read as 1 or 0): the
            message names the file, the line, the field and the fix (re-run ``gradprobe probe --out DIR``; for a
            study's probe, resume the study). Or it holds another number of completion lines than ``probe.json``'s
            ``batch.completions`` (a file cut at a line boundary: :func:`check_token_lines`, both counts named).
        """
        import pandas as pd

        records, lines = [], 0
        path = self._file(TOKENS_JSONL)
        with open(path, "rb") as f:
            for index, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = _jsonl_row(path, index, line)
                try:
                    records.extend(_token_records(row))
                except (KeyError, TypeError, IndexError, AttributeError) as e:
                    raise damaged(path, f"line {index} lacks a token field ({type(e).__name__}: {e})") from e
                except ValueError as e:  # a number field that holds none (true/false: never read as 1 or 0)
                    raise damaged(path, f"line {index}: {e}") from e
                lines += 1
        if not lines:  # the probe writes one line per completion of its batch (N >= 1): never an empty file
            raise damaged(path, "the file is empty: it holds no completion's line")
        check_token_lines(path, lines, expected_completions(self.raw))
        columns = list(dict.fromkeys(k for rec in records for k in rec))
        if not any(map(holds_surrogate, columns)):
            return pd.DataFrame.from_records(records)
        at = {k: i for i, k in enumerate(columns)}  # a reward name pandas' text labels cannot hold: columns by number
        frame = pd.DataFrame.from_records([{at[k]: v for k, v in rec.items()} for rec in records])
        frame.columns = pd.Index([columns[i] for i in frame.columns], dtype=object)
        return frame

    @naming_out("dir")  # its output fixes say "choose another dir", the argument, not --out
    def write(self, dir: str | Path) -> Path:
        """Copy the probe's files into ``dir``: what ``gradprobe probe --out dir`` writes (``probe.json``,
        ``report.html``, ``alignment.safetensors``, ``tokens.jsonl``, ``calibrated.json``, ``batch_K/`` for several
        batches: :data:`gradprobe.layout.PROBE_FILES`; other files of this probe's folder are not copied).

        ``dir`` is taken under the rules of ``gradprobe probe --out`` (the same checks,
        :func:`gradprobe.probe.output.replacing_earlier_probe`): a new or empty folder, a folder of other files (the
        copy goes beside them, never touching them), or an earlier probe's folder (one holding ``probe.json``),
        whose probe is then replaced whole: its files (a ``calibrated.json`` calibrated for other rewards, its
        ``batch_K/`` folders) are moved aside into ``dir/.earlier-probe`` while the copy is made, deleted once it is
        complete, and put back if it fails (a folder this call created is then removed again). Each file is copied to
        a temporary name then renamed, ``probe.json`` last, so an interrupted copy leaves no half-written file under a
        final name. Writing a probe into its own folder writes nothing. Returns ``dir`` as a Path, a leading ``~`` or
        ``~user`` expanded to that home folder as a shell expands it (:func:`gradprobe.outputs.home_path`).

        Raises
        ------
        OutputDirError (an OSError)
            ``dir`` cannot be created or written, is a file, or lies under a broken link or a symlink loop (errno
            ELOOP, :func:`gradprobe.outputs.refuse_file_in_the_way`), or holds another command's output or a model (a
            training run, a study, a study's probe, a tier or ``save_pretrained`` weights: the message names
            what and the fix, as ``gradprobe probe --out`` refuses it); or it holds files named as a probe's
            (a user's own ``report.html``, a ``tokens.jsonl``) but no ``probe.json``, so no earlier probe's, which
            the copy would overwrite (named, with the fix: another dir, or move them out); or its earlier probe's
            ``batch_K/`` folders also hold other files (named, with the fix); or the earlier probe's files cannot
            be moved aside. Nothing is written or moved then.
        ValueError, TypeError
            ``dir`` is empty (``''``: it would be the current folder) or not a path.
        ProbeFileError
            This result has no folder to copy from, or a folder of it holds only one of ``alignment.safetensors``
            and ``tokens.jsonl`` (one was deleted: the copy would be incomplete); nothing is written then.
        ValueError
            ``alignment.safetensors`` or ``tokens.jsonl`` is damaged (a truncated header, a line that is no JSON
            object: :func:`check_batch_file`); named with the fix, and nothing is written.

        A folder (or ``batch_K/``) holding neither file, as a study's probe kept with ``probe.json`` only, is copied
        as it is.

        Warns
        -----
        UserWarning
            One line per thing done to what a killed probe (or copy) left in ``dir`` (an earlier probe put back, its
            unfinished files and batch folders deleted: those it named in ``dir/.unfinished-probe.json``, a copy's
            ``report.html`` written before its ``probe.json`` too), naming the line that called this method.
        """
        # torch-bound: deferred (module docstring)
        from ..probe.output import _other_output, claim_probe_file, replacing_earlier_probe

        out = api_out(dir, "dir")  # a leading ~ is the home folder, as on the command line
        refuse_file_in_the_way(out)  # a file, a broken link or a symlink loop (which Path.resolve raises on) in the way
        other = _other_output(out, "dir")
        if other is not None:
            raise OutputDirError(errno.EEXIST, f"dir {str(out)!r} {other}")
        if self.folder is None:
            raise ProbeFileError("this probe result has no folder to copy; gradprobe.probe(..., out=DIR) writes one")
        if out.resolve() == self.folder.resolve():
            return prepare_output_dir(out)
        _refuse_own_parent(out, self.folder)
        top = self._file(PROBE_JSON)
        files = _copied_files(self.folder, top)
        _check_copy(files)  # before anything is written
        with replacing_earlier_probe(out, label="dir", batch_folders=_batch_folders(files, self.folder)):
            out = prepare_output_dir(out)
            for src in [*files, top]:  # probe.json last: it marks a complete folder
                dst = out / src.relative_to(self.folder)
                claim_probe_file(dst.parent, dst.name)  # named in the record (a batch_K: the folder) before it starts
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(dst.name + ".tmp")
                shutil.copyfile(src, tmp)
                tmp.replace(dst)
        return out


def _names_shown(names: list[str]) -> str:
    """``names`` joined with ", " for a message, each as the printed tables show it: control characters and lone
    surrogates escaped (:func:`gradprobe.tables.shown`) and bidirectional controls too
    (:func:`gradprobe.probe.table.bidi_escaped`: raw, U+202E would reverse the rest of the message)."""
    from ..probe.table import bidi_escaped  # torch-bound: the caller has loaded it

    return ", ".join(bidi_escaped(shown(n)) for n in names)


def _loose(name: str) -> str:
    """``name`` with case and runs of whitespace ignored (casefolded, words joined by one space): how a mistyped
    reward name (``Outcome``, ``outcome ``) is matched to a probed one for a hint, never for a lookup."""
    return " ".join(name.split()).casefold()


def _refuse_own_parent(out: Path, folder: Path) -> None:
    """Refuse to write the probe of ``folder`` into ``out`` when ``folder`` is one of the earlier probe's files
    there (``out/batch_K``, ``out/.earlier-probe/...``), or ``out`` one of ``folder``'s (``folder/batch_K``): the
    copy would move aside the files it is about to read.

    Raises
    ------
    OutputDirError (an OSError, errno EINVAL)
        Naming both folders and the fix (another dir, or copy the folder first); nothing is written or moved."""
    for inner, outer, what in ((folder, out, f"dir {str(out)!r} holds this probe's folder {str(folder)!r}"),
                               (out, folder, f"dir {str(out)!r} is a folder of this probe's own ({str(folder)!r})")):
        try:
            first = inner.resolve().relative_to(outer.resolve()).parts[0]
        except (ValueError, IndexError):  # not inside it (or the same folder: written over itself, handled)
            continue
        if PROBE_BATCH_DIR.fullmatch(first) or first == EARLIER_PROBE:
            raise OutputDirError(errno.EINVAL, (
                f"{what} as a file of a probe, which writing there would replace before reading it: choose another "
                "dir (or write the probe to another folder first and copy it from there); nothing was written"))


def _copied_files(folder: Path, top: Path) -> list[Path]:
    """The files of the probe in ``folder`` that :meth:`ProbeResult.write` copies besides ``top`` (its
    ``probe.json``), sorted: :data:`~gradprobe.layout.PROBE_FILES` there and in its ``batch_K/`` folders."""
    batches = [d for d in folder.iterdir() if PROBE_BATCH_DIR.fullmatch(d.name) and d.is_dir()]
    return sorted(p for d in [folder, *batches] for name in PROBE_FILES
                  if (p := d / name).is_file() and p != top)


def _check_copy(files: list[Path]) -> None:
    """Refuse to copy a probe whose batch files are incomplete or damaged: every folder among ``files`` that holds
    one of :data:`_BATCH_FILES` holds both, and each reads (:func:`check_batch_file`).

    Raises
    ------
    ProbeFileError
        One of the two is missing beside the other (named, with the fix).
    ValueError
        One is damaged (:func:`check_batch_file`).
    """
    for folder in sorted({p.parent for p in files if p.name in _BATCH_FILES}):
        for name in _BATCH_FILES:
            if not (folder / name).is_file():
                other = next(n for n in _BATCH_FILES if n != name)
                raise ProbeFileError(f"{folder / name} is missing beside {other}, so a copy would be incomplete and "
                                     f"nothing was written; {rerun_advice(folder)}")
        for name in _BATCH_FILES:
            check_batch_file(folder / name)


def check_costs(raw: dict, file: Path) -> None:
    """Refuse a ``probe.json`` (``raw``, read from ``file``) whose reward entries (``rewards[i]``, and each
    ``batches[k].rewards[i]``) hold a per-update cost that is no finite number > 0
    (:func:`gradprobe.outputs.per_update_problem`).

    Raises
    ------
    ValueError
        One line naming the file, the field (e.g. ``rewards[1].tokens_per_update``), what is accepted and the fix
        (:func:`rerun_advice`: re-run the probe, or for a study's probe resume the study).
    """
    places = [("", raw.get("rewards"))] + [(f"batches[{k}].", b.get("rewards")) for k, b in
                                           enumerate(raw.get("batches") or []) if isinstance(b, dict)]
    for prefix, rewards in places:
        for i, r in enumerate(rewards if isinstance(rewards, list) else []):
            for key in PER_UPDATE_FIELDS:
                why = per_update_problem(key, r.get(key)) if isinstance(r, dict) else None
                if why:
                    raise ValueError(f"{file} field {prefix}rewards[{i}].{key} {why}; {rerun_advice(file.parent)}")


def check_fields(raw: dict, file: str | Path, fix: str | None = None) -> None:
    """Refuse a ``probe.json`` (``raw``, read from ``file``) whose reward entry lacks a field the probe writes in
    every entry and the table or the forecast reads: :data:`_TABLE_FIELDS` in each top-level entry, and
    :data:`_FORECAST_FIELDS` (``per_group``, ``tokens_per_update``, ``predicted_gain_per_update``) in each
    top-level entry and in each entry of every batch the forecast reads (``batches[k].rewards[i]`` of a multi-batch
    probe.json). A ``rewards`` field is read in both forms the forecast reads
    (:func:`gradprobe.forecast.probe_input.check_entries`): a list of entries (the field named e.g.
    ``rewards[1].per_group``) or an object mapping name -> entry (named by its key, e.g.
    ``batches[0].rewards['mc_value'].tokens_per_update``). Fields an older gradprobe did not write
    (``signal_proxy``...) or writes as null without a bootstrap (``interval``, ``snr``) are not required.

    Parameters
    ----------
    raw : dict
        The probe result (a parsed ``probe.json``, or one held in memory).
    file : str or Path
        How the message names the file (``probe.json`` for a result held in memory).
    fix : str, optional
        The fix the message ends with; default :func:`rerun_advice` of ``file``'s folder (a result held in memory has
        no folder: its caller passes its own).

    Raises
    ------
    ValueError
        One line naming the file, the field (e.g. ``rewards[1].per_group``), that it is missing or null, what reads
        it and the fix (``fix``, else :func:`rerun_advice`).
    """
    batches = raw.get("batches")
    places = [("", raw.get("rewards"), {**_TABLE_FIELDS, **_FORECAST_FIELDS})]
    if isinstance(batches, list):
        places += [(f"batches[{k}].", b.get("rewards"), _FORECAST_FIELDS) for k, b in enumerate(batches)
                   if isinstance(b, dict)]
    for prefix, rewards, fields in places:
        keyed = enumerate(rewards) if isinstance(rewards, list) else rewards.items() if isinstance(rewards, dict) \
            else ()
        for key, r in keyed:
            for name, why in fields.items():
                if isinstance(r, dict) and r.get(name) is None:
                    where = f"{prefix}rewards[{key if isinstance(rewards, list) else repr(key)}].{name}"
                    raise missing_field(file, rerun_advice(Path(file).parent) if fix is None else fix, where,
                                        name in r, why)


def missing_field(file, fix: str, field: str, null: bool, why: tuple) -> ValueError:
    """The one-line ValueError of a field of probe.json (``file``) that the probe writes in every reward entry,
    missing (or null: ``null``): the field, who needs it and why (``why``: :data:`_TABLE_FIELDS`' pair), the fix."""
    return ValueError(f"{file} field {field} is {'null' if null else 'missing'}: {why[0]} ({why[1]}); {fix}")


def _batch_folders(files: list[Path], folder: Path) -> int:
    """How many ``batch_K`` folders (``batch_0`` .. ``batch_{n-1}``) a copy of ``files`` (paths under ``folder``)
    writes: one more than the largest K among them, 0 for none; what
    :func:`gradprobe.probe.output.replacing_earlier_probe` checks in the target folder before anything is copied (a
    link, a file or a user's folder of that name refused)."""
    tops = [p.relative_to(folder).parts for p in files]
    ks = [int(parts[0][len("batch_"):]) for parts in tops if len(parts) > 1 and PROBE_BATCH_DIR.fullmatch(parts[0])]
    return max(ks) + 1 if ks else 0


def _token_number(field: str, value) -> float:
    """``value`` of the numeric token field ``field`` as :func:`gradprobe.outputs.json_float` reads it (a number,
    null, ``"inf"``); ValueError naming the field otherwise (true/false: never read as 1 or 0, text, a list)."""
    try:
        return json_float(value)
    except ValueError as e:
        raise ValueError(f"field {field}: {e}") from None


def _token_records(row: dict) -> list[dict]:
    """The rows of :meth:`ProbeResult.tokens` of one line of ``tokens.jsonl`` (one completion). ValueError (the
    field named) for a ``row`` that is no integer, a ``truncated`` that is not true/false, or a ``score``,
    ``alignment`` or ``advantages`` value that is no number (:func:`_token_number`)."""
    adv = row.get("advantages") or {}
    if not is_json_number(row["row"], integer=True):
        raise ValueError(f"field row is {json_short(row['row'])}: it must be the completion's index (an integer)")
    if row.get("truncated") is not None and not isinstance(row["truncated"], bool):
        raise ValueError(f"field truncated is {json_short(row['truncated'])}: it must be true or false")
    score = _token_number("score", row.get("score"))
    records = []
    for t, (tok, text, a) in enumerate(zip(row["tokens"], row["texts"], row["alignment"])):
        rec = {"completion": row["row"], "prompt_id": row["prompt_id"], "score": score,
               "truncated": bool(row.get("truncated")), "position": t, "token": tok, "text": text,
               "alignment": _token_number(f"alignment[{t}]", a)}
        rec.update({f"advantage_{name}": _token_number(f"advantages.{surrogates_escaped(name)}[{t}]", values[t])
                    for name, values in adv.items()})
        records.append(rec)
    return records


def load_probe(dir: str | Path) -> ProbeResult:
    """Read a folder written by ``gradprobe probe --out DIR`` (or a study's ``probe/``).

    The one reader of ``probe.json``: calib reads probe results through it too (its
    :func:`calib.apply.load_probe` uses :attr:`~ProbeResult.raw` and :attr:`~ProbeResult.folder`).
    Reading checks what the table and the forecast read of the reward entries, so that :attr:`~ProbeResult.table`
    never shows an entry's number the forecast would refuse: the fields every entry holds (:data:`_TABLE_FIELDS`,
    and the forecast's ``per_group``, ``tokens_per_update`` and ``predicted_gain_per_update`` in each batch's
    entries) present and not null (:func:`check_fields`); the entries' settings and token counts against the file's
    ``config`` and batch records (:func:`gradprobe.forecast.probe_input.check_entry_inputs`: ``lr`` and budgets as
    ``config``'s, ``tokens_per_update`` as the batch's generated tokens give it); and the file as the forecast reads
    it (:func:`gradprobe.forecast.probe_input.probe_batches_of`: each entry's numbers and intervals, its summaries
    against its per-group lists, a multi-batch file's ``batches`` against its ``probe_batches`` and its pooled
    entries against its batches). Of the stored ``forecast`` section only the shape the table reads is checked (an
    object with a list of row objects, text arms, pairs for intervals: :meth:`ProbeResult._forecast_section`). The
    stored ``forecast`` section's numbers (``forecast_gain``, ``rho``, the verdict) are not checked against a
    forecast of the entries: that recompute (about 0.3 s) is ``calib apply``'s
    (``calib.probe_input.check_forecast_section``), so the table's forecast columns show the section as stored (and
    the table refuses, in one line, a forecast number that is no number).
    Reading imports :mod:`gradprobe.forecast.probe_input` (numpy, on the first read), never pandas, scipy or torch
    (``benchmarks/load_probe_import.py`` times the first read).

    Parameters
    ----------
    dir : path
        The folder, or its ``probe.json``. A path that does not exist and has no suffix is taken
        as a folder. A leading ``~`` or ``~user`` is that home folder, as in a shell
        (:func:`gradprobe.outputs.home_path`).

    Returns
    -------
    ProbeResult
        :attr:`~ProbeResult.raw` is the parsed ``probe.json``; :attr:`~ProbeResult.folder` the
        folder holding it. :attr:`~ProbeResult.alignment` and :meth:`~ProbeResult.tokens` read the
        folder's ``alignment.safetensors`` / ``tokens.jsonl`` on first use (absent in a study's probe).

    Raises
    ------
    ProbeFileError (a FileNotFoundError)
        No ``probe.json`` there: the message names the path that is missing (``dir`` itself when it
        does not exist, else ``dir/probe.json``), and the earlier probe a killed one left in
        ``dir/.earlier-probe/`` when there is one, and for a study's probe or guided arm's probe
        (:func:`gradprobe.layout.probe_study`, ``arms.json`` or not) the study's fix
        (:func:`gradprobe.layout.study_probe_advice`) rather than ``gradprobe probe --out``; or ``dir`` holds part
        of a probe (``.earlier-probe/manifest.json``: a probe was killed while moving the earlier probe's files,
        :mod:`gradprobe.probe.output`), named with the fix; or ``dir`` holds a probe killed before it was complete
        (its :data:`~gradprobe.layout.UNFINISHED_PROBE`: its ``probe.json`` may lack the forecast), with the fix; or
        ``dir`` holds that record and no ``probe.json`` (a probe killed before it wrote one, or one still running):
        said so, with the command that probes again.
    ValueError
        No probe.json at all: empty, ``calibrated.json`` or other JSON (what it is and the folder to pass named:
        :func:`_refuse_other_file`); ``probe.json`` is not valid
        JSON (a UTF-8 byte-order mark is read), or not a JSON object with a ``rewards`` list (named); a reward
        entry's ``tokens_per_update`` or ``seconds_per_update`` is no finite number > 0
        (:func:`check_costs`: the file, the field and the fix named); a field every entry holds is missing or null
        (:func:`check_fields`); an entry's ``lr``, budget or ``tokens_per_update`` the file's ``config`` or batch
        records contradict (:func:`gradprobe.forecast.probe_input.check_entry_inputs`); an entry's recorded summary
        its per-group lists contradict, a pooled entry its batches contradict (e.g. ``rewards[1].inner_product``
        after a tripled ``per_group``), a ``batches`` field its ``config.probe_batches`` contradicts, or a
        ``batches`` item that is no batch object (:func:`gradprobe.forecast.probe_input.probe_batches_of`: the file,
        the field, both values and the fix named); a ``forecast`` section of another shape than the table reads
        (:meth:`ProbeResult._forecast_section`); ``dir`` is empty. Each one line, with one fix derived from the
        folder (:func:`gradprobe.layout.rerun_advice`; for an entry edited or damaged after the probe wrote it
        :func:`gradprobe.layout.restore_advice`), a study's probe's (or guided arm's) the study's.
    TypeError
        ``dir`` is not a path (str or os.PathLike).
    """
    file = _probe_file(api_out(dir, "dir"))  # a leading ~ is the home folder
    raw = _read_probe(file)
    check_costs(raw, file)
    check_fields(raw, file)
    from ..forecast.probe_input import check_entry_inputs, probe_batches_of  # numpy: on the first read only

    check_entry_inputs(raw, source=file)  # the entries against the file's config and batch records
    probe_batches_of(raw, source=file)  # what the forecast checks: its table must not show numbers it would refuse
    result = ProbeResult(raw, file.parent)
    result._forecast_section()  # the section's shape as the table reads it (its numbers: calib apply's)
    return result


#: the ``"format"`` of gradprobe's other JSON files (a probe.json has none) -> what such a file is
_OTHER_FORMATS = {"gradprobe-calibrated": "the output of `calib apply` (calibrated.json)",
                  "gradprobe-calibration": "a calibration file (`calib fit`)",
                  "gradprobe.reference_curve": "a reference curve file (ReferenceCurve.save)"}

#: top-level keys of a probe.json, of which every probe.json holds ``config`` and ``rewards``
_PROBE_KEYS = ("config", "rewards")


def _read_probe(file: Path) -> dict:
    """``file`` read as :func:`gradprobe.outputs.read_probe_json` reads a probe.json (a UTF-8 byte-order mark read;
    one-line refusals ending in :func:`rerun_advice`), a file that is no probe.json at all refused first as what it
    is (:func:`_refuse_other_file`)."""
    try:
        raw = read_probe_json(file, rerun_advice(file.parent))
    except ValueError:
        _refuse_other_file(file, _json_or_none(file))  # an empty file or another file's JSON: no probe's
        raise
    _refuse_other_file(file, raw)
    return raw


def _json_or_none(file: Path):
    """``file`` parsed as JSON (a byte-order mark read), ``""`` for an empty or blank file, None when it cannot be
    read or parsed (its reader's own message says why)."""
    try:
        text = file.read_text(encoding="utf-8-sig")
        return json.loads(text) if text.strip() else ""
    except (OSError, ValueError):
        return None


def _refuse_other_file(file: Path, doc) -> None:
    """ValueError for a ``file`` :func:`load_probe` was given that is no probe.json at all, so that the "re-run
    gradprobe probe" of a damaged probe.json is not offered for it: an empty file, a JSON document with a
    ``"format"`` (gradprobe's other files, :data:`_OTHER_FORMATS`, write one; a probe.json none), one holding none
    of :data:`_PROBE_KEYS`, or a file of another name without ``config``. The message says what the file is and to
    pass the folder ``gradprobe probe --out`` wrote (the file's own folder when it holds a probe.json; for an empty
    probe.json, also how to write it again, :func:`rerun_advice`). A probe.json
    that holds ``config`` or ``rewards`` passes: its missing fields are its reader's to name."""
    if doc == "":
        what = "is empty"
    elif not isinstance(doc, dict):
        return
    elif isinstance(doc.get("format"), str):
        what = "is " + _OTHER_FORMATS.get(doc["format"], f'JSON of "format": {json_short(doc["format"])}')
    elif not any(k in doc for k in _PROBE_KEYS) or (file.name != PROBE_JSON and "config" not in doc):
        what = (f"is JSON without the {' and '.join(repr(k) for k in _PROBE_KEYS if k not in doc)} that every "
                "probe.json holds")
    else:
        return
    beside = file.parent / PROBE_JSON
    here = f" ({shell_word(file.parent)} holds one)" if beside != file and _has_bytes(beside) else ""
    again = f", or {rerun_advice(file.parent)}" if doc == "" and file.name == PROBE_JSON else ""
    raise ValueError(f"{file} {what}, not a probe.json of gradprobe probe: pass the folder that `gradprobe probe "
                     f"--out DIR` wrote (DIR holds its probe.json){here}{again}")


def _has_bytes(file: Path) -> bool:
    """Whether ``file`` is a file that is not empty."""
    try:
        return file.is_file() and file.stat().st_size > 0
    except OSError:
        return False


def _probe_file(path: Path) -> Path:
    """The ``probe.json`` :func:`load_probe` reads at ``path`` (a folder, or the file), or ProbeFileError as it
    documents (missing, with the study's fix for a study's probe; a killed probe's earlier files, its manifest or,
    without ``probe.json``, its record of what it was writing there)."""
    file = path / PROBE_JSON if path.is_dir() or (not path.exists() and not path.suffix) else path
    if not file.is_file():
        missing = file if path.exists() else path
        earlier = file.parent / EARLIER_PROBE / PROBE_JSON
        if earlier.is_file():  # a probe killed (SIGKILL) while it replaced this one: the earlier one is kept there
            raise ProbeFileError(f"{missing} not found: a probe was killed while it replaced the one in "
                                 f"{file.parent}, whose files are kept in {earlier.parent}; the next `gradprobe probe "
                                 f"--out {file.parent}` restores them first, or move them back by hand")
        owner = probe_study(file.parent)  # a study's probe (or guided arm's), killed or not: the study's fix
        if owner is not None:
            raise ProbeFileError(f"{missing} not found; {study_probe_advice(owner, file, missing=True)}")
        if os.path.lexists(file.parent / UNFINISHED_PROBE):  # a probe's record, no probe.json yet: killed or running
            raise ProbeFileError(f"{missing} not found: {file.parent} holds what a probe killed before it wrote "
                                 f"{PROBE_JSON} left (its {UNFINISHED_PROBE} is there), or a probe still running "
                                 f"there; once none runs, run `gradprobe probe --out {shell_word(file.parent)}` again "
                                 "(with the same settings), which replaces what it left")
        study = file.parent / "probe" / PROBE_JSON  # a study folder: its probe of the arms is in probe/
        hint = f" (a study folder: its probe is {study.parent})" if study.is_file() else ""
        raise ProbeFileError(f"{missing} not found; pass a `gradprobe probe --out` folder (it holds probe.json)"
                             + hint)
    if os.path.lexists(file.parent / UNFINISHED_PROBE):  # the record goes once a probe is complete
        raise ProbeFileError(f"{file.parent} holds a probe that was killed before it was complete (its "
                             f"{UNFINISHED_PROBE} is there, its {PROBE_JSON} may lack the forecast and report); run "
                             f"`gradprobe probe --out {shell_word(file.parent)}` again, which replaces what it left")
    if (file.parent / EARLIER_PROBE / EARLIER_MANIFEST).is_file():  # gradprobe.probe.output names the files moving
        raise ProbeFileError(f"{file.parent} holds part of a probe: a probe was killed while it moved the earlier "
                             f"probe's files between {file.parent} and {file.parent / EARLIER_PROBE} (its "
                             f"manifest.json names them); the next `gradprobe probe --out {file.parent}` puts them "
                             "back first, or move them back by hand")
    return file
