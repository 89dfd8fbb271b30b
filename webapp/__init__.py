"""The web UI: the Gradio app and what only it needs (the top layer, beside `cli/`; the only package that imports gradio).

    python app.py                # the root app.py: the Space's `app_file`, calls webapp.serve.main
    python -m webapp             # the same

- `app.py`: `build_app`: the UI in panels, its handlers (`Handlers`) and its wiring
- `knob_widgets.py`: the knobs' widgets from the knob table, and their values read back as settings
- `why_views.py`: the why-views (a token's alternatives, the accept budget, layers, structure first), the pin row
- `compare_runs.py`: two runs pinned as A and B, stepped together, exported as one GIF
- `views.py`: what a run shows as plain values (a frame drawn on the server, the end message, the committed text)
- `serve.py`: `main` (the command line of `python app.py`), Gradio's queue as the app runs it, torchrun's exits
- `app_run.py`: the shared loaded models, one run driven into a trace, ZeroGPU's worker, a sharded model's Leader
- `hosting.py`: hosted mode's policy (the allowlist, the caps, the check before the model queue)
- `sessions.py`: a tab's state, released when the tab closes
- `gradio_temp.py`: a Gradio cache folder of this process's own
"""

from . import zero_gpu  # noqa: F401  first: on ZeroGPU `spaces` must be imported before torch (zero_gpu.py)
