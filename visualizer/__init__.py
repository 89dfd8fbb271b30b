"""Trace data, states, metrics, rendering, export and the CLI of the DiffusionGemma visualizer.

Nothing in this package imports torch, mlx or gradio: it works on step records alone, so a saved
trace replays exactly like a live run.  Backends live in `backends/`, the web UI in `webapp/`.
"""
