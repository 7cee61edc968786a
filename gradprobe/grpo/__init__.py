"""GRPO advantages, losses and the update step, as pure functions chosen from registries."""

from .advantages import group_normalize, SCALES
from .losses import LOSS_TYPES, token_weights, policy_loss

__all__ = ["group_normalize", "SCALES", "LOSS_TYPES", "token_weights", "policy_loss"]
