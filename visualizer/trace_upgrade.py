"""Old trace files brought to today's layout, so that the reader (`trace_format.parse_trace`) reads one version.

    data = upgrade(data, version)   # a new dict in version 5's layout; `data` itself is not changed

What each version changed, and what is done here to a file written before it:
- version 2 added the candidates (`record_topk`, `topk_ids`, `topk_probs`): nothing moves; a settings
  dict without `record_topk` recorded none (`trace_format.settings_of_run` reads it as 0, since a run's
  settings are kept as they were written).
- version 3 added `sampler_rule`: an older file gets the rule its writer used, from its (backend,
  sampler) pair (`samplers.legacy_rule`); a pair no writer made gets none, and the reader refuses it.
- version 4 added the layers, the shift and the pins: nothing moves (absent means off).
- version 5 moved a step's logit-lens top ids and probabilities into its block, beside the ranks: a
  version-4 file's steps give theirs to their block here.

Nothing here validates: the file is untrusted, so anything it does not recognise (a step that is not
an object, a block number that is not an integer) is left where it is for the reader to refuse with
its own message. A ValueError says what could not be moved; the reader turns it into a TraceError.
"""

from __future__ import annotations

from .samplers import legacy_rule

VERSION_4_LENS_FIELDS = ("lens_top_ids", "lens_top_probs")  # a step's lens, moved to its block in version 5


def upgrade(data: dict, version: int) -> dict:
    """`data`, a trace of `version`, in the current version's layout (raises ValueError)."""
    if version < 3:
        data = _with_legacy_rule(data)
    if version == 4:
        data = _lens_into_blocks(data)
    return data


def _with_legacy_rule(data: dict) -> dict:
    """A file from before version 3 with the accept rule its (backend, sampler) pair's writer used."""
    model, settings = data.get("model"), data.get("settings")
    if data.get("sampler_rule") is not None or not (isinstance(model, dict) and isinstance(settings, dict)):
        return data
    backend, sampler = model.get("backend"), settings.get("sampler")
    if not isinstance(backend, str) or not (sampler is None or isinstance(sampler, str)):
        return data
    rule = legacy_rule(backend, sampler)
    return data if rule is None else {**data, "sampler_rule": rule.to_dict()}


def _lens_into_blocks(data: dict) -> dict:
    """A version-4 file with layers: each step's lens top ids and probabilities gathered into its block,
    the steps grouped by block once (no blocks x steps scan for a hostile file)."""
    settings, steps, blocks = data.get("settings"), data.get("steps"), data.get("blocks")
    if not (isinstance(settings, dict) and settings.get("layers") and isinstance(steps, list) and isinstance(blocks, list)):
        return data
    of_block: dict[int, list[dict]] = {}
    new_steps = []
    for step in steps:
        if isinstance(step, dict):
            block = step.get("block")
            if isinstance(block, int) and not isinstance(block, bool):
                of_block.setdefault(block, []).append(step)
            step = {k: v for k, v in step.items() if k not in VERSION_4_LENS_FIELDS}
        new_steps.append(step)
    new_blocks = []
    for i, block in enumerate(blocks):
        if isinstance(block, dict):
            number = block.get("block")
            mine = of_block.get(number, []) if isinstance(number, int) and not isinstance(number, bool) else []
            block = {**block, **_lens_of_steps(mine, f"blocks[{i}]")}
        new_blocks.append(block)
    return {**data, "steps": new_steps, "blocks": new_blocks}


def _lens_of_steps(mine: list[dict], where: str) -> dict:
    """A block's lens top ids and probabilities, one entry per step, as version 5 keeps them in the block."""
    if not all(all(name in s for name in VERSION_4_LENS_FIELDS) for s in mine):
        raise ValueError(f"{where}: a version-4 step of this block has no lens_top_ids and lens_top_probs")
    return {name: [s[name] for s in mine] for name in VERSION_4_LENS_FIELDS}
