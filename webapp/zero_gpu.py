"""ZeroGPU's `spaces`, imported before torch: the one import-order rule of the web UI.

On a ZeroGPU Space, `spaces` must be imported before anything imports torch (it prepares CUDA for the
lent GPU).  `webapp/__init__.py` imports this module first, so importing any part of the web UI
(`webapp.app`, the root `app.py`) meets the rule; the root `app.py` imports `webapp` before anything else.
Off ZeroGPU, `spaces.GPU` is a no-op itself, and without the package `on_gpu` passes functions through.
"""

from __future__ import annotations

try:
    import spaces
except ImportError:
    spaces = None


def on_gpu(duration: int):
    """`spaces.GPU(duration=...)` where the `spaces` package is installed; a plain pass-through elsewhere."""
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)
