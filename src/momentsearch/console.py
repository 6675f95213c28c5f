"""What long work says as it goes (``progress=True``: indexing, training, experiments, the server's start-up):
one line at a time on the ``momentsearch.progress`` logger, at INFO. Library code never calls ``print``; it
calls :func:`say`.

The logger comes with one handler, :data:`STDOUT`, that writes each line to the current ``sys.stdout`` as
``print`` did, so a command and a script see the same lines; it does not propagate to the root logger (an
application's ``basicConfig`` would print the lines twice). To silence them:
``logging.getLogger("momentsearch.progress").setLevel(logging.WARNING)``; to send them elsewhere, remove
:data:`STDOUT` and add a handler of your own.
"""

from __future__ import annotations

import logging
import sys

LOGGER = logging.getLogger("momentsearch.progress")


class _CurrentStdout(logging.StreamHandler):
    """A handler writing to whatever ``sys.stdout`` is at the time of each line (a test's capture too)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201 - the stream of the moment
        return sys.stdout

    @stream.setter
    def stream(self, value: object) -> None:  # StreamHandler.__init__ sets it; the current stdout is kept
        pass


STDOUT = _CurrentStdout()
LOGGER.addHandler(STDOUT)
LOGGER.propagate = False
if LOGGER.level == logging.NOTSET:
    LOGGER.setLevel(logging.INFO)


def say(message: str) -> None:
    """One line of progress on ``momentsearch.progress`` (stdout, unless the application changed its handlers)."""
    LOGGER.info(message)
