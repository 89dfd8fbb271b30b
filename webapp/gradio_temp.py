"""Give each app process its own Gradio cache folder, so no other app can delete its files.

    own_gradio_temp_dir()  # before the first Gradio component is built (app.build_app does it)

Gradio caches every file it serves (the example traces included) under one folder for the whole
machine, `GRADIO_TEMP_DIR` or `<system temp>/gradio`, keyed by content: two apps serving the same
example share one copy. A hosted app (`delete_cache`) deletes the files it cached when it closes,
and with them the copy the other app is still serving ("cannot read the uploaded file story.json").
A folder of its own per process, inside the one the user chose, ends that. Gradio reads the
variable when a component is built (`Block.GRADIO_CACHE`) and when the server starts
(`App.uploaded_file_dir`), so it is set before either; the folder goes when the process exits.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

GRADIO_TEMP_ENV = "GRADIO_TEMP_DIR"


def own_gradio_temp_dir() -> Path:
    """Point GRADIO_TEMP_DIR at this process's own folder (made at the first call) and return it."""
    folder = _process_folder()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[GRADIO_TEMP_ENV] = str(folder)
    return folder


@functools.cache  # once per process: every app the process builds shares its folder
def _process_folder() -> Path:
    """A new folder inside the one in use until now (the user's GRADIO_TEMP_DIR or Gradio's default)."""
    base = Path(os.environ.get(GRADIO_TEMP_ENV) or Path(tempfile.gettempdir()) / "gradio")
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"app-{os.getpid()}-", dir=base))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
