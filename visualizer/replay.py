"""Save a run for download, load one back from an upload, and list the shipped example runs.

A loaded trace replays exactly like the live run it was saved from (same frames, slider and
statistics): everything downstream is a pure function of the trace.  These helpers are what the
app's download, upload and examples call; they import no UI library.

    path = save_download(trace, folder)           # trace-acrostic-ocean-poem-20261121-2000.json
    trace = load_upload(uploaded_path)            # raises TraceError with a one-line message
    for path in example_traces(): ...             # assets/traces/*.json
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import trace_format
from .trace import Trace, TraceError

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "assets" / "traces"


def download_name(trace: Trace) -> str:
    """A safe file name saying what the run was: prompt words and creation time."""
    words = re.findall(r"[a-z0-9]+", trace.prompt.lower())[:5]
    stamp = re.sub(r"[^0-9]", "", trace.created)[:12]
    return "trace-" + "-".join(words or ["run"]) + (f"-{stamp[:8]}-{stamp[8:]}" if len(stamp) == 12 else "") + ".json"


def save_download(trace: Trace, folder) -> Path:
    """Write the trace into `folder` under `download_name` and return the path."""
    if trace.start is None:
        raise TraceError("nothing to save yet: the run has not started")
    return trace.save(Path(folder) / download_name(trace))


def load_upload(file) -> Trace:
    """The trace in an uploaded file: a path (str / Path), an object with a `.name` path (what
    upload widgets hand over), or the raw bytes.  Anything that is not a valid trace raises
    TraceError with a message for the user; nothing in the file is executed."""
    if file is None:
        raise TraceError("no file was uploaded")
    if isinstance(file, (bytes, bytearray)):
        return Trace.from_json(bytes(file))
    path = Path(getattr(file, "name", file) if not isinstance(file, (str, os.PathLike)) else file)
    try:
        size = path.stat().st_size
    except OSError:
        raise TraceError(f"cannot read the uploaded file {path.name}") from None
    if size == 0:
        raise TraceError(f"{path.name} is empty")
    limit = trace_format.MAX_TRACE_BYTES
    if size > limit:
        raise TraceError(f"{path.name} is {size / 1e6:.1f} MB; the limit is {limit / 1e6:.0f} MB")
    try:
        return Trace.load(path)
    except TraceError as exc:
        raise TraceError(f"{path.name}: {exc}") from None


def example_traces(folder: Path = EXAMPLES_DIR) -> list[Path]:
    """The shipped example runs, sorted by name."""
    return sorted(folder.glob("*.json")) if folder.is_dir() else []
