"""Input fields of the operator: the benchmark input and the point-varying validation input.

Keys and layouts are the public interface of shared/spec/operator.md: volume fields
``q u v w Ex Ey Ez`` of shape (Ne, Nq, Nq, Nq) indexed ``[e, k, j, i]``, face fields
``nx ny nz F`` of shape (Ne, 6, Nq, Nq) indexed ``[e, f, b, a]``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from composer.dg.lgl import lgl
from composer.dg.mesh import FACE_AXIS, FACE_SIDE, NUM_FACES, Mesh

VOLUME_KEYS = ("q", "u", "v", "w", "Ex", "Ey", "Ez")
FACE_KEYS = ("nx", "ny", "nz", "F")
FIELD_KEYS = VOLUME_KEYS + FACE_KEYS

TWO_PI = 2.0 * np.pi


def initial_condition(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``q0 = sin(2 pi x) sin(2 pi y) sin(2 pi z)``."""
    return np.sin(TWO_PI * x) * np.sin(TWO_PI * y) * np.sin(TWO_PI * z)


def axis_field(mesh: Mesh, axis: int, values: object) -> np.ndarray:
    """A function of one coordinate, evaluated on the (Ne, Nq) axis nodes and shaped to broadcast
    against [e, k, j, i]: pointwise formulas cost O(Ne Nq) transcendental calls, not O(Ne Nq^3),
    which makes p = 767 inputs (4.5e8 points) quick to build, with bit-identical values."""
    c = np.asarray(values(mesh.axis_coords(axis)))  # type: ignore[operator]
    shape = [c.shape[0], 1, 1, 1]
    shape[3 - axis] = mesh.nq
    return c.reshape(shape)


def exact_solution(mesh: Mesh, time: float, wavenumber: int = 1) -> np.ndarray:
    """The benchmark's exact solution ``q0(x - t, y - t, z - t)`` (velocity (1, 1, 1)); with
    ``wavenumber`` k the initial condition is ``sin(2 pi k x) sin(2 pi k y) sin(2 pi k z)``
    (k = 1 is the benchmark's; the time-integration check raises it to keep the temporal error
    above round-off at high order)."""
    k = int(wavenumber)
    if k < 1:
        raise ValueError(f"wavenumber must be a positive integer, got {wavenumber!r}")
    sx, sy, sz = (axis_field(mesh, axis, lambda c: np.sin(TWO_PI * k * (c - time))) for axis in range(3))
    return np.ascontiguousarray(np.broadcast_to(sx * sy * sz, mesh.volume_shape))


def make_fields(order: int, grid: object, varying: bool = False, wavenumber: int = 1) -> dict[str, np.ndarray]:
    """Build the benchmark input, or with ``varying=True`` the point-varying input (S14.5);
    ``wavenumber`` as in :func:`exact_solution`."""
    mesh = Mesh(order, grid)
    _, weights = lgl(order)
    spacing = mesh.spacing
    shape = mesh.volume_shape
    fields: dict[str, np.ndarray] = {"q": exact_solution(mesh, 0.0, wavenumber)}
    velocity = {"u": (0, lambda c: 1.0 + 0.15 * np.sin(TWO_PI * c)),
                "v": (1, lambda c: 1.0 + 0.11 * np.cos(TWO_PI * c)),
                "w": (2, lambda c: 1.0 + 0.07 * np.sin(TWO_PI * c))}
    metric_scale = {"Ex": (0, lambda c: 1.0 + 0.02 * np.sin(TWO_PI * c)),
                    "Ey": (1, lambda c: 1.0 + 0.03 * np.cos(TWO_PI * c)),
                    "Ez": (2, lambda c: 1.0 + 0.04 * np.sin(TWO_PI * c))}
    for key, (axis, formula) in velocity.items():
        fields[key] = np.broadcast_to(axis_field(mesh, axis, formula), shape).copy() if varying else np.ones(shape)
    for key, (axis, formula) in metric_scale.items():
        scale = axis_field(mesh, axis, formula) if varying else 1.0
        fields[key] = np.broadcast_to(2.0 / spacing[axis] * scale, shape).copy()

    face_shape = mesh.face_shape
    normals = np.zeros((3,) + face_shape)
    lift = np.empty(face_shape)
    for f in range(NUM_FACES):
        axis = FACE_AXIS[f]
        normals[axis, :, f] = 1.0 if FACE_SIDE[f] else -1.0
        lift[:, f] = (2.0 / spacing[axis]) / weights[0]
    if varying:
        nq = mesh.nq
        s = np.arange(NUM_FACES * nq * nq, dtype=np.float64).reshape(1, NUM_FACES, nq, nq)
        e = np.arange(mesh.num_elements, dtype=np.float64).reshape(-1, 1, 1, 1)
        lift = lift * (1.0 + 0.01 * np.sin(s))
        normals[0] += 0.01 * np.sin(s + e)
        normals[1] += 0.01 * np.cos(s + e)
        normals[2] += 0.01 * np.sin(2.0 * s + e)
    fields["nx"], fields["ny"], fields["nz"] = (np.ascontiguousarray(n) for n in normals)
    fields["F"] = lift
    return {key: np.ascontiguousarray(fields[key], dtype=np.float64) for key in FIELD_KEYS}


def check_fields(fields: Mapping[str, np.ndarray], mesh: Mesh) -> None:
    """Raise ``ValueError`` naming the problem if ``fields`` do not match the contract."""
    if not isinstance(fields, Mapping):
        raise ValueError(f"fields must be a mapping of name -> array, got {type(fields).__name__}")
    missing = [k for k in FIELD_KEYS if k not in fields]
    if missing:
        raise ValueError(f"fields is missing keys {missing}; expected {list(FIELD_KEYS)}")
    for key in FIELD_KEYS:
        arr = fields[key]
        expected = mesh.volume_shape if key in VOLUME_KEYS else mesh.face_shape
        if not isinstance(arr, np.ndarray):
            raise ValueError(f"field {key!r} must be a numpy.ndarray, got {type(arr).__name__}")
        if arr.dtype != np.float64:
            raise ValueError(f"field {key!r} must be float64, got {arr.dtype}")
        if arr.shape != expected:
            raise ValueError(
                f"field {key!r} has shape {arr.shape}, expected {expected} for order "
                f"{mesh.order} and grid {mesh.grid}"
            )
