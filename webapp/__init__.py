"""The web UI: the Gradio app and what only it needs (the top layer, beside `cli/`; the only package that imports gradio).

    python app.py                # the root app.py: the Space's `app_file`, calls webapp.app.main
    python -m webapp             # the same

- `app.py`: `build_app` (the UI in panels) and `main` (the command line of `python app.py`)
- `app_run.py`: the shared loaded models, one run driven into a trace, ZeroGPU's worker, a sharded model's Leader
- `hosting.py`: hosted mode's policy (the allowlist, the caps, the check before the model queue)
- `sessions.py`: a tab's state, released when the tab closes
- `gradio_temp.py`: a Gradio cache folder of this process's own
"""

from . import zero_gpu  # noqa: F401  first: on ZeroGPU `spaces` must be imported before torch (zero_gpu.py)
