"""Time option variants of the paths against each other in one interleaved run (GPU)
(composer.bench.variants): each variant validated on the point-varying input first, then timed on
one resident benchmark problem, device µs per tendency call, with the SM clock sampled (NVML).

    python3 tools/variants_bench.py --order 511 --variant GEMM --variant GEMM:overlap_sms=44 \\
        --variant GEMM_FUSED --variant GEMM_FUSED:overlap_sms=44 [--rounds 5] [--calls 5] [--out F] [--json]

A variant is PATH or PATH:KEY=VALUE[,KEY=VALUE...] (the keys of ``--option PATH.KEY=VALUE``), or with ``;``
between options when a value holds commas: 'GEMM_FUSED:overlap_sms=44;carrier_tile=bm=128,bn=64,stagger_us=50'
(one such option alone ends with ';': 'GEMM_FUSED:carrier_tile=bm=128,bn=64;').
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.bench.variants import Variant, parse_variant, run_variants, summary, table_lines  # noqa: E402
from composer.cli.arguments import positive_int  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fileio import atomic_write_text, emit_json  # noqa: E402


def gpu_steps(order: int, calls: int, inspect: Any = None) -> tuple[Any, Any, Any]:
    """(validate, measure, close) on the GPU (``composer.bench.resident``), as the carrier sweep's;
    a variant the path refuses fails its validation (it is not timed) instead of stopping the run.
    ``inspect(variant, path)`` sees each timed path before it closes (its device counters)."""
    from composer.bench.resident import resident_steps

    return resident_steps(order, calls, lambda variant: (variant.path, dict(variant.options)), errors_fail=True,
                          inspect=inspect)


class PartialRecord:
    """The samples and device counters taken so far; with ``out``, the file is rewritten after every
    sample (``"partial": true``), so a call cut off by its time limit still leaves what it measured;
    the final summary replaces it."""

    def __init__(self, out: str | None, order: int) -> None:
        self.out, self.order = out, order
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}
        self.samples_us: dict[str, list[float]] = {}

    def inspect(self, variant: Variant, path: Any) -> None:
        """``resident_steps``'s hook: the timed path's device counters (before it closes)."""
        self.diagnostics.setdefault(variant.label, []).append(path.diagnostics())

    def timed(self, measure: Any) -> Any:
        """``measure`` that also records each sample and rewrites the partial file."""
        def run(variant: Variant) -> float:
            seconds = measure(variant)
            self.samples_us.setdefault(variant.label, []).append(1e6 * seconds)
            if self.out:
                atomic_write_text(Path(self.out), json.dumps(
                    {"partial": True, "order": self.order, "samples_us": self.samples_us,
                     "diagnostics": self.diagnostics}, indent=2) + "\n")
            return seconds
        return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--order", type=positive_int, required=True)
    parser.add_argument("--variant", action="append", required=True,
                        help="PATH or PATH:KEY=VALUE[,KEY=VALUE...], repeatable; the first is the ratios' base")
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--calls", type=positive_int, default=5, help="timed tendency calls per sample")
    parser.add_argument("--out", help="also write the JSON here (atomically)")
    parser.add_argument("--json", action="store_true", help="print the JSON instead of one line per variant")
    args = parser.parse_args(argv)
    try:
        variants = [parse_variant(text) for text in args.variant]
        from composer.bench.nvml import ClockSampler

        record = PartialRecord(args.out, args.order)
        validate, measure, close = gpu_steps(args.order, args.calls, record.inspect)
        sampler = ClockSampler()
        try:
            sampler.start()
            results = run_variants(variants, validate, record.timed(measure), args.rounds)
        finally:
            sampler.stop()
            close()
        clocks = sampler.summary()
        result = summary(results, {"order": args.order, "rounds": args.rounds, "calls": args.calls,
                                   "clocks": clocks.to_dict() if hasattr(clocks, "to_dict") else vars(clocks)},
                         record.diagnostics)
    except ComposerError as exc:
        print(f"variants_bench: {exc}", file=sys.stderr)
        return 2
    if args.json:
        emit_json(result, args.out)
        return 0
    if args.out:
        atomic_write_text(Path(args.out), json.dumps(result, indent=2) + "\n")
    try:
        for line in table_lines(result):
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # | head closed the pipe: the file is written, stop quietly
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
