"""Prompts the project ships: the six structured demo prompts and the probe suite."""
