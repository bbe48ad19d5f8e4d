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


def exact_solution(mesh: Mesh, time: float) -> np.ndarray:
    """The benchmark's exact solution ``q0(x - t, y - t, z - t)`` (velocity (1, 1, 1))."""
    x, y, z = (mesh.volume_coords(axis) - time for axis in range(3))
    return initial_condition(x, y, z)


def make_fields(order: int, grid: object, varying: bool = False) -> dict[str, np.ndarray]:
    """Build the benchmark input, or with ``varying=True`` the point-varying input (S14.5)."""
    mesh = Mesh(order, grid)
    x, y, z = (mesh.volume_coords(axis) for axis in range(3))
    _, weights = lgl(order)
    spacing = mesh.spacing
    shape = mesh.volume_shape
    fields: dict[str, np.ndarray] = {"q": initial_condition(x, y, z)}
    if varying:
        fields["u"] = 1.0 + 0.15 * np.sin(TWO_PI * x)
        fields["v"] = 1.0 + 0.11 * np.cos(TWO_PI * y)
        fields["w"] = 1.0 + 0.07 * np.sin(TWO_PI * z)
    else:
        for key in ("u", "v", "w"):
            fields[key] = np.ones(shape)
    metric_scale = {"Ex": 1.0, "Ey": 1.0, "Ez": 1.0}
    if varying:
        metric_scale = {
            "Ex": 1.0 + 0.02 * np.sin(TWO_PI * x),
            "Ey": 1.0 + 0.03 * np.cos(TWO_PI * y),
            "Ez": 1.0 + 0.04 * np.sin(TWO_PI * z),
        }
    for axis, key in enumerate(("Ex", "Ey", "Ez")):
        fields[key] = np.broadcast_to(2.0 / spacing[axis] * metric_scale[key], shape).copy()

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
