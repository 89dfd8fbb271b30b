"""Release a browser session's run, files and temporary folder as soon as the session ends.

    SESSIONS = SessionRegistry()
    SESSIONS.register(request, session)     # from a handler (or validator) that receives gr.Request
    demo.unload(SESSIONS.release)           # Gradio calls it when the tab closes or the client goes

Gradio itself keeps a closed session's `gr.State` for an hour before its `delete_callback` runs;
a public server with many short visits would hold every trace and download that long.  The
registry maps Gradio's session hash to the session's state object so `demo.unload` can free it
at once (the state's own `delete_callback` and time-to-live remain the fallback).
"""

from __future__ import annotations

import threading

import gradio as gr


class SessionRegistry:
    def __init__(self):
        self._sessions: dict[str, object] = {}
        self._lock = threading.Lock()

    def register(self, request: gr.Request, session) -> None:
        session_hash = getattr(request, "session_hash", None)
        if session_hash and session is not None:
            with self._lock:
                self._sessions[session_hash] = session

    def release(self, request: gr.Request) -> None:
        """Close the session that `request` belongs to (its `close()` frees what it holds)."""
        with self._lock:
            session = self._sessions.pop(getattr(request, "session_hash", None) or "", None)
        if session is not None:
            session.close()

    def __len__(self) -> int:
        return len(self._sessions)
