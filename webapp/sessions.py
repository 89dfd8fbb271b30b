"""A browser session's state (`RunSession`), and its release as soon as the session ends.

    session = gr.State(RunSession(), time_to_live=SESSION_TTL_S, delete_callback=RunSession.close)
    demo.load(SESSIONS.register, session)   # every tab, when its page loads (gr.Request names it)
    demo.unload(SESSIONS.release)           # Gradio calls it when the tab closes or the client goes

Gradio keeps a closed session's `gr.State` for an hour before its `delete_callback` runs (and a
State no handler ever returned has no time-to-live at all); a public server with many short
visits would hold every trace and download that long.  The registry maps Gradio's session hash
to the session's state object, so `demo.unload` frees it at once, whatever the tab did: generate,
load a trace, replay, export, or nothing.  An API client loads no page: its session is
registered by its first generate request instead (`hosting.generate_validator`), or by its first
trace load (`app.load_trace_file`).

The State's value is an instance, never the class: Gradio gives a State whose value is callable a
page-load event of its own that writes a new value, which raced `register` on the same load (the
registry kept an object the State then dropped, so closing the tab freed an empty session and
left the trace and downloads for the hour).  With an instance, Gradio deep-copies it
(`__deepcopy__`: a fresh RunSession) the first time any event of the session reads the State, and
every later event, the validator included, gets that same object.  The instance is a template
that lives as long as the app, so a RunSession makes its downloads folder only on first use.
"""

from __future__ import annotations

import tempfile
import threading
import uuid

import gradio as gr

from visualizer.run_tree import ROOT, RunTree
from visualizer.trace import Trace


class RunSession:
    """One browser session's run: the trace being recorded or replayed, and its stop flag."""

    def __init__(self):
        self.trace: Trace | None = None
        # A token of the run on screen, new with every run or loaded trace (`show`): the live view sends it back
        # with each "why" ask, so an ask about an earlier run is never answered over the new run's panels.
        self.run_id = ""
        self.shown_file = None  # the uploaded file the run on screen came from (`show`), None for a run made here
        self.loaded_now = False  # the last `/load_trace` call showed a new trace (its `after_load` follows it)
        self.running = False
        self.error = ""  # why the last Generate did not start, shown by the run's message
        self.stop = threading.Event()
        self.compare: list[Trace | None] = [None, None]  # runs A and B of the comparison
        # the session's runs as a tree ("Fork here", fork_panel.py): a new run or loaded trace is the root, each
        # branch a run of its own, by its tree name; `run_name` is the one on screen
        self.tree, self.runs, self.run_name = RunTree(), {}, ""
        self._files: tempfile.TemporaryDirectory | None = None  # downloads, made by `files`
        self._files_lock = threading.Lock()

    def __deepcopy__(self, memo):  # gr.State deep-copies initial values; each session gets a fresh one
        return RunSession()

    def show(self, trace: Trace, name: str | None = None, file: str | None = None) -> None:
        """Make `trace` the session's run, under a new token (set first: an ask that read the old token
        and then the new trace is caught by its check after the answer, `webapp.why_views.event_view`).
        Without `name` it is a new root (the tree starts over); with one, that run of the tree (a branch, or
        a run switched back to). `file` is the uploaded file it came from, if any."""
        self.run_id = uuid.uuid4().hex[:12]
        self.trace = trace
        self.shown_file = file
        if name is None:
            self.tree, self.runs, name = RunTree().add_root(), {}, ROOT
        self.runs[name], self.run_name = trace, name

    @property
    def files(self) -> tempfile.TemporaryDirectory:
        """The session's downloads folder, made on first use (gr.State's template and its copies,
        which live as long as the app, never make one); `close` removes it."""
        with self._files_lock:  # two handlers of one session at once share one folder
            if self._files is None:
                self._files = tempfile.TemporaryDirectory(prefix="dv-session-")
            return self._files

    def close(self) -> None:
        """The session ended: stop its run, drop its traces and delete its downloads folder."""
        self.stop.set()
        self.trace, self.compare = None, [None, None]
        self.tree, self.runs = RunTree(), {}
        with self._files_lock:
            if self._files is not None:
                self._files.cleanup()


class SessionRegistry:
    def __init__(self):
        self._sessions: dict[str, object] = {}
        self._lock = threading.Lock()

    def register(self, session, request: gr.Request) -> None:
        """Remember `session` under the request's session hash (again: no change)."""
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

    def __contains__(self, session_hash: str) -> bool:
        return session_hash in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)
