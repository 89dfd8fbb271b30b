"""A recording's progress on stderr: a tqdm bar per block on a terminal, one line per block when piped.

    progress = RunProgress(sys.stderr)
    trace = record_trace(backend, prompt, settings, on_record=progress)
    progress.close()

Piped into a log, a bar redrawn with carriage returns is one very long line; a line per committed
block says the same and reads as a log.
"""

from __future__ import annotations

from visualizer.records import BlockRecord, Record, RunStart, StepRecord


class RunProgress:
    """`on_record` for `record_trace`: the blocks as they denoise and commit (counted from 1, as the app counts)."""

    def __init__(self, stream, *, label: str = ""):
        self.stream, self.label = stream, f"{label}: " if label else ""
        self.live = stream.isatty()
        self.blocks, self.budget, self.bar = 0, None, None

    def __call__(self, record: Record) -> None:
        if isinstance(record, RunStart):
            self.blocks, self.budget = record.max_blocks, record.settings.get("max_denoising_steps")
        elif isinstance(record, StepRecord) and self.live:
            if self.bar is None:
                self.bar = self._bar(record.block)
            self.bar.update(1)
            self.bar.set_postfix_str(f"{int(record.accepted.sum())} accepted", refresh=False)
        elif isinstance(record, BlockRecord):
            said = f"{self.label}block {record.block + 1}/{self.blocks} committed after {record.steps_used} steps " \
                   f"({record.stop_reason})"
            if self.bar is not None:
                self.bar.set_description_str(said, refresh=False)
                self.bar.set_postfix_str("")
                self.close()
            else:
                print(said, file=self.stream, flush=True)

    def _bar(self, block: int):
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread (as the probe's bar): a finished run leaves no thread behind
        return tqdm(total=self.budget, desc=f"{self.label}block {block + 1}/{self.blocks}", unit="step",
                    file=self.stream, dynamic_ncols=True, leave=True)

    def close(self) -> None:
        """End the bar of a block that did not commit (a stop or an error): its line stays as it was."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
