"""Progress reporting for long management commands.

One helper, three behaviours chosen from where the output goes:

* a terminal (the stream is a TTY): a live ``tqdm`` progress bar;
* not a terminal (logs, CI, pipes, tests): a plain line at most every ``interval``
  seconds, plus a final line, so logs stay short and readable;
* ``silent=True`` (the command's ``--json`` flag): nothing at all.

Progress always goes to **stderr** (by default the command's ``self.stderr``), never
to stdout, so a command's stdout (its report, or its JSON) stays machine-readable.

Use it as a context manager and call ``advance()`` per unit of work::

    from core.progress import progress

    def handle(self, *args, **options):
        items = list(...)
        with progress(
            total=len(items), desc="Scanning", silent=options["json"], stream=self.stderr
        ) as bar:
            for item in items:
                check(item)
                bar.advance()          # or bar.advance(n) for a batch of n

or wrap an iterable (``total`` taken from ``len()`` when it has one)::

    from core.progress import track

    for conversation in track(conversations, desc="Indexing", silent=options["json"],
                              stream=self.stderr):
        ...

``total=None`` is allowed (unknown size): the bar counts up and the plain lines say
"N done". ``bar.set_description("...")`` changes the label between phases and
``bar.note("...")`` prints a line without breaking the bar (silent under ``--json``).
A plain line looks like ``Scanning: 1200/5000 (24%) 3.1s``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

# Seconds between plain lines when the output is not a terminal.
DEFAULT_INTERVAL = 10.0


def _raw_stream(stream: Any) -> IO[str]:
    """Django's OutputWrapper appends a newline to every write, which breaks a
    redrawn bar; write to the stream it wraps instead."""
    if stream is None:
        return sys.stderr
    return getattr(stream, "_out", stream)


def _is_tty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed stream is not a terminal
        return False


class Progress:
    """Counts work done and reports it; see the module docstring."""

    def __init__(
        self,
        *,
        total: int | None,
        desc: str,
        silent: bool = False,
        stream: Any = None,
        interval: float = DEFAULT_INTERVAL,
        force_tty: bool | None = None,
    ) -> None:
        self.total = total
        self.desc = desc
        self.silent = silent
        self.count = 0
        self._stream = _raw_stream(stream)
        self._interval = interval
        self._started = time.monotonic()
        self._last_line = self._started
        tty = _is_tty(self._stream) if force_tty is None else force_tty
        self._bar: tqdm | None = None
        if not silent and tty:
            self._bar = tqdm(total=total, desc=desc, file=self._stream, leave=True)

    # -- reporting -------------------------------------------------------------

    def advance(self, n: int = 1) -> None:
        self.count += n
        if self.silent:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last_line >= self._interval:
            self._last_line = now
            self._write_line(now)

    def set_description(self, desc: str) -> None:
        self.desc = desc
        if self._bar is not None:
            self._bar.set_description(desc)

    def note(self, text: str) -> None:
        if self.silent:
            return
        if self._bar is not None:
            self._bar.write(text, file=self._stream)
        else:
            self._stream.write(text + "\n")
            self._stream.flush()

    def close(self) -> None:
        if self.silent:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            return
        self._write_line(time.monotonic(), final=True)

    # -- plumbing --------------------------------------------------------------

    def line(self, now: float | None = None) -> str:
        elapsed = (now if now is not None else time.monotonic()) - self._started
        if self.total:
            percent = 100 * self.count // self.total
            return f"{self.desc}: {self.count}/{self.total} ({percent}%) {elapsed:.1f}s"
        return f"{self.desc}: {self.count} done {elapsed:.1f}s"

    def _write_line(self, now: float, final: bool = False) -> None:
        suffix = " - finished" if final else ""
        self._stream.write(self.line(now) + suffix + "\n")
        self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(
    *,
    total: int | None,
    desc: str,
    silent: bool = False,
    stream: Any = None,
    interval: float = DEFAULT_INTERVAL,
    force_tty: bool | None = None,
) -> Progress:
    """A Progress to use as ``with progress(...) as bar: ... bar.advance()``."""
    return Progress(
        total=total,
        desc=desc,
        silent=silent,
        stream=stream,
        interval=interval,
        force_tty=force_tty,
    )


def track(
    iterable: Iterable[T],
    *,
    desc: str,
    total: int | None = None,
    silent: bool = False,
    stream: Any = None,
    interval: float = DEFAULT_INTERVAL,
) -> Iterator[T]:
    """Yield from ``iterable``, advancing a progress report by one per item."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    with progress(total=total, desc=desc, silent=silent, stream=stream, interval=interval) as bar:
        for item in iterable:
            yield item
            bar.advance()
