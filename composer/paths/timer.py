"""CUDA-event timing of tendency calls, read back one call later (the paper's S13.3 protocol).

Each call is bracketed by an event pair on the main stream. The pair of call n is read only
after call n+1 has been enqueued, so reading never drains the queue; ``flush`` reads the
last pending pair after the final synchronization. ``intervals`` counts exactly the calls
that ``total_ms`` covers, so the sum divided by ``intervals`` is the device time per call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composer.runtime import Device, Event, Stream

if TYPE_CHECKING:
    from composer.paths.base import Path


def seconds_per_call(path: Path, start: Event, end: Event, calls: int) -> float:
    """Device seconds per tendency call of ``path`` on its problem: one warm-up call (module
    load, library heuristics), then ``calls`` back-to-back calls between ``start`` and ``end``
    on the main stream (what the sweeps time their candidates with)."""
    pb = path.problem
    q, out = pb.ptr("q"), pb.dqdt.ptr
    path.launch(q, out)
    start.record(pb.stream)
    for _ in range(calls):
        path.launch(q, out)
    end.record(pb.stream)
    end.synchronize()
    return start.elapsed_ms(end) / 1e3 / calls


class EventTimer:
    def __init__(self, device: Device, stream: Stream) -> None:
        self.stream = stream
        self._free = [(Event(device), Event(device)) for _ in range(2)]
        self._pending: list[tuple[Event, Event]] = []
        self._open: tuple[Event, Event] | None = None
        self.total_ms = 0.0
        self.intervals = 0
        self.enabled = True

    def begin(self) -> None:
        if not self.enabled:
            return
        if not self._free:
            self._read_oldest()
        self._open = self._free.pop()
        self._open[0].record(self.stream)

    def end(self) -> None:
        if not self.enabled or self._open is None:
            return
        self._open[1].record(self.stream)
        self._pending.append(self._open)
        self._open = None
        if len(self._pending) > 1:
            self._read_oldest()

    def _read_oldest(self) -> None:
        start, stop = self._pending.pop(0)
        stop.synchronize()
        self.total_ms += start.elapsed_ms(stop)
        self.intervals += 1
        self._free.append((start, stop))

    def flush(self) -> None:
        """Read every pending interval (call after the stream has been synchronized)."""
        while self._pending:
            self._read_oldest()

    def reset(self) -> None:
        """Discard pending intervals and zero the sum (e.g. after the warm-up steps)."""
        self.flush()
        self.total_ms, self.intervals = 0.0, 0

    def close(self) -> None:
        for start, stop in self._free + self._pending:
            start.close()
            stop.close()
        self._free, self._pending = [], []
