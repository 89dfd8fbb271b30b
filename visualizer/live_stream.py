"""The live view's wire format: a run as small JSON lines, one per frame, that the browser draws.

Shipping every step as server-rendered HTML costs ~250 KB and 20-50 ms of server CPU per frame
for a 4-block run.  Instead the server encodes each frame as one short JSON line, and the
browser (`visualizer/static/live_view.js`) keeps the canvas state and draws it:

    encoder = LiveEncoder(trace)             # after RunStart was appended
    ring = LiveRing(encoder.start_line())    # layout, palettes, names: sent once
    ... trace.append(record) ...
    ring.add(encoder.frame_lines())          # one line per new frame, only what changed
    yield ring.value()                       # the app's one streaming output
    ring.add(encoder.end_line())             # finish, committed text, the text layout
    value = replay_value(trace)              # a saved trace: every frame in one value

A frame line holds the cells whose state, token or flags differ from the previous frame (as flat
index, state, token id, flags: 1 resampled to a new token this step, 2 a token of the thinking
channel), the text of token ids not sent before, the step's
entropies (float16, base64), its step-to-step KL where the run recorded the shift (float16, base64:
the heatmap's KL layer), and argmax changes for tooltips, the caption, and the commit-order
panel's numbers: the readout values and one chart point.  Every `key_every` frames a key frame
carries every cell and the text of every token it shows, so a reader can (re)start there.

Why a ring (`LiveRing`): Gradio sends a list output as per-element diffs, so only the slots of new
frames travel; its front end keeps only the newest value when several arrive together, and the
browser reads every slot it has not read, so it loses no frame unless it falls a whole ring
behind; and the value never grows with the run, so no update costs more as the run goes on.

A run's panel values are those of its live frames: on a block's last step a live run still reads
the argmax (the block record has not arrived), a saved trace reads the committed block.

The browser's decoder is `static/live_view.js`; `visualizer.live_decode.LiveState` decodes the
same way in Python, for the tests.  Nothing here imports a UI library.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math

import numpy as np

from .readout import (READOUT_CONTROL_TIP, READOUT_TAU_TIP, SENTENCE_CONTROL, SENTENCE_TAU, SENTENCE_UNDEFINED, fmt,
                      order_words, readout_heading, readout_rows)
from .layout import NARROW_TEXT_COLUMNS, PAD_GLYPH, EOS_GLYPH, Layout, display_text, grid_layout, pinned_positions, text_layout, text_slot_text
from .metrics import live_readouts
from .metrics.commits import step_budget
from .metrics.order import Undefined
from .insight_charts import structure_first_svg
from .palette import LEGEND, PAD_LABEL, PALETTES, RESAMPLED_LABEL, THOUGHT_BAND_PX, THOUGHT_LABEL
from .records import FINISH_CANCELLED
from .render_html import frame_caption
from .states import FrameRef, State, frame_refs, frame_state
from .trace import Trace
from .thinking import run_thought_mask

RING = 32  # frame slots in the live value: a browser may fall this many frames behind and lose none
KEY_EVERY = RING // 2  # so the slots always hold a key frame to restart from
FORMAT = 2  # 2: the fourth number of a cell holds flags (1 changed, 2 thought), not just "changed"
CHANGED_FLAG, THOUGHT_FLAG = 1, 2


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def _number(value) -> float | None:
    return None if isinstance(value, Undefined) or value is None or not math.isfinite(value) else round(float(value), 4)


def layout_message(layout: Layout) -> dict:
    """A layout as plain numbers: the (row, col, width) of every cell, block-major, and the headers."""
    cells = np.array([(c.row, c.col, c.width) for c in layout.cells], dtype=np.int64).reshape(-1)
    return {"kind": layout.kind, "rows": layout.rows, "columns": layout.columns, "cells": cells.tolist(),
            "headers": [list(h) for h in layout.headers]}


def token_entry(trace: Trace, token: int) -> dict:
    """What the browser needs to show a token id: its piece (tooltips), the text of its cell in the
    grid and in the text layout when they differ from the piece, and whether it is EOS / pad.
    Same decisions as `layout.paint`, which the Pillow and HTML renderers draw."""
    model, piece = trace.model, trace.piece(token)
    eos, pad = token in model.eos_token_ids, token == model.pad_token_id
    grid = PAD_GLYPH if pad else display_text(piece)
    text = (EOS_GLYPH if eos else PAD_GLYPH) if (eos or pad) else text_slot_text(piece)
    entry = {"p": piece}
    if grid != piece:
        entry["g"] = grid
    if text != grid:
        entry["x"] = text
    if eos or pad:
        entry["s"] = 1
    return entry


def palettes_message() -> dict:
    out = {}
    for name, p in PALETTES.items():
        out[name] = {
            "background": p.background, "foreground": p.foreground, "muted": p.muted, "rule": p.rule,
            "mark": p.mark, "special": p.special, "pin": p.pin,
            "states": [list(p.colors(state)) for state in State],  # indexed by State code
            "thought": list(p.thought),  # (committed text tint, band under the cell)
        }
    return out


def _entropy_b64(values: np.ndarray) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f2").tobytes()).decode("ascii")


class LiveEncoder:
    """Turns a trace, as it grows, into the live log's lines (see the module docstring)."""

    def __init__(self, trace: Trace, *, key_every: int = KEY_EVERY, run: str = ""):
        if trace.start is None:
            raise ValueError("the trace has no RunStart yet")
        self.trace, self.key_every = trace, key_every
        self.run = run  # the run's token: the browser sends it back with each "why" ask (webapp's RunSession.run_id)
        self.refs: list[FrameRef] = []
        self.sent_tokens: set[int] = set()
        shape = (trace.max_blocks, trace.canvas_length)
        self.states = np.zeros(shape, dtype=np.uint8)  # what the browser holds after the last line
        self.tokens = np.full(shape, -1, dtype=np.int32)
        self.flags = np.zeros(shape, dtype=np.uint8)
        self.argmax: np.ndarray | None = None  # argmax of the previous step of the current block
        self.argmax_block = -1

    def start_line(self) -> str:
        trace = self.trace
        settings = trace.start.settings
        return _dumps({
            "type": "start", "format": FORMAT, "run": self.run, "created": trace.created, "prompt": trace.prompt,
            "model": trace.model.name, "canvas": trace.canvas_length, "blocks": trace.max_blocks,
            "budget": step_budget(trace), "seed": settings.get("seed"),
            "log_max": math.log10(max(math.log(trace.model.vocab_size), 1e-2)),
            "layout": layout_message(grid_layout(trace.max_blocks, trace.canvas_length)),
            "palettes": palettes_message(), "legend": [[int(s), label] for s, label in LEGEND],
            "resampled_label": RESAMPLED_LABEL, "pad_glyph": PAD_GLYPH, "pad_label": PAD_LABEL,
            "thought_label": THOUGHT_LABEL, "thought_band": THOUGHT_BAND_PX, "thinking": bool(settings.get("thinking")),
            "states": [s.name.lower() for s in State],
            "pins": sorted(pinned_positions(trace)),  # the first block's pinned positions: a bar left of the cell
            "shift": bool(settings.get("record_shift")),  # the frames carry the step-to-step KL ("kl")
            "to_final": bool(settings.get("kl_to_final")),  # the frames carry the KL to the final step ("klf")
            "layers": bool(settings.get("layers")),  # the run recorded layers: the view asks for their panel once a block commits
            "readout": dict(zip(("names", "tips"), _readout_labels()), tau_tip=READOUT_TAU_TIP, control_tip=READOUT_CONTROL_TIP,
                            sentence=[SENTENCE_TAU, SENTENCE_UNDEFINED, SENTENCE_CONTROL]),
        })

    def frame_lines(self) -> str:
        """Lines for the frames that appeared since the last call ("" when none)."""
        refs = frame_refs(self.trace)
        # A commit frame can be inserted before later steps only when its block record arrives
        # after them, which backends never do; encode only frames past those already sent.
        new = refs[len(self.refs):]
        self.refs = refs
        return "".join(self._frame(len(refs) - len(new) + i, refs) for i in range(len(new)))

    def end_line(self) -> str:
        trace, end = self.trace, self.trace.end
        message = {"type": "end", "frames": len(self.refs)}
        if end is not None:
            message.update(finish=end.finish_reason, text=end.text, error=end.error)
            if end.finish_reason == FINISH_CANCELLED:  # the status line's end, in place of the last step's budget
                message["stopped"] = stopped_line(trace)
        if trace.steps and end is not None:
            layout = text_layout(trace)
            message["text_layout"] = layout_message(layout)
            # the same text at a phone's width, which the browser takes when its frame is narrow (live_view.js)
            message["text_layout_narrow"] = layout_message(text_layout(trace, columns=NARROW_TEXT_COLUMNS))
            # the structure-first figure of the finished run (server-made SVG, its text escaped)
            message["structure_svg"] = structure_first_svg(trace, width=720)  # wide enough for its title
            if run_thought_mask(trace).any():  # the same with the thought tokens counted, for the browser's switch
                message["structure_svg_with_thoughts"] = structure_first_svg(trace, width=720, include_thought=True)
        return _dumps(message)

    # ---- one frame -------------------------------------------------------------------------
    def _frame(self, index: int, refs: list[FrameRef]) -> str:
        trace = self.trace
        frame = frame_state(trace, index, refs)
        blocks = frame.states.shape[0]
        if blocks > self.states.shape[0]:  # never for a valid run; kept so a bad trace cannot crash the view
            grow = blocks - self.states.shape[0]
            self.states = np.vstack([self.states, np.zeros((grow, trace.canvas_length), np.uint8)])
            self.tokens = np.vstack([self.tokens, np.full((grow, trace.canvas_length), -1, np.int32)])
            self.flags = np.vstack([self.flags, np.zeros((grow, trace.canvas_length), np.uint8)])
        key = index % self.key_every == 0
        flags = cell_flags(frame)
        diff = (
            np.ones(self.states.size, dtype=bool) if key
            else ((frame.states != self.states) | (frame.token_ids != self.tokens) | (flags != self.flags)).reshape(-1)
        )
        where = np.flatnonzero(diff)
        states, tokens = frame.states.reshape(-1), frame.token_ids.reshape(-1)
        cells = np.stack([where, states[where], tokens[where], flags.reshape(-1)[where]], axis=1).reshape(-1)
        self.states, self.tokens, self.flags = frame.states.copy(), frame.token_ids.copy(), flags

        ref = refs[index]
        message: dict = {"type": "frame", "i": index, "kind": ref.kind, "block": ref.block, "cells": cells.tolist()}
        if key:
            message["key"] = 1
        shown = set(tokens[where].tolist())
        if ref.kind == "step":
            step = trace.steps[ref.index]
            message["ms"] = round(step.wall_time_s * 1000, 1)
            message["entropy"] = _entropy_b64(step.entropy_nats)
            if step.kl_nats is not None:  # the shift, for the heatmap's KL layer (none at a block's first step)
                message["kl"] = _entropy_b64(step.kl_nats)
            if step.kl_to_final_nats is not None:  # record --kl-to-final: the heatmap's third layer
                message["klf"] = _entropy_b64(step.kl_to_final_nats)
            if self.argmax_block != ref.block or self.argmax is None or key:
                changes = np.arange(trace.canvas_length)
            else:
                changes = np.flatnonzero(step.argmax != self.argmax)
            message["argmax"] = np.stack([changes, step.argmax[changes]], axis=1).reshape(-1).tolist()
            shown.update(step.argmax[changes].tolist())
            self.argmax, self.argmax_block = step.argmax, ref.block
        # a key frame carries the text of every token it shows, so a reader can start there; and the
        # frames after it count as sent only what was sent since, so a reader that started there
        # gets the text of a token it missed before the key frame (tests/test_browser.py)
        fresh = sorted(t for t in shown if t >= 0 and (key or t not in self.sent_tokens))
        if key:
            self.sent_tokens = set()
        if fresh:
            message["tokens"] = {str(t): token_entry(trace, t) for t in fresh}
            self.sent_tokens.update(fresh)
        message["caption"] = frame_caption(trace, frame)
        message.update(self._panel(index, refs))
        return _dumps(message)

    def _panel(self, index: int, refs: list[FrameRef]) -> dict:
        """The commit-order panel's numbers at one frame: readout values and one chart point, of
        the answer's positions (the status says so when thought tokens were left out).  Where the
        block holds thought tokens, the same with them counted rides along ("with_thoughts"), so
        the browser switches between the two without asking the server."""
        answer, with_thoughts = live_readouts(self.trace, index, refs=refs)
        panel = _panel_values(answer)
        if with_thoughts is not None:
            panel["with_thoughts"] = _panel_values(with_thoughts)
        return panel


def stopped_line(trace: Trace) -> str:
    """Where a stopped run stopped, for the status line: "Stopped at step 8 of 48 in block 1" (that the recorded steps
    are kept is said once, beside Stop: `webapp.views.end_message`)."""
    if not trace.steps:
        return "Stopped before the first step"
    last = trace.steps[-1]  # its step budget: steps_remaining counts down from it, `last.step` steps after the first
    return f"Stopped at step {last.step + 1} of {last.step + last.steps_remaining} in block {last.block + 1}"


def _panel_values(r) -> dict:
    where, status = readout_heading(r)
    point = [_number(r.tau_b), _number(r.control_tau_b), r.committed, r.measured_length, r.new_commits, r.remasked_now]
    return {
        "readout": {"where": where, "status": status, "tau": fmt(r.tau_b), "control": fmt(r.control_tau_b),
                    "reason": r.tau_b.reason if isinstance(r.tau_b, Undefined) else "",
                    "order": "" if isinstance(r.tau_b, Undefined) else order_words(r.tau_b),
                    "values": [value for _, value, _ in readout_rows(r)]},
        "point": point, "final": int(r.final), "pending": r.pending,
    }


def cell_flags(frame) -> np.ndarray:
    """(blocks, canvas) uint8: CHANGED_FLAG where resampled this step, THOUGHT_FLAG on thinking-channel tokens."""
    flags = frame.changed.astype(np.uint8) * CHANGED_FLAG
    if frame.thought is not None:
        flags |= frame.thought.astype(np.uint8) * THOUGHT_FLAG
    return flags


def _readout_labels() -> tuple[list[str], list[str]]:
    """The readout's row names and tooltips, sent once: any readout has the same (a blank one here)."""
    from .metrics.live import Readout

    blank = {}
    for f in dataclasses.fields(Readout):
        kind = str(f.type)
        blank[f.name] = "step" if f.name == "kind" else () if "tuple" in kind else False if "bool" in kind else (
            0 if kind == "int" else Undefined("-"))
    rows = readout_rows(Readout(**blank))
    return [name for name, _, _ in rows], [tip for _, _, tip in rows]


def replay_log(trace: Trace, *, run: str = "") -> str:
    """The whole live log of a recorded trace: what a live run of it would have sent."""
    encoder = LiveEncoder(trace, run=run)
    return encoder.start_line() + encoder.frame_lines() + encoder.end_line()


def frame_index(line: str) -> int:
    """The frame index of a frame line, read without parsing the line (they start alike)."""
    head = line[: line.index(",", len(_FRAME_HEAD))]
    if not head.startswith(_FRAME_HEAD):
        raise ValueError("not a frame line")
    return int(head[len(_FRAME_HEAD):])


_FRAME_HEAD = '{"type":"frame","i":'


class LiveRing:
    """The live view's value during a run: [start line, end line, RING frame slots].

    Frame i sits in slot i % RING.  Gradio sends a list output as per-element diffs, so a yield
    costs the wire only the slots that changed; the browser reads every slot it has not read, so
    updates it receives together (Gradio's front end keeps only the newest value) lose no frame
    unless it fell more than RING frames behind, and then it restarts at a key frame.  The value
    never grows past RING frames, so neither side pays per update for the whole run.
    """

    def __init__(self, start_line: str, size: int = RING):
        self.slots = [start_line.rstrip("\n"), ""] + [""] * size
        self.size = size

    def add(self, lines: str) -> None:
        for line in lines.splitlines():
            if line.startswith(_FRAME_HEAD):
                self.slots[2 + frame_index(line) % self.size] = line
            elif line.startswith('{"type":"end"'):
                self.slots[1] = line

    def value(self) -> list[str]:
        return list(self.slots)  # a new list each time: Gradio diffs it against the last one

    def closed(self) -> list[str]:
        """The value to end a run with: start and end lines, frame slots emptied.  Gradio sends a
        run's last value once more in full when it completes, so this keeps that message small;
        a browser that missed frames asks for `replay_value` instead (the view's "need_frames")."""
        return self.slots[:2] + [""] * self.size


def replay_value(trace: Trace, *, run: str = "") -> list[str]:
    """A recorded trace as one live-view value: [start, end, every frame] (the replay package)."""
    lines = replay_log(trace, run=run).splitlines()
    return [lines[0], lines[-1], *lines[1:-1]]
