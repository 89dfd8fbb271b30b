"""Commit-order numbers of one block for the evaluation tables, read off `visualizer.metrics`.

The definitions are the metrics package's (the commit-order study's): commit step = first
acceptance, content = positions before the block's first EOS (the trailing EOS run commits first
and would swamp the order), tau_b = scipy's tie-aware Kendall tau_b of commit step against
position; a content position the sampler never accepted is committed from the argmax at the end.

    trace = record_trace(backend, prompt, settings)       # backends.run
    stats = block_stats(trace, 0)      # {"tau_b": 0.41, "tokens_per_step": 9.5, ...}
"""

from __future__ import annotations

import math

from visualizer.metrics import block_commits, block_metrics, is_defined
from visualizer.trace import Trace


def block_stats(trace: Trace, block: int = 0) -> dict:
    metrics = block_metrics(trace, block)
    content, steps = metrics.content_length, metrics.steps_used
    remasks = block_commits(trace, block).remask_events
    return {
        "steps_used": steps,
        "content_tokens": content,
        "tokens_per_step": content / steps if steps else math.nan,  # per denoising step, not per accept step
        "max_new_per_step": max(metrics.commits_per_step + [metrics.committed_at_finalize]) if content else 0,
        "steps_with_new": metrics.accept_steps,
        "tau_b": float(metrics.tau_b) if is_defined(metrics.tau_b) else math.nan,
        "remasked": int((remasks[:, 1] < content).sum()) if len(remasks) else 0,  # re-mask events on content
        "never_accepted": metrics.committed_at_finalize,
        "stop_reason": metrics.stop_reason,
    }
