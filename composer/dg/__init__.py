"""The DG operator's fixed numerics (shared/spec/operator.md): nodes, mesh, fields, reference.

Public API: ``lgl``, ``diff_matrix``, ``make_fields``, ``reference_tendency`` plus the mesh,
the SSP-RK3 integrator, the exact solution, the relative L2 error and the mass.
"""

from composer.dg.fields import FACE_KEYS, FIELD_KEYS, VOLUME_KEYS, check_fields, exact_solution, make_fields
from composer.dg.lgl import diff_matrix, lgl
from composer.dg.mesh import Mesh, check_grid
from composer.dg.reference import add_lift, numerical_flux, reference_tendency, volume_term
from composer.dg.timeint import integrate, l2_norm, mass, relative_l2_error, ssp_rk3_step

__all__ = [
    "FACE_KEYS", "FIELD_KEYS", "VOLUME_KEYS", "Mesh", "add_lift", "check_fields", "check_grid",
    "diff_matrix", "exact_solution", "integrate", "l2_norm", "lgl", "make_fields", "mass",
    "numerical_flux", "reference_tendency", "relative_l2_error", "ssp_rk3_step", "volume_term",
]
