"""Prompt difficulty: predicted success per prompt, and selection of prompts nearest 1/2 (issue 5)."""
