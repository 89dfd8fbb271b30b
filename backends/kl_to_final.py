"""KL to the final step, exactly: KL(p_final || p_t) of every position's sampling distribution at every step.

The final distribution of a block is known only once the block ends, and keeping every step's
vocabulary-sized distribution until then would cost a float32 distribution per step and row (256 MiB
each at the real 256 x 262,144).  The run is deterministic from its seed, so it runs twice:

    first = KlToFinal()                              # pass 1: keeps each block's final log p on the device
    with capture_steps(model, ..., to_final=first):  # (no records kept: `FirstPass.blocks` only)
        model.generate(...)
    second = first.second_pass()                     # pass 2: the KL of each step against those
    with capture_steps(model, emit, check_block(emit, first_blocks), ..., to_final=second):
        model.generate(...)                          # each CapturedStep carries kl_to_final_nats

Cost: a second pass of the whole run (2x its time; each step of pass 2 adds one log-softmax and one
weighted sum over the vocabulary), and one float32 distribution per block and row kept on the device from
pass 1 (256 MiB a block and row at the real shape), each freed when pass 2 has finished its block.
Exact, not approximate: the final step's KL is 0 exactly (the same logits through the same ops), and
`check_block` refuses the run in one line if pass 2 commits anything pass 1 did not (a run that is not
bit-identical from its seed would make the KL wrong, so it is never recorded then).

A row of a batch that converged early keeps its last active step's distribution as its final one: the
capture says which rows are still denoising (`rows`, set by `capture_steps`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .base import BackendError
from .captured import CapturedBlock


def log_probs(scores: torch.Tensor) -> torch.Tensor:
    """float32 log softmax of the processed logits: the one function both passes use (so the last step's KL is 0)."""
    return torch.log_softmax(scores.float(), dim=-1)


def kl_from(final_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """(batch, canvas) KL(p_final || p) in nats; p_final = 0 adds nothing, p = 0 where p_final > 0 is the
    largest float32 (a trace holds finite numbers only), as `logit_summary.shift_nats` does."""
    p = final_logp.exp()
    kl = torch.where(p == 0, 0.0, p * (final_logp - logp)).sum(dim=-1)
    return kl.clamp(min=0.0, max=torch.finfo(torch.float32).max)  # float32 sums of a KL of 0 can round below 0


class KlToFinal:
    """A pass-through logits processor, appended after the capture's recorder.  Pass 1 (no `finals`): keeps
    the latest log p of each row still denoising, and at each block's end that block's final one.  Pass 2
    (`second_pass()`): `kl` is each step's KL to the kept final distribution of its block."""

    def __init__(self, finals: list | None = None):
        self.first = finals is None
        self.finals: list = [] if finals is None else finals
        self.block = -1
        self.latest: torch.Tensor | None = None  # pass 1: (batch, canvas, vocab) float32
        self.kl: torch.Tensor | None = None  # pass 2: (batch, canvas) float32 at the last step
        self.rows: Callable[[], np.ndarray] = lambda: None  # the capture's rows still denoising (numpy bool)

    def start_block(self) -> None:
        self.block += 1
        self.latest = self.kl = None

    def end_block(self) -> None:
        if self.first:
            self.finals.append(self.latest)
        else:
            self.finals[self.block] = None  # pass 2 is done with it: freed block by block
        self.latest = None

    def second_pass(self) -> "KlToFinal":
        return KlToFinal(self.finals)

    def __call__(self, input_ids, scores, cur_step):  # LogitsProcessorList passes cur_step by name
        logp = log_probs(scores)
        if not self.first:
            self.kl = kl_from(self.finals[self.block], logp)
            return scores
        rows = self.rows()
        if self.latest is None or rows is None:
            self.latest = logp
        else:  # a converged row keeps the distribution of its last active step
            self.latest[torch.as_tensor(rows, device=logp.device)] = logp[torch.as_tensor(rows, device=logp.device)]
        return scores


def check_block(on_block: Callable[[CapturedBlock], None], first: list[CapturedBlock]) -> Callable[[CapturedBlock], None]:
    """`on_block` for pass 2, after checking each block commits what it committed in pass 1."""
    committed = {(b.row, b.block): b.tokens for b in first}

    def checked(block: CapturedBlock) -> None:
        tokens = committed.get((block.row, block.block))
        if tokens is None or not np.array_equal(tokens, block.tokens):
            raise BackendError(f"--kl-to-final: the second pass committed other tokens in block {block.block + 1} "
                               "than the first, so the run is not bit-identical from its seed here and its KL to the "
                               "final step would not be exact; run without --kl-to-final")
        on_block(block)

    return checked
