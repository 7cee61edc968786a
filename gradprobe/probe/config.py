"""What defines a probe run: :class:`ProbeConfig` (saved in ``probe.json["config"]``) and its defaults.

The config and its stages live in the torch-free :mod:`gradprobe.probe_settings` (the command line reads
its defaults there without loading torch); this module re-exports them, with the registries of
reference kinds and preconditioners (:mod:`gradprobe.config`).
"""

from __future__ import annotations

from ..config import PRECONDITIONER_KINDS, PRECONDITIONERS, REFERENCE_KINDS, REFERENCES
from ..probe_settings import (DEFAULT_TASK, SETTINGS, STAGES, BatchSettings, BudgetSettings, ModelSettings,
                              ProbeConfig, ReferenceSettings, RunSettings, TaskSettings, UpdateSettings, config_dict,
                              setting_names)

__all__ = ["ProbeConfig", "DEFAULT_TASK", "REFERENCES", "PRECONDITIONERS", "REFERENCE_KINDS", "PRECONDITIONER_KINDS",
           "config_dict", "ModelSettings", "TaskSettings", "BatchSettings", "ReferenceSettings", "UpdateSettings",
           "BudgetSettings", "RunSettings", "STAGES", "SETTINGS", "setting_names"]
