"""Watch DiffusionGemma denoise in the browser: the Space's `app_file`, and `python app.py`.

    python app.py [--model M] [--port N] [--host H] [--hosted] [--parallel KIND]   # webapp/serve.py's `main`

The web UI lives in the `webapp` package; this file only starts it.
"""

import webapp  # noqa: F401  first: on ZeroGPU `spaces` must be imported before torch (webapp/zero_gpu.py)
from webapp.serve import main

if __name__ == "__main__":
    main()
