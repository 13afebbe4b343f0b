"""The rich Console the commands print tables with."""

from __future__ import annotations

import sys

from rich.console import Console


class _Console(Console):
    """A Console whose closed pipe is the command's, not rich's: rich's own answer is a quiet
    exit 1, which reads as the program failing; main() ends every command the same way instead."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def console(piped_width: int) -> Console:
    """A terminal's own width; piped output (CI logs) gets one that fits the table, not 80 columns."""
    return _Console(highlight=False, width=None if sys.stdout.isatty() else piped_width)
