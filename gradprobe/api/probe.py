"""``gradprobe.probe(...)`` and ``gradprobe.load_probe(dir)``: the probe as a typed result.

:func:`probe` does what ``gradprobe probe`` does (:func:`gradprobe.probe.batches.run_probe_batches`,
the forecast section of :func:`gradprobe.forecast.forecast_section`, ``probe.json`` and
``report.html``) and returns a :class:`ProbeResult` instead of printing: a DataFrame per reward
(:attr:`ProbeResult.table`), the per-token alignment a_ijt (:attr:`ProbeResult.alignment`, shape
(N, T)) and the tokens with every reward's advantage (:meth:`ProbeResult.tokens`). A folder written by
``gradprobe probe --out DIR`` reads back with :func:`load_probe`.

Importing this module imports neither torch nor pandas (they load on first use).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import shutil
import tempfile
import weakref
from pathlib import Path

__all__ = ["ProbeResult", "probe", "load_probe", "ProbeFileError"]

PROBE_JSON = "probe.json"
ALIGNMENT_FILE = "alignment.safetensors"
TOKENS_FILE = "tokens.jsonl"


class ProbeFileError(FileNotFoundError):
    """A probe folder lacks a file (the message names it and the command that writes it)."""


def _num(v) -> float:
    """probe.json's encoding back to floats: None -> NaN, "inf"/"-inf" -> +-inf."""
    return float("nan") if v is None else float(v)


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
        cfg = self.raw.get("config") or {}
        names = [r["name"] for r in self.raw.get("rewards", [])]
        return (f"ProbeResult(model={cfg.get('model')!r}, task={cfg.get('task')!r}, rewards={names}, "
                f"batch={cfg.get('prompts')}x{cfg.get('group')}, folder={str(self.folder) if self.folder else None!r})")

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
          (the RAW extrapolation, without diminishing returns: expected to overestimate).

        With a forecast (``probe.json``'s ``forecast`` section available: a reference curve was
        given or the model has a shipped one; DESIGN.md, "Forecast"), also:
        ``forecast_gain`` (accuracy points vs grpo at the budget), ``forecast_gain_low``/``_high``
        (its interval), ``forecast_accuracy`` (points), ``rho`` (efficiency ratio
        <g_R, u> / <g_outcome, u> shrunk by its SNR), ``rho_raw``, ``rho_low``/``rho_high``,
        ``rho_snr``, ``effective_updates`` (n_R = (T / c_R) rho_R, updates), ``gain_probe``,
        ``gain_cost_only``, ``gain_signal_proxy`` (each forecaster's gain, points), ``method`` and
        ``verdict`` (text).

        Returns
        -------
        pandas.DataFrame
            Shape (R, columns), R = number of probed rewards; NaN where probe.json has null.
        """
        import pandas as pd

        rows = {}
        for r in self.raw["rewards"]:
            lo, hi = r.get("interval") or (None, None)
            rows[r["name"]] = {
                "inner_product": _num(r["inner_product"]), "inner_product_low": _num(lo),
                "inner_product_high": _num(hi), "snr": _num(r.get("snr")),
                "gain_per_update": _num(r["predicted_gain_per_update"]),
                "tokens_per_update": int(r["tokens_per_update"]),
                "gain_at_budget": _num(r["predicted_gain_at_budget"])}
        fc = self.raw.get("forecast") or {}
        if fc.get("available"):
            for f in fc["rows"]:
                name = f.get("arm") or f.get("reward")
                if name not in rows:
                    continue
                glo, ghi = f.get("gain_interval") or (None, None)
                rlo, rhi = f.get("rho_interval") or (None, None)
                rows[name].update(
                    forecast_gain=_num(f.get("forecast_gain")), forecast_gain_low=_num(glo),
                    forecast_gain_high=_num(ghi), forecast_accuracy=_num(f.get("forecast_accuracy")),
                    rho=_num(f.get("rho")), rho_raw=_num(f.get("rho_raw")), rho_low=_num(rlo), rho_high=_num(rhi),
                    rho_snr=_num(f.get("snr")), effective_updates=_num(f.get("effective_updates")),
                    gain_probe=_num(f.get("gain_probe")), gain_cost_only=_num(f.get("gain_cost_only")),
                    gain_signal_proxy=_num(f.get("gain_signal_proxy")), method=f.get("method"),
                    verdict=f.get("verdict"))
        table = pd.DataFrame.from_dict(rows, orient="index")
        table.index.name = "reward"
        return table

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
        """Batch ``k``'s own result (``--probe-batches N`` > 1 writes ``batch_K/`` folders).

        Raises
        ------
        ProbeFileError
            No ``batch_k/probe.json`` in this probe's folder.
        """
        result = load_probe(self._file(f"batch_{int(k)}/{PROBE_JSON}").parent)
        result._parent = self  # a temporary folder lives as long as any result reading it
        return result

    def _tensors(self) -> dict:
        if self._alignment is None:
            from safetensors.torch import load_file

            self._alignment = load_file(str(self._file(ALIGNMENT_FILE)))
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
            along u.

        Raises
        ------
        ProbeFileError
            The folder holds no ``alignment.safetensors`` (a study's probe, or several probe
            batches: use :meth:`batch`).
        """
        return self._tensors()["alignment"]

    @property
    def completion_mask(self):
        """torch.Tensor (N, T), bool: True on generated, non-pad tokens. Raises as :attr:`alignment`."""
        return self._tensors()["completion_mask"].bool()

    def advantages(self, reward: str):
        """Reward ``reward``'s per-token advantages A^R, torch.Tensor (N, T), float64, 0 off the mask.

        Raises
        ------
        KeyError
            ``reward`` was not probed (the probed names are listed).
        ProbeFileError
            As :attr:`alignment`.
        """
        key = f"advantages.{reward}"
        tensors = self._tensors()
        if key not in tensors:
            raise KeyError(f"reward {reward!r} was not probed; probed: {', '.join(self.rewards)}")
        return tensors[key]

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
        """
        import pandas as pd

        records = []
        with open(self._file(TOKENS_FILE)) as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                adv = row.get("advantages") or {}
                for t, (tok, text, a) in enumerate(zip(row["tokens"], row["texts"], row["alignment"])):
                    rec = {"completion": row["row"], "prompt_id": row["prompt_id"], "score": _num(row.get("score")),
                           "truncated": bool(row.get("truncated")), "position": t, "token": tok, "text": text,
                           "alignment": a}
                    rec.update({f"advantage_{name}": values[t] for name, values in adv.items()})
                    records.append(rec)
        return pd.DataFrame.from_records(records)

    def write(self, dir: str | Path) -> Path:
        """Copy the probe's files into ``dir``: what ``gradprobe probe --out dir`` writes (``probe.json``,
        ``report.html``, ``alignment.safetensors``, ``tokens.jsonl``, ``batch_K/`` for several batches).

        Each file is copied to a temporary name then renamed, so an interrupted copy leaves no
        half-written file under a final name. Returns ``dir`` as a Path.

        Raises
        ------
        OutputDirError (an OSError)
            ``dir`` cannot be created or written (names the path).
        ProbeFileError
            This result has no folder to copy from.
        """
        from ..outputs import prepare_output_dir

        out = prepare_output_dir(Path(dir))
        if self.folder is None:
            raise ProbeFileError("this probe result has no folder to copy; gradprobe.probe(..., out=DIR) writes one")
        if out.resolve() == self.folder.resolve():
            return out
        top = self._file(PROBE_JSON)
        files = [p for p in sorted(self.folder.rglob("*")) if p.is_file() and p != top and not p.name.endswith(".tmp")]
        for src in [*files, top]:  # probe.json last: it marks a complete folder
            dst = out / src.relative_to(self.folder)
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(dst.name + ".tmp")
            shutil.copyfile(src, tmp)
            tmp.replace(dst)
        return out


def load_probe(dir: str | Path) -> ProbeResult:
    """Read a folder written by ``gradprobe probe --out DIR`` (or a study's ``probe/``).

    The one reader of ``probe.json``: calib reads probe results through it too (its
    :func:`calib.apply.load_probe` uses :attr:`~ProbeResult.raw` and :attr:`~ProbeResult.folder`).
    Reading builds the object only: neither torch nor pandas is imported.

    Parameters
    ----------
    dir : path
        The folder, or its ``probe.json``. A path that does not exist and has no suffix is taken
        as a folder.

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
        does not exist, else ``dir/probe.json``).
    ValueError
        ``probe.json`` is not valid JSON, or not a JSON object with a ``rewards`` list (named).
    """
    path = Path(dir)
    file = path / PROBE_JSON if path.is_dir() or (not path.exists() and not path.suffix) else path
    if not file.is_file():
        missing = file if path.exists() else path
        raise ProbeFileError(f"{missing} not found; pass a `gradprobe probe --out` folder (it holds probe.json)")
    try:
        raw = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{file} is not valid JSON ({e}); re-run `gradprobe probe`") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("rewards"), list):
        raise ValueError(f"{file} has no 'rewards' list: not a probe.json of gradprobe probe")
    return ProbeResult(raw, file.parent)


def _extra_reward(item, index: int) -> tuple[str, object]:
    """(name, Reward) of a non-string entry of ``rewards``."""
    from ..rewards import sequence_reward

    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and callable(item[1]):
        return item
    if callable(item):
        params = list(inspect.signature(item).parameters)
        if params[:1] == ["batch"]:
            raise ValueError(f"rewards[{index}] is a token-level Reward (batch, ctx): pass it as (name, reward), or "
                             "register it with gradprobe.register_reward(name) and pass the name")
        name = getattr(item, "__name__", None)
        if not name or name == "<lambda>":
            raise ValueError(f"rewards[{index}] has no name (a lambda): pass (name, sequence_reward(fn)) or a def")
        return name, sequence_reward(item, name=name)
    raise ValueError(f"rewards[{index}] = {item!r}: expected a registered reward name (str), a TRL-style function "
                     "f(prompts, completions, **columns) -> list[float | None], or a (name, Reward) pair")


def _probe_config(model: str, task: str, names: tuple, settings: dict):
    """A ProbeConfig from flat keyword settings (ProbeConfig, SamplingConfig and MCConfig field names)."""
    from ..config import MCConfig, SamplingConfig
    from ..probe.run import ProbeConfig

    base = ProbeConfig()
    own = {f.name for f in dataclasses.fields(ProbeConfig)} - {"model", "task", "rewards", "sampling", "mc"}
    samp = {f.name for f in dataclasses.fields(SamplingConfig)}
    mc = {f.name for f in dataclasses.fields(MCConfig)}
    unknown = sorted(set(settings) - own - samp - mc - {"sampling", "mc"})
    if unknown:
        raise ValueError(f"unknown probe setting(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(sorted(own | samp | mc | {'sampling', 'mc'}))}")
    sampling = settings.get("sampling") or base.sampling
    sampling = dataclasses.replace(sampling, **{k: v for k, v in settings.items() if k in samp})
    mc_config = settings.get("mc") or base.mc
    mc_config = dataclasses.replace(mc_config, **{k: v for k, v in settings.items() if k in mc})
    return ProbeConfig(model=model, task=task, rewards=names, sampling=sampling, mc=mc_config,
                       **{k: v for k, v in settings.items() if k in own})


def probe(model: str = "tiny", task=None, rewards=("outcome", "mc_value", "hybrid_0.5"), *, out=None,
          probe_batches: int = 1, reference_curve=None, forecaster: str = "auto", **settings) -> ProbeResult:
    """Probe rewards on one batch: per-token alignment with a reference update, gains, forecast.

    The same computation and files as ``gradprobe probe`` (README, "The probe command"; DESIGN.md,
    "The probe"): B x G rollouts, each reward's per-token advantages A^R (N, T), one forward-mode
    pass for the alignment a (N, T), <g_R, u> = (1/Z_R) sum A^R a per reward, the raw first-order
    gains, and the forecast vs grpo read off a reference learning curve.

    Parameters
    ----------
    model : str
        ``tiny`` (the shipped tier), an alias (``smollm2-135m``, ``tiny-qwen2``, ``tiny-llama``), a
        folder, a ``.gguf`` file or a hub id (:func:`gradprobe.models.load_policy`).
    task : str, optional
        A task spec (:func:`gradprobe.tasks.load_task`); default the tiny tier's frontier task.
    rewards : sequence
        Each a registered reward name (``gradprobe.rewards.REWARDS``), a TRL-style function
        ``f(prompts, completions, **columns) -> list[float | None]`` (wrapped with
        :func:`gradprobe.sequence_reward`, named after the function), or a ``(name, Reward)`` pair.
        All are probed in the same single alignment pass. ``outcome`` must be among them for a
        forecast (a gain vs grpo).
    out : path, optional
        Output folder (``probe.json``, ``report.html``, ``alignment.safetensors``, ``tokens.jsonl``;
        checked writable before any compute). Default: a temporary folder that lives as long as the
        result (:meth:`ProbeResult.write` copies it).
    probe_batches : int
        N probe batches on disjoint prompts sharing one reference direction (``--probe-batches``).
    reference_curve : str or path, optional
        grpo's accuracy-vs-updates curve for the forecast (``--reference-curve``: ``default``, a
        study folder, a metrics.jsonl, a CSV...); default: the model's shipped curve, if any.
    forecaster : {"auto", "probe", "cost_only", "signal_proxy"}
    **settings
        Any :class:`gradprobe.probe.run.ProbeConfig` field (``prompts`` B, ``group`` G,
        ``heldout_prompts``, ``heldout_group``, ``lr``, ``loss_type``, ``budget_tokens`` (tokens),
        ``budget_seconds`` (device-seconds), ``precondition``, ``seed``, ``n_bootstrap``,
        ``progress``...), any :class:`gradprobe.config.SamplingConfig` field (``max_new_tokens``,
        ``temperature``, ``backend``...) or :class:`gradprobe.config.MCConfig` field
        (``continuations`` K, ``max_steps``), or ``sampling=`` / ``mc=`` objects.

    Returns
    -------
    ProbeResult

    Raises
    ------
    ValueError
        An unknown setting (the valid names are listed), a bad value (the field is named), an
        unknown reward, model or task, a reward that produced non-finite advantages.
    OSError
        ``out`` cannot be written (before any compute).
    gradprobe.forecast.curves.CurveError
        ``reference_curve`` names nothing readable (before any compute; a ValueError).
    """
    from ..forecast import forecast_section, load_reference_curve
    from ..probe.batches import run_probe_batches
    from ..probe.report_html import write_probe_report
    from ..probe.run import DEFAULT_TASK, _json_safe
    from ..outputs import write_json_atomic

    if isinstance(rewards, str):
        rewards = [r.strip() for r in rewards.split(",") if r.strip()]
    names = tuple(r for r in rewards if isinstance(r, str))
    extra = dict(_extra_reward(r, i) for i, r in enumerate(rewards) if not isinstance(r, str))
    config = _probe_config(model, task or DEFAULT_TASK, names, settings)  # refuses bad settings before compute
    curve = load_reference_curve(reference_curve) if reference_curve else None
    temporary = out is None
    folder = Path(tempfile.mkdtemp(prefix="gradprobe_probe_")) if temporary else Path(out)
    try:
        result = run_probe_batches(config, batches=probe_batches, out=folder, extra_rewards=extra or None)
        result["forecast"] = forecast_section(result, curve=curve, curve_spec=reference_curve, method=forecaster)
        write_json_atomic(folder / PROBE_JSON, _json_safe(result))
        write_probe_report(folder, result)  # off-screen figures: a notebook's backend is left alone
    except BaseException:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return ProbeResult(json.loads((folder / PROBE_JSON).read_text()), folder, _temporary=temporary)
