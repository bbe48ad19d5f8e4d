"""CPU tests of the epilogue visitor trees (composer.epilogues): each tree, evaluated by the NumPy
emulation of the kernel's frame (every (m, n, batch) output element of the role's kernel problem,
plain and transposed, one element or a 16-byte pair per site), against the pieces of
``composer.dg.reference_tendency`` on random non-cubic grids."""

from __future__ import annotations

import numpy as np
import pytest

from composer import dg
from composer.epilogues.index import OutputIndex
from composer.epilogues.numpy_eval import c_strides, emulate_epilogue
from composer.epilogues.paper import (FusedPlanError, carry, derivative, fold_x, fold_y, fused_plan, store,
                                      x_weighted_in_fold)
from composer.epilogues.tree import (ACC, Aux, EpilogueTreeError, Face, Scalar, Store, aux_names, check_tree,
                                     fma, from_dict, text, to_dict)
from composer.gemm.cute.config import kernel_problem
from composer.gemm.roles import ROLES, emulate, gemm_spec

#: (order, grid): Nq even and odd, every grid non-cubic, so an index that confuses NeX/NeY/NeZ,
#: i/j/k or e with a plane index reads a different node.
CASES = [(3, (2, 3, 1)), (4, (1, 2, 3)), (7, (3, 1, 2))]
SITES = [(swap, width) for swap in (False, True) for width in (1, 2) if swap or width == 1]


def problem_fields(order, grid, seed):
    """Point-varying fields with random q (and a random face flux input through it)."""
    fields = dg.make_fields(order, grid, varying=True)
    rng = np.random.default_rng(seed)
    fields["q"] = rng.standard_normal(fields["q"].shape)
    return fields


def pieces(order, grid, fields):
    """The reference's pieces: the three unweighted derivatives (the GEMMs), fstar, the volume term."""
    mesh = dg.Mesh(order, grid)
    d = dg.diff_matrix(order)
    q = fields["q"]
    flux = {"x": q * fields["u"], "y": q * fields["v"], "z": q * fields["w"]}
    derivs = {r: emulate(gemm_spec(r, mesh.nq, mesh.num_elements), d, flux[r]) for r in ROLES}
    return mesh, derivs, dg.numerical_flux(fields, mesh), dg.volume_term(fields, mesh)


def run_tree(tree, role, swap, width, mesh, acc, arrays):
    if width == 2 and mesh.nq % 2:
        pytest.skip("odd Nq: no 16-byte pairs")
    prob = kernel_problem(gemm_spec(role, mesh.nq, mesh.num_elements), swap)
    out = emulate_epilogue(tree, OutputIndex(role, swap, mesh.nq), prob, acc, arrays, {"alpha": 2.0, "beta": -3.0},
                           width)
    assert not np.isnan(out).any(), "some output element was not written"
    return out


def rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("order,grid", CASES)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("swap", [False, True])
def test_output_offset_is_the_node_index(order, grid, role, swap):
    """The kernel's C offset of (m, n, batch) is the flat [e, k, j, i] index of the node the index
    map names: Aux leaves read the right node, and the Face leaf's coordinates are that node's."""
    mesh = dg.Mesh(order, grid)
    nq = mesh.nq
    prob = kernel_problem(gemm_spec(role, nq, mesh.num_elements), swap)
    m, n, b = (a.reshape(-1) for a in np.meshgrid(np.arange(prob.m), np.arange(prob.n), np.arange(prob.batch),
                                                  indexing="ij"))
    sm, sn = c_strides(prob)
    node = OutputIndex(role, swap, nq).node(m, n, b)
    for name, value in (("i", node.i), ("j", node.j), ("k", node.k)):
        assert value.min() == 0 and value.max() == nq - 1, name
    assert node.e.min() == 0 and node.e.max() == mesh.num_elements - 1
    flat = ((node.e * nq + node.k) * nq + node.j) * nq + node.i
    np.testing.assert_array_equal(b * prob.stride_c + m * sm + n * sn, flat)
    assert np.unique(flat).size == mesh.num_points


@pytest.mark.parametrize("order,grid", CASES)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("swap,width", SITES)
def test_store_and_scalar_trees(order, grid, role, swap, width):
    mesh, derivs, _, _ = pieces(order, grid, problem_fields(order, grid, 1))
    acc = derivs[role]
    np.testing.assert_array_equal(run_tree(store(), role, swap, width, mesh, acc, {}), acc)
    scaled = Store(fma(Scalar("alpha"), ACC, Scalar("beta") * Aux("c0")))
    got = run_tree(scaled, role, swap, width, mesh, acc, {"c0": derivs["x"]})
    np.testing.assert_allclose(got, 2.0 * acc - 3.0 * derivs["x"], rtol=1e-15, atol=1e-15 * np.abs(acc).max())


@pytest.mark.parametrize("order,grid", CASES)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("swap,width", SITES)
def test_face_leaf_is_the_lift(order, grid, role, swap, width):
    """Store(Face(fstar)) is the reference's add_lift of fstar onto zero (edges and corners sum)."""
    fields = problem_fields(order, grid, 2)
    mesh, _, fstar, _ = pieces(order, grid, fields)
    want = np.zeros(mesh.volume_shape)
    dg.add_lift(want, fstar, mesh)
    got = run_tree(Store(Face()), role, swap, width, mesh, np.zeros(mesh.volume_shape), {"fstar": fstar})
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15 * np.abs(want).max())


@pytest.mark.parametrize("order,grid", CASES)
@pytest.mark.parametrize("carrier", ROLES)
@pytest.mark.parametrize("swap,width", SITES)
def test_carry_without_fold_is_the_reference(order, grid, carrier, swap, width):
    """The carrier's tree on its own accumulator, the other two derivatives, Ex/Ey/Ez and fstar is
    reference_tendency; without its Face leaf, minus the reference's volume term."""
    fields = problem_fields(order, grid, 3)
    mesh, derivs, fstar, volume = pieces(order, grid, fields)
    tree = carry(carrier, fold=False, nq=mesh.nq)
    others = {derivative(r): derivs[r] for r in ROLES if r != carrier}
    arrays = {**others, **{k: fields[k] for k in ("Ex", "Ey", "Ez")}, "fstar": fstar}
    assert set(aux_names(tree)) == set(others) | {"Ex", "Ey", "Ez"}
    got = run_tree(tree, carrier, swap, width, mesh, derivs[carrier], arrays)
    assert rel(got, dg.reference_tendency(fields, order, grid)) <= 1e-14
    no_lift = Store(tree.value.a.a)  # -(volume + face) -> volume
    assert rel(run_tree(no_lift, carrier, swap, width, mesh, derivs[carrier], arrays), volume) <= 1e-14


@pytest.mark.parametrize("order,grid", CASES + [(64, (2, 1, 1))])
@pytest.mark.parametrize("swaps", [(False, False, False), (True, True, True), (False, True, True)])
def test_fold_chain_is_the_reference(order, grid, swaps):
    """x -> y -> z through one partial-sum array (y updates it in place) gives reference_tendency;
    order 64 (Nq = 65) runs the Nq > 64 form, where x applies Ex itself."""
    fields = problem_fields(order, grid, 4)
    mesh, derivs, fstar, volume = pieces(order, grid, fields)
    nq = mesh.nq
    plan = fused_plan("z", fold=True, nq=nq)
    assert plan.roles == ("x", "y", "z") and plan.intermediates == ("partial",)
    metric = {k: fields[k] for k in ("Ex", "Ey", "Ez")}
    arrays = {**metric, "fstar": fstar}
    for role, swap in zip(plan.roles, swaps):
        width = 2 if swap and nq % 2 == 0 else 1
        arrays[plan.outputs[role]] = run_tree(plan.trees[role], role, swap, width, mesh, derivs[role], arrays)
        if role == "x":
            want_x = fields["Ex"] * derivs["x"] if x_weighted_in_fold(nq) else derivs["x"]
            np.testing.assert_allclose(arrays["partial"], want_x, rtol=1e-15, atol=0)
        if role == "y":
            partial_xy = fields["Ex"] * derivs["x"] + fields["Ey"] * derivs["y"]
            assert rel(arrays["partial"], partial_xy) <= 1e-14
    assert x_weighted_in_fold(nq) == (nq > 64)
    assert rel(arrays["dqdt"], dg.reference_tendency(fields, order, grid)) <= 1e-14


def test_paper_trees_read_what_the_paper_says():
    """The carrier reads two arrays with the fold and five (plus fstar) without (§3.5)."""
    assert text(fused_plan("z", True, 128).trees["z"]) == "store(neg(add(fma(aux(Ez), acc, aux(partial)), face(fstar))))"
    assert fused_plan("z", True, 128).reads("z") == ("Ez", "partial", "fstar")
    assert text(fold_x(128)) == "store(mul(aux(Ex), acc))" and fold_x(64) == store()
    assert text(fold_y(128)) == "store(fma(aux(Ey), acc, aux(partial)))"
    assert text(fold_y(64)) == "store(fma(aux(Ex), aux(partial), mul(aux(Ey), acc)))"
    for carrier in ROLES:
        plan = fused_plan(carrier, False, 32)
        assert len(aux_names(plan.trees[carrier])) == 5 and plan.reads(carrier)[-1] == "fstar"
        assert plan.roles[-1] == carrier and plan.outputs[carrier] == "dqdt"
        assert sorted(plan.intermediates) == sorted(derivative(r) for r in ROLES if r != carrier)
        assert [plan.fused(r) for r in plan.roles] == [False, False, True]
    assert [fused_plan("z", True, 64).fused(r) for r in ROLES] == [False, True, True]
    assert [fused_plan("z", True, 128).fused(r) for r in ROLES] == [True, True, True]
    for carrier in ("x", "y"):
        with pytest.raises(FusedPlanError, match="fold needs the z GEMM to carry"):
            fused_plan(carrier, True, 128)
    with pytest.raises(FusedPlanError, match="carrier must be one of"):
        fused_plan("w", False, 8)


def test_tree_serialization_and_checks():
    tree = carry("y", False, 16)
    assert from_dict(to_dict(tree)) == tree and check_tree(tree, max_aux=5) is tree
    with pytest.raises(EpilogueTreeError, match="6 aux arrays .* 5 slots"):
        check_tree(Store(sum((Aux(f"a{i}") for i in range(6)), ACC)), max_aux=5)
    with pytest.raises(EpilogueTreeError, match="Store at its root"):
        check_tree(ACC + ACC, max_aux=5)
    with pytest.raises(EpilogueTreeError, match="Store below the root"):
        check_tree(Store(Store(ACC)), max_aux=5)
    with pytest.raises(EpilogueTreeError, match="scalars \\['gamma'\\]"):
        check_tree(Store(Scalar("gamma") * ACC), max_aux=5)
    with pytest.raises(EpilogueTreeError, match="not an identifier"):
        check_tree(Store(Aux("E x") * ACC), max_aux=5)
    with pytest.raises(EpilogueTreeError, match="needs fields"):
        from_dict({"kind": "aux"})
    with pytest.raises(EpilogueTreeError, match="combines nodes"):
        ACC + 1.0


#: Odd orders (Nq even), non-cubic grids; p = 7's h = 4 keeps pair sites on one side of the middle.
SPLIT_CASES = [(3, (2, 3, 1)), (7, (3, 1, 2)), (15, (1, 2, 2))]


@pytest.mark.parametrize("order,grid", SPLIT_CASES)
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("axis", ROLES)
@pytest.mark.parametrize("swap,width", SITES)
def test_split_leaf_merges_at_the_node(order, grid, role, axis, swap, width):
    """Store(SplitAux(a, axis)) on any role's output index is composer.parity's merge of ``a`` along the
    axis's direction: each node reads its mirrored pair, exactly (fma of +-1 is one exact sum)."""
    from composer.epilogues.tree import SplitAux
    from composer.parity.reference import ROLE_AXIS, merge

    mesh = dg.Mesh(order, grid)
    array = np.random.default_rng(5).standard_normal(mesh.volume_shape)
    got = run_tree(Store(SplitAux("a", axis)), role, swap, width, mesh, np.zeros(mesh.volume_shape), {"a": array})
    np.testing.assert_array_equal(got, merge(array, ROLE_AXIS[axis]))


@pytest.mark.parametrize("order,grid", SPLIT_CASES)
@pytest.mark.parametrize("carrier", ROLES)
@pytest.mark.parametrize("swap,width", SITES)
def test_carry_with_parity_is_the_reference(order, grid, carrier, swap, width):
    """The parity carrier: its accumulator the whole derivative (the split basis on the split flux), the
    other two read split (what their parity GEMMs write) and merged; the tree gives reference_tendency."""
    from composer.parity.reference import ROLE_AXIS, contract_split, parity_matrices, split, split_basis

    fields = problem_fields(order, grid, 4)
    mesh, derivs, fstar, _ = pieces(order, grid, fields)
    d = dg.diff_matrix(order)
    q = fields["q"]
    flux = {"x": q * fields["u"], "y": q * fields["v"], "z": q * fields["w"]}
    split_flux = {r: split(flux[r], ROLE_AXIS[r]) for r in ROLES}
    acc = np.moveaxis(np.moveaxis(split_flux[carrier], ROLE_AXIS[carrier], -1) @ split_basis(d).T, -1,
                      ROLE_AXIS[carrier])
    assert rel(acc, derivs[carrier]) <= 1e-14
    plan = fused_plan(carrier, False, mesh.nq, parity=True)
    tree = plan.trees[carrier]
    arrays = {derivative(r): contract_split(split_flux[r], parity_matrices(d), ROLE_AXIS[r]) for r in ROLES
              if r != carrier}
    arrays.update({k: fields[k] for k in ("Ex", "Ey", "Ez")}, fstar=fstar)
    got = run_tree(tree, carrier, swap, width, mesh, acc, arrays)
    assert rel(got, dg.reference_tendency(fields, order, grid)) <= 1e-14
    assert plan.parity and all(plan.trees[r] == store() for r in ROLES if r != carrier)


def test_split_leaf_checks():
    from composer.epilogues.paper import carry
    from composer.epilogues.tree import SplitAux, from_dict, reads_split, text, to_dict

    tree = Store(SplitAux("dx", "x") + Aux("Ex"))
    assert from_dict(to_dict(tree)) == tree and text(tree) == "store(add(split(dx, x), aux(Ex)))"
    assert aux_names(tree) == ("dx", "Ex") and reads_split(tree)
    with pytest.raises(EpilogueTreeError, match="the axis is one of x, y, z"):
        check_tree(Store(SplitAux("dx", "i")), max_aux=4)
    with pytest.raises(EpilogueTreeError, match="read both split and unsplit"):
        check_tree(Store(SplitAux("dx", "x") + Aux("dx")), max_aux=4)
    with pytest.raises(FusedPlanError, match="parity needs the fold off"):
        carry("z", True, 8, parity=True)
    with pytest.raises(FusedPlanError, match="even number of nodes"):
        fused_plan("z", False, 9, parity=True)
