"""What long work says as it goes (``progress=True``: indexing, training, experiments, the server's start-up):
one line at a time on the ``momentsearch.progress`` logger, at INFO. Library code never calls ``print``; it
calls :func:`say`.

Unless the application put a handler of its own on that logger, :func:`say` writes each line to the current
``sys.stdout`` as ``print`` did, so a command and a script see the same lines. To silence or redirect them use
the standard library: ``logging.getLogger("momentsearch.progress").setLevel(logging.WARNING)``, or add a handler
of your own (the default one is then removed). The lines do not propagate to the root logger (an application's
``basicConfig`` would print them twice).
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


_DEFAULT = _CurrentStdout()


def say(message: str) -> None:
    """One line of progress on ``momentsearch.progress`` (stdout unless the application gave it a handler)."""
    own = [h for h in LOGGER.handlers if h is not _DEFAULT]
    if own and _DEFAULT in LOGGER.handlers:
        LOGGER.removeHandler(_DEFAULT)
    elif not own and _DEFAULT not in LOGGER.handlers:
        LOGGER.addHandler(_DEFAULT)
    LOGGER.propagate = False
    if LOGGER.level == logging.NOTSET:
        LOGGER.setLevel(logging.INFO)
    LOGGER.info(message)
