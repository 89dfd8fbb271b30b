"""What a sharded run's lockstep vote raises (`sharded_server.agreed`, `capture_steps(agree=...)`).

Apart from the sharded server so that the single-process capture (`capture.py`), which raises
FailedInStep at a vote, does not import the server that runs the vote.
"""

from __future__ import annotations

from .base import BackendError

RANKS_DISAGREE = (
    "The ranks' canvases differ: the GPUs computed different numbers for the parts every rank runs whole, so the "
    "sharded model is no longer one model. The run stopped here; its steps so far are kept. docs/sharded.md "
    "(\"Ranks that disagree\") says why this can happen."
)


class FailedInStep(Exception):
    """A sharded run's error, held by the capture until every rank had agreed to stop at the same
    step (`capture_steps(..., agree=agreed)`), then raised from it (`__cause__`): the other ranks left
    their `generate` at that same point and are ready for the next request."""


class RanksDisagree(FailedInStep, BackendError):
    """The ranks of a sharded model hold different canvases at a step (`agreed`).

    Raised on every rank at the same vote, so they all leave `generate` there (in step, as
    FailedInStep says) and the message is shown as is (a BackendError, which the followers expect)."""
