"""The paper's epilogue trees (§3.5, S14.3) and which GEMM runs which one (a :class:`FusedPlan`).

- unweighted store: ``C = acc`` (GEMM_CUTE's three GEMMs; a GEMM_FUSED GEMM that neither folds
  nor carries);
- carry: the lift-and-assembly work in the epilogue of the last GEMM, the carrier, which never
  writes its own derivative: ``dqdt = -(Ex Gx + Ey Gy + Ez Gz + LIFT(fstar))`` with the carrier's
  G the accumulator and the other two read back (any role can carry: all three derivatives are
  read at the same node index);
- fold: the metric weights applied in the x and y epilogues and y consuming x's result, so the
  carrier (z) reads one partial sum instead of two derivatives and three weights. Above Nq = 64
  x writes ``partial = Ex Gx`` and y ``partial = partial + Ey Gy``; at and below Nq = 64 x stores
  ``Gx`` unweighted and y applies both factors, ``partial = Ex partial + Ey Gy`` (the paper's
  Nq = 64 form). y updates ``partial`` in place: each element is read and written by one thread.

Parity (beyond the paper, ``composer.parity``; no fold): the non-carriers run as parity GEMMs and
write their derivatives split along their axes; the carrier's tree merges each at the node
(``SplitAux``), the carrier itself a full GEMM (its accumulator is the derivative at the node).

Array names are the ones the path declares to the scheduler (``composer.paths.program``): the
metric ``Ex, Ey, Ez``, the non-carriers' derivatives ``dx, dy, dz``, the fold's ``partial`` and
the face flux ``fstar``; C is ``dqdt`` for the carrier.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from composer.epilogues.tree import ACC, Aux, Face, Mul, Node, SplitAux, Store, aux_names, face_names, fma
from composer.errors import ComposerError
from composer.gemm.roles import ROLES

#: The array the fold's x and y GEMMs accumulate into and the z carrier reads.
PARTIAL = "partial"
#: The Nq at and below which the fold applies both weights in y (x stores unweighted).
FOLD_BOTH_IN_Y_NQ = 64


class FusedPlanError(ComposerError, ValueError):
    """A carrier/fold combination the paper's trees do not define."""


def store() -> Store:
    """The unweighted store ``C = acc``."""
    return Store(ACC)


def derivative(role: str) -> str:
    """Name of the volume array holding the ``role`` GEMM's unweighted result."""
    return f"d{role}"


def weight(role: str) -> Aux:
    """The metric weight of ``role``'s direction (``Ex`` for x)."""
    return Aux(f"E{role}")


def x_weighted_in_fold(nq: int) -> bool:
    """Whether the fold's x GEMM applies Ex itself (above Nq = 64) or leaves it to y."""
    return nq > FOLD_BOTH_IN_Y_NQ


def fold_x(nq: int) -> Store:
    """The fold's x epilogue: ``partial = Ex Gx`` above Nq = 64, else ``partial = Gx``."""
    return Store(Mul(weight("x"), ACC)) if x_weighted_in_fold(nq) else store()


def fold_y(nq: int) -> Store:
    """The fold's y epilogue: ``partial += Ey Gy`` above Nq = 64, else ``partial = Ex partial + Ey Gy``."""
    if x_weighted_in_fold(nq):
        return Store(fma(weight("y"), ACC, Aux(PARTIAL)))
    return Store(fma(weight("x"), Aux(PARTIAL), Mul(weight("y"), ACC)))


def carry(carrier: str, fold: bool, nq: int, parity: bool = False) -> Store:
    """The carrier's epilogue: ``dqdt = -(volume sum + LIFT(fstar))``; with ``parity`` the
    non-carriers' derivatives are read split and merged at the node."""
    if fold:
        if carrier != "z":
            raise FusedPlanError(f"the fold needs the z GEMM to carry (x and y feed it), not {carrier}")
        if parity:
            raise FusedPlanError("parity needs the fold off: the fold's x and y epilogues would weight split "
                                 "derivatives, which hold no node's value")
        volume: Node = fma(weight("z"), ACC, Aux(PARTIAL))
    else:
        def g(role: str) -> Node:
            if role == carrier:
                return ACC
            return SplitAux(derivative(role), role) if parity else Aux(derivative(role))

        volume = fma(weight("z"), g("z"), fma(weight("y"), g("y"), Mul(weight("x"), g("x"))))
    return Store(-(volume + Face("fstar")))


@dataclass(frozen=True)
class FusedPlan:
    """Which epilogue each GEMM runs and where it writes: ``trees[role]`` and ``outputs[role]``
    (an array name; ``dqdt`` for the carrier), in launch order ``roles``."""

    carrier: str
    fold: bool
    nq: int
    trees: Mapping[str, Store]
    outputs: Mapping[str, str]
    parity: bool = False  # the non-carriers run as parity GEMMs (their outputs split along their axes)

    @property
    def roles(self) -> tuple[str, ...]:
        """The GEMMs in program order: the carrier last (the scheduler runs non-carriers first)."""
        return tuple(r for r in ROLES if r != self.carrier) + (self.carrier,)

    def reads(self, role: str) -> tuple[str, ...]:
        """The arrays ``role``'s epilogue reads (aux arrays in slot order, then the face array)."""
        return aux_names(self.trees[role]) + face_names(self.trees[role])

    def fused(self, role: str) -> bool:
        """Whether ``role`` runs anything but the unweighted store (so it must be a CuTe GEMM)."""
        return self.trees[role] != store()

    @property
    def intermediates(self) -> tuple[str, ...]:
        """The volume arrays between the GEMMs (allocated by the path): the non-carriers' outputs."""
        return tuple(dict.fromkeys(self.outputs[r] for r in self.roles if r != self.carrier))


def fused_plan(carrier: str, fold: bool, nq: int, parity: bool = False) -> FusedPlan:
    """The paper's trees for ``carrier`` and ``fold`` at ``nq`` (a fold needs carrier z); with
    ``parity`` (no fold, even ``nq``) the non-carriers split, the carrier merging."""
    if carrier not in ROLES:
        raise FusedPlanError(f"carrier must be one of {', '.join(ROLES)}, got {carrier!r}")
    if parity and nq % 2:
        raise FusedPlanError(f"parity needs an even number of nodes (an odd order), got Nq = {nq}")
    trees: dict[str, Store] = {carrier: carry(carrier, fold, nq, parity)}
    outputs = {carrier: "dqdt"}
    for role in ROLES:
        if role == carrier:
            continue
        if fold:
            trees[role] = fold_x(nq) if role == "x" else fold_y(nq)
            outputs[role] = PARTIAL
        else:
            trees[role] = store()
            outputs[role] = derivative(role)
    return FusedPlan(carrier, fold, nq, MappingProxyType(trees), MappingProxyType(outputs), parity)
