"""Bridges to other training libraries (imported lazily; ``import gradprobe`` never imports TRL).

- :mod:`gradprobe.integrations.trl_config`: ``gradprobe probe --trl-config FILE`` reads a TRL
  ``GRPOConfig`` (YAML or JSON) as probe options (the file read and checked against TRL by
  :mod:`gradprobe.integrations.trl_config_file`);
- :mod:`gradprobe.integrations.trl`: :class:`~gradprobe.integrations.trl.GradprobeCallback`, a
  ``transformers.TrainerCallback`` for TRL's ``GRPOTrainer`` that keeps a compute ledger of the
  run and probes the current policy every N steps (its token counting in
  :mod:`gradprobe.integrations.trl_tokens`, the probe's isolation from training in
  :mod:`gradprobe.integrations.trl_isolation`).
"""
