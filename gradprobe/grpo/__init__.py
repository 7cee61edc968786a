"""GRPO advantages, losses and the update step, as pure functions chosen from registries."""

from .advantages import DEFAULT_SCALE, SCALES, check_scale, group_normalize
from .losses import LOSS_TYPES, token_weights, policy_loss

__all__ = ["group_normalize", "SCALES", "DEFAULT_SCALE", "check_scale", "LOSS_TYPES", "token_weights", "policy_loss"]
