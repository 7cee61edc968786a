"""Preregistered matched-compute studies: many arms and seeds of a plan under one budget (issue 3)."""
