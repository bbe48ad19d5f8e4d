"""Background NVML sampling of clocks, power and clock-event reasons during a run.

Why: a timing is only interpretable next to the clocks it ran at. The paper traces an
unresolved A100 ranking to the SM clock drifting from 1.40 to 1.13 GHz across rounds
(Section S10); recording the clock, the power draw against the enforced limit, and the
decoded clock-event ("throttle") reasons of every run makes such drift visible instead
of silently widening the min-max ranges that the claim test relies on.

The sampler never raises into a benchmark: without NVML (no driver, no GPU, library
missing) it reports ``available=False`` with the reason and returns no samples.

Cost: a Python thread wakes every ``interval_s`` (default 50 ms) and makes ~6 NVML calls.
ctypes releases the GIL during each call, so the host launch loop is only delayed by the
thread's Python bookkeeping (tens of µs per sample, i.e. well below 0.1 % at 50 ms).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

# Bit values of nvmlClocksEventReason* / nvmlClocksThrottleReason* (nvml.h ABI constants;
# identical for both API generations). 0x200 and 0x400 exist only in the throttle table.
REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",  # alias: user_defined_clocks
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
#: Reasons meaning the board held the clock down to stay inside a power budget.
POWER_CAP_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})
#: Reasons meaning the clock was held down for temperature.
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})


def decode_reasons(mask: int | None) -> tuple[str, ...]:
    """Names of the set bits of a clock-event reasons mask, lowest bit first.

    Unknown bits are kept as ``unknown_0x...`` so a newer driver's reason is not lost.
    """
    if not mask:
        return ()
    names: list[str] = []
    bit = 1
    while mask >= bit:
        if mask & bit:
            names.append(REASON_BITS.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return tuple(names)


@dataclass(frozen=True)
class ClockSample:
    """One NVML reading; a field is None when the board does not support that query."""

    t_s: float  # seconds since the sampler's start()
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_w: float | None
    power_limit_w: float | None  # enforced limit at that moment
    temperature_c: int | None
    reasons_mask: int | None
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reasons"] = list(self.reasons)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClockSample:
        return cls(
            t_s=float(d["t_s"]),
            sm_clock_mhz=d.get("sm_clock_mhz"),
            mem_clock_mhz=d.get("mem_clock_mhz"),
            power_w=d.get("power_w"),
            power_limit_w=d.get("power_limit_w"),
            temperature_c=d.get("temperature_c"),
            reasons_mask=d.get("reasons_mask"),
            reasons=tuple(d.get("reasons", ())),
        )


@dataclass(frozen=True)
class ClockSummary:
    """Condensed clock behaviour of one run (or of several runs' samples pooled)."""

    available: bool
    reason: str = ""
    n_samples: int = 0
    sm_clock_mhz_min: int | None = None
    sm_clock_mhz_median: float | None = None
    sm_clock_mhz_max: int | None = None
    mem_clock_mhz_median: float | None = None
    power_w_max: float | None = None
    power_limit_w_min: float | None = None
    temperature_c_max: int | None = None
    reasons_seen: tuple[str, ...] = ()
    power_capped_fraction: float | None = None
    thermal_fraction: float | None = None
    errors: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reasons_seen"] = list(self.reasons_seen)
        return d


def summarize_samples(
    samples: list[ClockSample], *, available: bool = True, reason: str = "", errors: int = 0
) -> ClockSummary:
    """Min/median/max SM clock, max power, reasons seen and power-capped share."""
    if not samples:
        return ClockSummary(available=available, reason=reason or "no samples", errors=errors)

    def present(name: str) -> list[Any]:
        return [getattr(s, name) for s in samples if getattr(s, name) is not None]

    sm, mem, pw, lim, temp = (present(n) for n in ("sm_clock_mhz", "mem_clock_mhz", "power_w",
                                                   "power_limit_w", "temperature_c"))
    with_reasons = [s for s in samples if s.reasons_mask is not None]
    seen = sorted({r for s in with_reasons for r in s.reasons})

    def share(names: frozenset[str]) -> float | None:
        if not with_reasons:
            return None
        return sum(bool(names & set(s.reasons)) for s in with_reasons) / len(with_reasons)

    return ClockSummary(
        available=available,
        reason=reason,
        n_samples=len(samples),
        sm_clock_mhz_min=min(sm) if sm else None,
        sm_clock_mhz_median=float(statistics.median(sm)) if sm else None,
        sm_clock_mhz_max=max(sm) if sm else None,
        mem_clock_mhz_median=float(statistics.median(mem)) if mem else None,
        power_w_max=max(pw) if pw else None,
        power_limit_w_min=min(lim) if lim else None,
        temperature_c_max=max(temp) if temp else None,
        reasons_seen=tuple(seen),
        power_capped_fraction=share(POWER_CAP_REASONS),
        thermal_fraction=share(THERMAL_REASONS),
        errors=errors,
    )


def _import_pynvml() -> ModuleType:
    import pynvml  # nvidia-ml-py

    return pynvml


def get_handle(nvml: ModuleType, device: int | str) -> Any:
    """NVML handle by index, UUID (``GPU-...``) or PCI bus id.

    Why: NVML indices follow PCI order and ignore CUDA_VISIBLE_DEVICES, so the index of
    the CUDA device under test may differ; pass its UUID to be sure to sample that GPU.
    """
    if isinstance(device, int):
        return nvml.nvmlDeviceGetHandleByIndex(device)
    if device.upper().startswith(("GPU-", "MIG-")):
        return nvml.nvmlDeviceGetHandleByUUID(device)
    return nvml.nvmlDeviceGetHandleByPciBusId(device)


class ClockSampler:
    """Samples one GPU every ``interval_s`` on a daemon thread between start() and stop().

    Reusable: start()/stop() may be called once per run; close() (or the context manager)
    releases NVML. ``nvml`` injects a module with pynvml's interface (used by tests).
    """

    def __init__(self, device: int | str = 0, interval_s: float = 0.05,
                 nvml: ModuleType | None = None) -> None:
        self.device = device
        self.interval_s = float(interval_s)
        self.available = False
        self.reason = ""
        self.errors = 0
        self.last_error = ""
        self._nvml: Any = None
        self._handle: Any = None
        self._reasons_fn: Any = None
        self._samples: list[ClockSample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._open(nvml)

    # -- NVML lifetime -------------------------------------------------------------------
    def _open(self, nvml: ModuleType | None) -> None:
        try:
            mod = nvml if nvml is not None else _import_pynvml()
        except Exception as exc:  # ImportError or anything a broken install raises
            self.reason = f"pynvml not importable: {type(exc).__name__}: {exc}"
            return
        try:
            mod.nvmlInit()
        except Exception as exc:
            self.reason = f"nvmlInit failed: {type(exc).__name__}: {exc}"
            return
        try:
            self._handle = get_handle(mod, self.device)
        except Exception as exc:
            self.reason = f"no NVML device {self.device!r}: {type(exc).__name__}: {exc}"
            self._safe_shutdown(mod)
            return
        self._nvml = mod
        self._reasons_fn = (getattr(mod, "nvmlDeviceGetCurrentClocksEventReasons", None)
                            or getattr(mod, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        self.available = True

    @staticmethod
    def _safe_shutdown(mod: Any) -> None:
        with contextlib.suppress(Exception):
            mod.nvmlShutdown()

    def close(self) -> None:
        """Stop sampling if running and release NVML."""
        if self._thread is not None:
            self.stop()
        if self._nvml is not None:
            self._safe_shutdown(self._nvml)
            self._nvml = None
        self.available = False
        self.reason = self.reason or "closed"

    def __enter__(self) -> ClockSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sampling ------------------------------------------------------------------------
    def _query(self, fn_name: str, *args: Any) -> Any:
        try:
            return getattr(self._nvml, fn_name)(self._handle, *args)
        except Exception as exc:  # NotSupported on this board, GPU lost, ...
            self.errors += 1
            self.last_error = f"{fn_name}: {type(exc).__name__}: {exc}"
            return None

    def _reasons_mask(self) -> int | None:
        fn = self._reasons_fn
        if fn is None:
            return None
        try:
            return int(fn(self._handle))
        except Exception as exc:
            legacy = getattr(self._nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
            if legacy is not None and fn is not legacy:
                # Newer binding on an older driver: the event-reasons symbol is absent.
                self._reasons_fn = legacy
                return self._reasons_mask()
            self.errors += 1
            self.last_error = f"clock reasons: {type(exc).__name__}: {exc}"
            return None

    def sample_once(self) -> ClockSample | None:
        """Take one reading now (also usable without the thread); None if unavailable."""
        if not self.available:
            return None
        nv = self._nvml
        t_s = time.perf_counter() - self._t0
        # SM clock first and reasons right after, so the reasons explain that clock.
        sm = self._query("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM)
        mask = self._reasons_mask()
        power_mw = self._query("nvmlDeviceGetPowerUsage")
        limit_mw = self._query("nvmlDeviceGetEnforcedPowerLimit")
        return ClockSample(
            t_s=t_s,
            sm_clock_mhz=sm,
            mem_clock_mhz=self._query("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_MEM),
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            power_limit_w=limit_mw / 1000.0 if limit_mw is not None else None,
            temperature_c=self._query("nvmlDeviceGetTemperature", nv.NVML_TEMPERATURE_GPU),
            reasons_mask=mask,
            reasons=decode_reasons(mask),
        )

    def _record(self) -> None:
        try:
            s = self.sample_once()
        except Exception as exc:  # never let the thread die with an exception
            self.errors += 1
            self.last_error = f"sample: {type(exc).__name__}: {exc}"
            return
        if s is not None:
            with self._lock:
                self._samples.append(s)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._record()

    def start(self) -> None:
        """Begin a fresh sample series: one reading now, then one every interval_s."""
        if self._thread is not None:
            self.stop()
        with self._lock:
            self._samples = []
        self.errors = 0
        self._t0 = time.perf_counter()
        if not self.available:
            return
        self._record()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ClockSampler", daemon=True)
        self._thread.start()

    def stop(self) -> list[ClockSample]:
        """End the series with a final reading (so short runs still have >= 2 samples)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(1.0, 10 * self.interval_s))
            self._thread = None
            self._record()
        with self._lock:
            return list(self._samples)

    @property
    def samples(self) -> list[ClockSample]:
        with self._lock:
            return list(self._samples)

    def summary(self) -> ClockSummary:
        """Summary of the current/last series; explicit available=False without NVML."""
        return summarize_samples(self.samples, available=self.available,
                                 reason=self.reason, errors=self.errors)


__all__ = [
    "REASON_BITS", "POWER_CAP_REASONS", "THERMAL_REASONS", "decode_reasons", "ClockSample",
    "ClockSummary", "summarize_samples", "get_handle", "ClockSampler",
]
