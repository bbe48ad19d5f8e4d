"""Option variants of the paths timed against each other in one interleaved run.

Why: ``composer bench`` times each path once per round with one set of options, so two settings of
the same path (GEMM_FUSED with and without the overlapped flux, at several partitions) can only be
compared across runs, which the power cap makes unsafe (the clock moves 1.4-1.9 GHz between runs).
Here every variant, ``PATH`` or ``PATH:KEY=VALUE[,KEY=VALUE...]``, is validated on the point-varying
input first (a variant that fails is never timed), then timed in interleaved rounds on one resident
benchmark problem; each sample is the device time per tendency call (CUDA events around ``calls``
launches after a warm-up, ``composer.paths.timer``), and the summary gives each variant's median
and its ratio to the first variant.

Pure logic: the GPU steps come in as callables, so the choice and the summary are tested with fakes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from composer.bench.interleave import interleaved_samples
from composer.errors import ComposerError


@dataclass(frozen=True)
class Variant:
    """One path with its options, named by its spelling on the command line."""

    path: str
    options: Mapping[str, str]

    @property
    def label(self) -> str:
        """The spelling ``parse_variant`` reads back (``;`` between options when a value holds a comma)."""
        if not self.options:
            return self.path
        items = [f"{k}={v}" for k, v in self.options.items()]
        if any("," in str(v) for v in self.options.values()):
            return self.path + ":" + ";".join(items) + ";"  # the trailing ';' marks the form with one option too
        return self.path + ":" + ",".join(items)


def parse_variant(text: str) -> Variant:
    """``PATH`` or ``PATH:KEY=VALUE[,KEY=VALUE...]``; the path and its keys are checked by the path.
    Options whose values hold commas (a carrier tile, ``carrier_tile=bm=128,bn=64,stagger_us=50``) are
    separated by ``;`` instead: once the text holds a ``;``, only ``;`` separates options (a single such
    option ends with one: ``GEMM_FUSED:carrier_tile=bm=128,bn=64;``)."""
    from composer.paths.registry import validate_options

    path, _, rest = str(text).strip().partition(":")
    if not path:
        raise ComposerError(f"variant {text!r}: expected PATH or PATH:KEY=VALUE[,KEY=VALUE...]")
    options: dict[str, str] = {}
    for item in filter(None, rest.split(";" if ";" in rest else ",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ComposerError(f"variant {text!r}: {item!r} is not KEY=VALUE")
        options[key.strip()] = value.strip()
    validate_options(path, options)
    from composer.paths.registry import path_class

    return Variant(path_class(path).name, options)


@dataclass(frozen=True)
class VariantResult:
    variant: Variant
    validated: bool
    detail: str
    samples: tuple[float, ...] = ()

    @property
    def median_us(self) -> float | None:
        return 1e6 * statistics.median(self.samples) if self.samples else None


def run_variants(variants: Sequence[Variant], validate: Callable[[Variant], tuple[bool, str]],
                 measure: Callable[[Variant], float], rounds: int) -> list[VariantResult]:
    """Validate every variant, then time those that passed in ``rounds`` interleaved rounds."""
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ComposerError("the same variant is named twice: " + ", ".join(sorted({x for x in labels if labels.count(x) > 1})))
    verdicts = {v.label: validate(v) for v in variants}
    passed = [v for v in variants if verdicts[v.label][0]]
    by_label = {v.label: v for v in passed}
    samples = interleaved_samples(lambda label: measure(by_label[label]), [v.label for v in passed], rounds) \
        if passed else {}
    return [VariantResult(v, verdicts[v.label][0], verdicts[v.label][1], tuple(samples.get(v.label, ())))
            for v in variants]


def summary(results: Sequence[VariantResult], extra: Mapping[str, Any] | None = None,
            diagnostics: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> dict[str, Any]:
    """Medians (µs per call), ratios to the first timed variant and to the path's own unsplit variant
    (``ratio_to_path``), with every sample and, where the
    path counted something on the device, its ``diagnostics`` after each sample (by label)."""
    base = next((r.median_us for r in results if r.median_us), None)
    # each path's own base: its first timed variant without options, else its first timed variant
    own: dict[str, float] = {}
    for r in sorted(results, key=lambda r: bool(r.variant.options)):
        if r.median_us and r.variant.path not in own:
            own[r.variant.path] = r.median_us
    rows = [{"variant": r.variant.label, "path": r.variant.path, "options": dict(r.variant.options),
             "validated": r.validated, "validation": r.detail,
             "median_us": r.median_us, "ratio": (r.median_us / base if r.median_us and base else None),
             "ratio_to_path": (r.median_us / own[r.variant.path] if r.median_us and r.variant.path in own else None),
             "samples_us": [1e6 * s for s in r.samples],
             **({"diagnostics": list(diagnostics[r.variant.label])} if diagnostics and diagnostics.get(r.variant.label)
                else {})} for r in results]
    return {"variants": rows, **dict(extra or {})}


def table_lines(result: Mapping[str, Any]) -> list[str]:
    """One line per variant: median µs, ratio to the first, validation."""
    lines = []
    for row in result["variants"]:
        timed = (f"{row['median_us']:10.1f} us  x{row['ratio']:.3f}  (x{row['ratio_to_path']:.3f} of its path)"
                 if row["median_us"] is not None else "      not timed                          ")
        leftover = max((d.get("overlap_leftover_chunks", 0) for d in row.get("diagnostics", ())), default=0)
        warning = f"  FALLBACK: {leftover} chunks left to the last block" if leftover else ""
        lines.append(f"{row['variant']:<48} {timed}  validation {row['validation']}{warning}")
    return lines
