"""Say quickly whether a model source can be loaded, without loading it.

    problem = source_problem("google/diffusiongemma-26B-A4B-it")   # None, or one line saying why not

The app asks this before a request joins the shared model queue, so an unknown id or a missing
folder is answered in about a second and never holds the queue.  Loading itself (transformers'
`from_pretrained`) retries an unreachable hub for tens of seconds; this check makes at most one
short HEAD request per id, honours `HF_HUB_OFFLINE`, and remembers its answers for a while so a
burst of identical requests costs one request, not a storm.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from .known import looks_like_path

HEAD_TIMEOUT_S = 1.5  # one HEAD; the whole answer stays under 2 s
REMEMBER_FAILURE_S = 60.0  # an unreachable or unknown id is asked about again after this
_answers: dict[str, tuple[float, str | None]] = {}  # source -> (when, problem or None)
_lock = threading.Lock()


def source_problem(source: str, *, timeout: float = HEAD_TIMEOUT_S) -> str | None:
    """None when `source` is a local model folder, a cached hub model, or a hub model that exists;
    otherwise one line for the user."""
    if not isinstance(source, str) or not source.strip():
        return "No model was picked."
    source = source.strip()
    folder = Path(source).expanduser()
    if folder.is_dir():
        return None if (folder / "config.json").is_file() else f"{source} is a folder but holds no model (no config.json)."
    if looks_like_path(source):
        return f"No model folder at {source}."
    with _lock:
        answer = _answers.get(source)
    if answer is not None and (answer[1] is None or time.monotonic() - answer[0] < REMEMBER_FAILURE_S):
        return answer[1]
    problem = _hub_problem(source, timeout)
    with _lock:
        _answers[source] = (time.monotonic(), problem)
    return problem


def _hub_problem(repo_id: str, timeout: float) -> str | None:
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return f"{repo_id[:100]!r} is neither a model folder here nor a Hugging Face model id (owner/name)."
    if isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
        return None  # downloaded before: loads without the network
    if constants.is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return f"{repo_id} is not in the local model cache and the Hugging Face Hub is switched off here (HF_HUB_OFFLINE)."
    try:
        endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT  # a mirror, where one is configured
        url = hf_hub_url(repo_id, "config.json", endpoint=endpoint)
        get_hf_file_metadata(url, timeout=timeout, retry_on_errors=False)  # one HEAD, no retries
    except GatedRepoError:
        return f"{repo_id} is gated on the Hugging Face Hub: accept its licence and log in (hf auth login) first."
    except (RepositoryNotFoundError, RevisionNotFoundError):
        return f"No model {repo_id} on the Hugging Face Hub (or it is private)."
    except EntryNotFoundError:
        return f"{repo_id} on the Hugging Face Hub has no config.json: it is not a transformers model."
    except Exception as exc:  # timeouts, DNS, refused connections: the hub is not reachable from here
        return f"Could not reach the Hugging Face Hub to find {repo_id} ({type(exc).__name__})."
    return None


def forget_answers() -> None:
    """Drop remembered answers (tests; or after the network came back)."""
    with _lock:
        _answers.clear()
