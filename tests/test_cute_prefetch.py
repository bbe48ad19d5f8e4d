"""The opt-in ``prefetch`` mainloop of the CuTe GEMMs (fragments double-buffered across k steps
and k tiles): configuration rules, unchanged identities of the default kernels, and a cross-
compiled SASS check. Not yet validated on a GPU (docs/next-measurements.md)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from composer.gemm.cute.config import GemmConfig
from composer.gemm.cute.tiles import role_kernel

X511 = {"bm": 128, "bn": 128, "bk": 32, "warps_m": 2, "warps_n": 4, "stages": 3}


def test_prefetch_is_a_tile_option_with_its_own_identity() -> None:
    plain = role_kernel("x", 512, 1, "16x8x4", X511).config
    pf = role_kernel("x", 512, 1, "16x8x4", dict(X511, prefetch=True)).config
    assert not plain.prefetch and pf.prefetch
    assert pf.tag == plain.tag + "_pf" and pf.key() != plain.key()
    # configurations without the option keep the cache keys they had before it existed
    fields = asdict(plain)
    fields.pop("prefetch")
    assert plain.key() == hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def test_prefetch_needs_an_even_number_of_k_steps() -> None:
    cfg = role_kernel("x", 512, 1, "16x8x16", dict(X511, bk=16)).config  # one k step per tile
    with pytest.raises(ValueError, match="even number of k steps"):
        replace(cfg, prefetch=True).validate()


def test_prefetch_kernel_cross_compiles_with_the_same_dmma_count(tmp_path: Path) -> None:
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed")
    from composer.gemm.cute.compile import compile_config
    from composer.inspect_sass import inspect_cubin

    counts = {}
    for pf in (False, True):
        cfg: GemmConfig = role_kernel("x", 512, 1, "16x8x4", dict(X511, prefetch=pf)).config
        cubin = compile_config(cfg, "sm_90", f"pf{int(pf)}", cache_dir=tmp_path)
        sass = next(iter(inspect_cubin(cubin.cubin).values()))
        assert sass.spill_bytes == 0
        counts[pf] = sass.dmma
    # same MMAs (the mainloop body is unrolled once per k tile, plus nothing else)
    assert counts[True] == counts[False] == {"16x8x4": 128}
