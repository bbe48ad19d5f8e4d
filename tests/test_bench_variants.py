"""composer.bench.variants with fake GPU steps: parsing, validation before timing, interleaving, ratios."""

from __future__ import annotations

import pytest

from composer.bench.variants import parse_variant, run_variants, summary, table_lines
from composer.errors import ComposerError


def test_variants_parse_with_their_paths_options():
    v = parse_variant("gemm_fused:overlap_sms=44,overlap_first=z")
    assert (v.path, dict(v.options), v.label) == ("GEMM_FUSED", {"overlap_sms": "44", "overlap_first": "z"},
                                                  "GEMM_FUSED:overlap_sms=44,overlap_first=z")
    assert parse_variant("GEMM").label == "GEMM"
    tiled = parse_variant("GEMM_FUSED:overlap_sms=44;carrier_tile=bm=128,bn=64,stagger_us=50")
    assert dict(tiled.options) == {"overlap_sms": "44", "carrier_tile": "bm=128,bn=64,stagger_us=50"}
    assert parse_variant(tiled.label) == tiled
    alone = parse_variant("GEMM_FUSED:carrier_tile=bm=128,bn=64;")
    assert dict(alone.options) == {"carrier_tile": "bm=128,bn=64"} and parse_variant(alone.label) == alone
    for bad, message in (("GEMM:mma=8x8x4", "has no option 'mma'"), ("GEMM:overlap_sms", "is not KEY=VALUE"),
                         ("GEMM_FUSED:carrier_tile=bm=128,bn=64", "has no option 'bn'|is not"),
                         (":x=1", "expected PATH"), ("NOPE", "unknown path")):
        with pytest.raises(ComposerError, match=message):
            parse_variant(bad)


def test_a_variant_that_fails_validation_is_never_timed_and_ratios_use_the_first():
    variants = [parse_variant(t) for t in ("GEMM", "GEMM:overlap_sms=44", "GEMM:overlap_sms=8")]
    times = {"GEMM": 10e-3, "GEMM:overlap_sms=44": 9e-3}
    order: list[str] = []

    def measure(v):
        order.append(v.label)
        return times[v.label]

    results = run_variants(variants, lambda v: (v.label != "GEMM:overlap_sms=8", "1e-14"), measure, 3)
    assert "GEMM:overlap_sms=8" not in order and len(order) == 6
    assert order[:2] != order[2:4]  # the order rotates between rounds
    doc = summary(results, {"order": 511})
    rows = {r["variant"]: r for r in doc["variants"]}
    assert rows["GEMM"]["ratio"] == 1.0 and rows["GEMM:overlap_sms=44"]["ratio"] == pytest.approx(0.9)
    assert rows["GEMM:overlap_sms=8"]["median_us"] is None and not rows["GEMM:overlap_sms=8"]["validated"]
    assert doc["order"] == 511 and len(table_lines(doc)) == 3 and "not timed" in table_lines(doc)[2]


def test_the_same_variant_twice_is_refused():
    v = parse_variant("GEMM")
    with pytest.raises(ComposerError, match="named twice: GEMM"):
        run_variants([v, v], lambda _: (True, ""), lambda _: 1.0, 1)


def test_a_fallback_is_kept_with_its_samples_and_named_in_the_table():
    variants = [parse_variant("GEMM"), parse_variant("GEMM:overlap_sms=44")]
    results = run_variants(variants, lambda v: (True, "1e-15"), lambda v: 1e-3, rounds=2)
    diagnostics = {"GEMM:overlap_sms=44": [{"overlap_leftover_chunks": 0}, {"overlap_leftover_chunks": 7}]}
    result = summary(results, diagnostics=diagnostics)
    rows = {r["variant"]: r for r in result["variants"]}
    assert "diagnostics" not in rows["GEMM"]
    assert [d["overlap_leftover_chunks"] for d in rows["GEMM:overlap_sms=44"]["diagnostics"]] == [0, 7]
    lines = table_lines(result)
    assert "FALLBACK" not in lines[0] and "FALLBACK: 7 chunks" in lines[1]


def test_the_tool_rewrites_its_partial_file_after_every_sample(tmp_path):
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("variants_bench", Path(__file__).parents[1] / "tools" / "variants_bench.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = tmp_path / "v.json"
    record = tool.PartialRecord(str(out), 511)
    variant = parse_variant("GEMM:overlap_sms=32")

    class Path_:
        def diagnostics(self):
            return {"overlap_leftover_chunks": 0}

    def measure(v):
        record.inspect(v, Path_())
        return 2e-3

    timed = record.timed(measure)
    assert timed(variant) == 2e-3
    first = json.loads(out.read_text())
    assert first["partial"] and first["samples_us"] == {variant.label: [2000.0]}
    timed(variant)
    second = json.loads(out.read_text())
    assert second["samples_us"][variant.label] == [2000.0, 2000.0]
    assert len(second["diagnostics"][variant.label]) == 2


def test_each_path_also_has_a_ratio_to_its_own_unsplit_variant():
    variants = [parse_variant(t) for t in ("GEMM_FUSED", "GEMM_FUSED:overlap_sms=32", "GEMM:overlap_sms=32", "GEMM")]
    times = {"GEMM_FUSED": 8e-3, "GEMM_FUSED:overlap_sms=32": 7.6e-3, "GEMM": 10e-3, "GEMM:overlap_sms=32": 9.5e-3}
    rows = {r["variant"]: r for r in summary(run_variants(variants, lambda v: (True, "0"),
                                                          lambda v: times[v.label], 1))["variants"]}
    assert rows["GEMM"]["ratio"] == pytest.approx(1.25) and rows["GEMM"]["ratio_to_path"] == 1.0
    assert rows["GEMM:overlap_sms=32"]["ratio_to_path"] == pytest.approx(0.95)
    assert rows["GEMM_FUSED:overlap_sms=32"]["ratio_to_path"] == pytest.approx(0.95)
