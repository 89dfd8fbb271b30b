"""The reference decoder of the live view's wire format (`visualizer.live_stream`), in Python.

`visualizer/static/live_view.js` draws what it decodes in the browser; this class decodes the same
lines the same way, so the tests can check that decoding a live log reproduces `frame_state` at
every frame, and read what a client of the app received. Only the tests use it today; it stays beside the
encoder because it is the format's executable specification in Python (a client written in Python, a
benchmark of what a browser receives, would read the stream with it), not test scaffolding:

    decoder = LiveState()
    decoder.read(replay_log(trace))              # a whole log, line by line
    applied = decoder.read_value(ring_value)     # one live-view value, as the browser reads it
    decoder.states, decoder.tokens, decoder.changed, decoder.thought   # (blocks, canvas) arrays
"""

from __future__ import annotations

import json

import numpy as np

from .live_stream import CHANGED_FLAG, THOUGHT_FLAG


class LiveState:
    """Reads a live log line by line and holds the canvas the browser would show."""

    def __init__(self):
        self.states = self.tokens = self.changed = self.thought = None
        self.pieces: dict[int, dict] = {}
        self.frames = 0
        self.ended = None
        self._start = None

    def apply(self, line: str) -> None:
        message = json.loads(line)
        kind = message["type"]
        if kind == "start":
            shape = (message["blocks"], message["canvas"])
            self.states = np.zeros(shape, dtype=np.uint8)
            self.tokens = np.full(shape, -1, dtype=np.int32)
            self.changed = np.zeros(shape, dtype=bool)
            self.thought = np.zeros(shape, dtype=bool)
        elif kind == "frame":
            if message["i"] != self.frames and not message.get("key"):
                raise ValueError(f"frame {message['i']} does not follow frame {self.frames - 1}")
            cells = np.array(message["cells"], dtype=np.int64).reshape(-1, 4)
            flat = cells[:, 0]
            self.states.reshape(-1)[flat] = cells[:, 1]
            self.tokens.reshape(-1)[flat] = cells[:, 2]
            self.changed.reshape(-1)[flat] = (cells[:, 3] & CHANGED_FLAG).astype(bool)
            self.thought.reshape(-1)[flat] = (cells[:, 3] & THOUGHT_FLAG).astype(bool)
            self.pieces.update({int(k): v for k, v in message.get("tokens", {}).items()})
            self.frames = message["i"] + 1
        elif kind == "end":
            self.ended = message

    def read(self, log: str) -> None:
        for line in log.splitlines():
            if line:
                self.apply(line)

    def read_value(self, value: list[str]) -> list[int]:
        """One live-view value (a `LiveRing` or `replay_value`), read as the browser reads it: the
        frames not yet applied, in order, from the next one or else from the newest key frame at
        or after it.  Returns the frame indexes applied."""
        if self.states is None or value[0] != self._start:
            self.__init__()
            self.apply(value[0])
            self._start = value[0]
        frames = sorted((json.loads(line) for line in value[2:] if line), key=lambda m: m["i"])
        applied = []
        for m in frames:
            if m["i"] < self.frames:
                continue
            if m["i"] == self.frames or m.get("key"):
                self.apply(json.dumps(m))
                applied.append(m["i"])
        if value[1]:
            self.apply(value[1])
        return applied
