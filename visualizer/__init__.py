"""Trace data, states, metrics, rendering and export of the DiffusionGemma visualizer: the library.

The command line is `cli/` (`python -m visualizer` is its historical name: `__main__.py` alone reaches it).

Nothing in this package imports torch, mlx or gradio: it works on step records alone, so a saved
trace replays exactly like a live run.  Backends live in `backends/`, the web UI in `webapp/`.
"""
