"""The hazard DAG: edges derived from reads and writes only, and the errors that name the culprit."""

from __future__ import annotations

import networkx as nx
import pytest

from composer.sched import DataFlowError, KernelNode, build_graph, check_acyclic, plan, program_order
from tests.sched_programs import INPUTS, folded_program, gemm_program


def test_gemm_program_edges_are_the_library_paths_data_flow() -> None:
    graph = build_graph(gemm_program(), INPUTS)
    expected = {("volume_flux", g) for g in ("gemm_x", "gemm_y", "gemm_z")}
    expected |= {(g, "lift") for g in ("gemm_x", "gemm_y", "gemm_z", "surface_flux")}
    assert set(graph.edges) == expected
    assert graph.edges["volume_flux", "gemm_y"]["hazards"] == (("raw", "flux_y"),)
    assert graph.edges["surface_flux", "lift"]["hazards"] == (("raw", "fstar"),)
    # the face flux shares only inputs with volume_flux: they may run concurrently
    assert not nx.has_path(graph, "volume_flux", "surface_flux")
    assert not nx.has_path(graph, "surface_flux", "volume_flux")


def test_folded_program_is_a_chain_beside_the_face_flux() -> None:
    graph = build_graph(folded_program(), INPUTS)
    assert nx.has_path(graph, "volume_flux", "gemm_x")
    assert graph.has_edge("gemm_x", "gemm_y") and graph.has_edge("gemm_y", "gemm_z")
    assert graph.has_edge("surface_flux", "gemm_z")
    assert program_order(graph) == [n.name for n in folded_program()]


def test_overwriting_an_array_still_read_orders_after_its_readers() -> None:
    nodes = [
        KernelNode("produce", "p", ("q",), ("t",)),
        KernelNode("consume", "c", ("t",), ("out",)),
        KernelNode("overwrite", "o", ("q",), ("t",)),
        KernelNode("reread", "r", ("t",), ("out2",)),
        KernelNode("clobber_q", "w", (), ("q",)),
    ]
    graph = build_graph(nodes, {"q"})
    assert graph.edges["produce", "overwrite"]["hazards"] == (("waw", "t"),)
    assert graph.edges["consume", "overwrite"]["hazards"] == (("war", "t"),)
    assert graph.edges["overwrite", "reread"]["hazards"] == (("raw", "t"),)
    assert not graph.has_edge("produce", "reread")  # reread sees overwrite's value
    # an input overwritten after its readers
    assert {u for u, _ in graph.in_edges("clobber_q")} == {"produce", "overwrite"}
    assert graph.edges["produce", "clobber_q"]["hazards"] == (("war", "q"),)


def test_one_edge_collects_every_hazard_between_two_kernels() -> None:
    nodes = [KernelNode("a", "a", ("x",), ("y",)), KernelNode("b", "b", ("y",), ("x", "y"))]
    graph = build_graph(nodes, {"x"})
    assert graph.edges["a", "b"]["hazards"] == (("raw", "y"), ("war", "x"), ("waw", "y"))


def test_an_in_place_kernel_has_no_self_edge() -> None:
    nodes = [KernelNode("init", "i", (), ("q",)), KernelNode("update", "u", ("q",), ("q",)),
             KernelNode("use", "u", ("q",), ("r",))]
    graph = build_graph(nodes)
    assert set(graph.edges) == {("init", "update"), ("update", "use")}


def test_a_read_without_producer_names_the_node_and_the_array() -> None:
    program = [n for n in gemm_program() if n.name != "surface_flux"]
    with pytest.raises(DataFlowError, match=r"'lift' reads 'fstar'.*not a declared input"):
        build_graph(program, INPUTS)
    with pytest.raises(DataFlowError, match=r"'volume_flux' reads 'q'"):
        build_graph(gemm_program(), INPUTS - {"q"})


def test_a_read_before_the_first_write_is_an_error() -> None:
    nodes = [KernelNode("early", "e", ("t",), ("u",)), KernelNode("late", "l", (), ("t",))]
    with pytest.raises(DataFlowError, match=r"'early' reads 't'"):
        build_graph(nodes)


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(DataFlowError, match="'k'"):
        build_graph([KernelNode("k", "a", (), ("x",)), KernelNode("k", "b", (), ("y",))])


def test_a_cycle_names_its_nodes() -> None:
    graph = build_graph(gemm_program(), INPUTS)
    graph.add_edge("lift", "volume_flux", hazards=(("raw", "dqdt"),))  # built by hand
    with pytest.raises(DataFlowError, match="cycle") as err:
        plan(graph, 4)
    assert all(n in str(err.value) for n in ("lift", "volume_flux"))
    assert "surface_flux" not in str(err.value)
    check_acyclic(build_graph(gemm_program(), INPUTS))


def test_kernel_node_blocks_and_cost() -> None:
    assert KernelNode("a", "r", grid=(4, 3, 2)).blocks == 24
    assert KernelNode("a", "r", grid=7).blocks == 7
    assert KernelNode("a", "r").blocks is None
    with pytest.raises(DataFlowError, match="'a'"):
        KernelNode("a", "r", cost=-1.0)
