"""The trace's clock while it streams: time order enforced, span and unit reported (docs/model.md §9.1).

``profiles`` and ``replay`` both need a trace in time order (``replay`` replays it at its own
timestamps, ``--split`` cuts it by position); :class:`TraceClock` refuses a record earlier than
the one before, naming its line, and keeps the first and last timestamps so the command can
print the span it read and the unit the format assumes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from edgeprefix.placement.pipeline.traces import TraceError, TraceRecord

UNIT = {"mooncake": "milliseconds", "tokens": "seconds"}  # what a timestamp in the file counts
SHORT_GAP = 0.01  # mean seconds between requests below which milliseconds were probably seconds


class TraceClock:
    """Wrap a record stream (:meth:`watch`); afterwards :attr:`first`, :attr:`last`, :attr:`count`."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.first: float | None = None
        self.last: float | None = None
        self.last_line = 0
        self.count = 0

    def watch(self, records: Iterable[TraceRecord]) -> Iterator[TraceRecord]:
        for record in records:
            if self.last is not None and record.timestamp < self.last:
                raise TraceError(
                    record.line,
                    "timestamp",
                    f"{record.timestamp:g} s is earlier than line {self.last_line}'s {self.last:g} s: "
                    "the trace must be in time order (sort it by timestamp)",
                )
            if self.first is None:
                self.first = record.timestamp
            self.last, self.last_line = record.timestamp, record.line
            self.count += 1
            yield record

    @property
    def span(self) -> float:
        return 0.0 if self.first is None or self.last is None else self.last - self.first

    def summary(self) -> dict[str, object]:
        """``first``, ``last``, ``span`` (seconds), the file's ``unit`` and, when the gaps look
        1000× too short for the unit, a ``hint``."""
        out: dict[str, object] = {"first": self.first, "last": self.last, "span": self.span, "unit": UNIT.get(self.fmt, "seconds")}
        if self.fmt == "mooncake" and self.count > 1 and self.span / (self.count - 1) < SHORT_GAP:
            out["hint"] = (
                f"the mean gap between requests is {self.span / (self.count - 1):.3g} s: if the file's timestamps "
                "are seconds, multiply them by 1000 (the mooncake format reads milliseconds) or use --format tokens"
            )
        return out
