"""The operator's state on the device, shared by every implementation path.

Holds the eleven input fields, the index maps, the differentiation matrix, the RK3 state
(``q`` and the stage value) and ``dqdt``. A path reads these and allocates only its own
workspace, so all paths run on identical inputs and one time-stepping driver serves all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from composer import dg
from composer.errors import ComposerError
from composer.runtime import Device, DeviceBuffer, Stream


@dataclass
class DeviceProblem:
    """Device-resident operator input for one (order, grid)."""

    order: int
    grid: tuple[int, int, int]
    device: Device
    stream: Stream
    fields: dict[str, DeviceBuffer]
    vmap_m: DeviceBuffer
    vmap_p: DeviceBuffer
    diff: DeviceBuffer
    q_stage: DeviceBuffer
    dqdt: DeviceBuffer
    extra: dict[str, DeviceBuffer] = field(default_factory=dict)

    @property
    def mesh(self) -> dg.Mesh:
        return dg.Mesh(self.order, self.grid)

    @property
    def nq(self) -> int:
        return self.order + 1

    @property
    def num_elements(self) -> int:
        return self.mesh.num_elements

    @property
    def num_points(self) -> int:
        return self.mesh.num_points

    @property
    def volume_bytes(self) -> int:
        return 8 * self.num_points

    def ptr(self, name: str) -> int:
        """Device pointer of a field (``q u v w Ex Ey Ez nx ny nz F``)."""
        return self.fields[name].ptr

    def index_maps32(self) -> tuple[DeviceBuffer, DeviceBuffer]:
        """vmapM, vmapP as int32 (made once, owned by the problem): half the map traffic of the
        int64 originals for kernels that index with 32 bits (every point index below 2**31)."""
        if "vmapM32" not in self.extra:
            if self.num_points >= 2**31:
                raise ComposerError(
                    f"order {self.order} on grid {self.grid} has {self.num_points} points: more than "
                    f"32-bit index maps address (2**31 - 1); use a smaller grid")
            for name, maps in zip(("vmapM32", "vmapP32"), self.mesh.face_maps):
                self.extra[name] = DeviceBuffer.from_numpy(np.ascontiguousarray(maps, dtype=np.int32),
                                                           self.stream, self.device)
            self.stream.synchronize()
        return self.extra["vmapM32"], self.extra["vmapP32"]

    def allocate(self, name: str, nbytes: int) -> DeviceBuffer:
        """A workspace buffer owned by the problem (freed with it)."""
        buf = DeviceBuffer(nbytes, self.device)
        self.extra[name] = buf
        return buf

    def download(self, buffer: DeviceBuffer) -> np.ndarray:
        """Copy a volume-shaped buffer back to the host (synchronizes the main stream)."""
        out = buffer.to_numpy(self.mesh.volume_shape, np.float64, self.stream)
        self.stream.synchronize()
        return out

    def close(self) -> None:
        for buf in [*self.fields.values(), self.vmap_m, self.vmap_p, self.diff, self.q_stage,
                    self.dqdt, *self.extra.values()]:
            buf.free()
        self.extra.clear()

    @classmethod
    def upload(
        cls, fields: Mapping[str, np.ndarray], order: int, grid: object, device: Device,
        stream: Stream | None = None,
    ) -> "DeviceProblem":
        """Validate ``fields`` and copy them, with the index maps and D, to the device."""
        mesh = dg.Mesh(order, grid)
        dg.check_fields(fields, mesh)
        stream = stream or Stream(device)
        vmap_m, vmap_p = mesh.face_maps
        uploaded: dict[str, DeviceBuffer] = {}
        try:
            for key in dg.FIELD_KEYS:
                uploaded[key] = DeviceBuffer.from_numpy(fields[key], stream, device)
            problem = cls(
                order=mesh.order, grid=mesh.grid, device=device, stream=stream, fields=uploaded,
                vmap_m=DeviceBuffer.from_numpy(vmap_m, stream, device),
                vmap_p=DeviceBuffer.from_numpy(vmap_p, stream, device),
                diff=DeviceBuffer.from_numpy(dg.diff_matrix(order), stream, device),
                q_stage=DeviceBuffer(8 * mesh.num_points, device),
                dqdt=DeviceBuffer(8 * mesh.num_points, device),
            )
        except BaseException:
            for buf in uploaded.values():
                buf.free()
            raise
        stream.synchronize()
        return problem


class DoesNotFitError(ComposerError, MemoryError):
    """A path's estimated footprint exceeds the device's free memory (raised before allocating)."""


def check_fits(order: int, grid: object, path: str, device: Device,
               options: Mapping[str, Any] | None = None) -> None:
    """Stop before allocating when the estimated footprint of ``path`` built with ``options`` exceeds
    the device's free memory."""
    from composer.counts import device_memory_estimate

    estimate = device_memory_estimate(order, dg.check_grid(grid), path, options)
    free = device.free_memory()
    if estimate.total_bytes > free:
        raise DoesNotFitError(
            f"order {order} on grid {tuple(dg.check_grid(grid))} with path {path} needs about "
            f"{estimate.total_bytes / 1e9:.1f} GB of device memory, but only {free / 1e9:.1f} GB "
            f"of {device.total_memory / 1e9:.1f} GB are free on {device.name}; use a smaller grid "
            f"or order (see `composer info --order {order}`)"
        )
