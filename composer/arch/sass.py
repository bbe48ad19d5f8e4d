"""What a CUBIN really executes: DMMA shapes and counts, DFMA count, registers, local memory and
shared memory per kernel, read from ``cuobjdump -sass -res-usage``.

Why: the FP64 tensor-core shape a kernel asks for in PTX is not always what the hardware runs
(sm_100 splits m16n8k4 into two m8n8k4 DMMAs, the paper's S7.3), and ptxas may spill a
register-hungry tile. Counting the SASS is the only check that works without the target GPU.

The disassembler comes from the ``nvidia-cuda-cuobjdump`` wheel (13.5, which also needs
``nvidia-cuda-nvdisasm`` beside it), found through the ``nvidia`` namespace package; the
system ``cuobjdump`` on PATH is the fallback and ``$COMPOSER_CUOBJDUMP`` overrides both.
SASS spellings differ by architecture (``DMMA.884`` on sm_80, ``DMMA.16x8x4`` on sm_90): the
report normalizes them to ``8x8x4``-style keys so one expectation reads the same everywhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from composer.errors import ComposerError
from composer.arch.mma import arch_number, expected_sass, mma_shape

CUOBJDUMP_ENV = "COMPOSER_CUOBJDUMP"

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_CODE_FOR = re.compile(r"^\s*code for (sm_\d+[af]?)")
_ARCH_BLOCK = re.compile(r"^\s*arch\s*=\s*(sm_\d+[af]?)")
# "/*0a40*/  @!P0 DMMA.16x8x4 R8, ..." -> opcode with its dotted modifiers
_INSTR = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")
_RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+?)\s*:\s*$")
_RES_FIELD = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")
_DMMA_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")
_DMMA_COMPACT = re.compile(r"^(\d)(\d)(\d)$")  # sm_80: DMMA.884


class InspectError(ComposerError):
    """The disassembler is missing or failed, or a CUBIN does not look like one."""


@dataclass(frozen=True)
class KernelSass:
    """Per-kernel summary of a CUBIN's SASS.

    ``dmma`` maps a normalized shape (``"16x8x4"``) to its instruction count; ``spill_bytes`` is
    the per-thread local memory (stack frame + local arrays: where ptxas spills);
    ``shared_bytes`` is static shared memory only (dynamic shared memory is a launch parameter,
    recorded in the build manifest, not in the CUBIN).
    """

    name: str
    arch: str
    dmma: dict[str, int]
    dfma: int
    registers: int
    spill_bytes: int
    shared_bytes: int
    local_stores: int = 0  # STL instructions: spill stores when spill_bytes > 0
    local_loads: int = 0
    dmma_spellings: dict[str, int] = field(default_factory=dict)  # raw SASS opcode -> count
    # global memory instructions by access width in bits ({"64": 8, "128": 4}): what an epilogue
    # reads and writes (a fused GEMM that stores only its output has the plain GEMM's stores)
    global_loads: dict[str, int] = field(default_factory=dict)
    global_stores: dict[str, int] = field(default_factory=dict)
    l2_prefetches: int = 0  # CCTL.E.PF2: prefetch.global.L2 (a carrier's epilogue_prefetch)

    @property
    def dmma_total(self) -> int:
        return sum(self.dmma.values())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- the disassembler -------------------------------------------------------------------------


def _wheel_tool_dirs() -> list[Path]:
    """``bin`` folders of the NVIDIA CUDA wheels (cu13 layout first, then per-package layouts)."""
    try:
        import nvidia  # namespace package of the NVIDIA wheels
    except ImportError:
        return []
    dirs: list[Path] = []
    for root in map(Path, getattr(nvidia, "__path__", [])):
        dirs += [root / "cu13" / "bin", root / "cuda_cuobjdump" / "bin", root / "cu12" / "bin"]
    return dirs


def find_cuobjdump() -> Path:
    """The cuobjdump to use: ``$COMPOSER_CUOBJDUMP``, the PyPI wheel's, else the one on PATH."""
    override = os.environ.get(CUOBJDUMP_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise InspectError(f"${CUOBJDUMP_ENV}={override}: no such file")
        return path
    for directory in _wheel_tool_dirs():
        candidate = directory / "cuobjdump"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("cuobjdump")
    if found:
        return Path(found)
    raise InspectError("cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm "
                       f"(or put cuobjdump on PATH, or set ${CUOBJDUMP_ENV})")


def tool_version(tool: Path | None = None) -> str:
    """``cuobjdump --version``'s release line (for provenance in reports)."""
    exe = tool or find_cuobjdump()
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"release\s+([\d.]+)", out) or re.search(r"V([\d.]+)", out)
    return match.group(1) if match else out.strip().splitlines()[-1] if out.strip() else "unknown"


def disassemble(path: Path) -> str:
    """``cuobjdump -res-usage -sass`` text of a CUBIN or fatbinary file."""
    exe = find_cuobjdump()
    env = dict(os.environ)
    # cuobjdump runs nvdisasm; the wheel ships it beside cuobjdump, so put that folder first.
    env["PATH"] = os.pathsep.join([str(exe.parent), env.get("PATH", "")])
    proc = subprocess.run([str(exe), "-res-usage", "-sass", str(path)], capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode != 0:
        raise InspectError(f"{exe} -sass {path} failed (exit {proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()[:500]}")
    return proc.stdout


# --- parsing ----------------------------------------------------------------------------------


def normalize_dmma(opcode: str) -> str:
    """``DMMA.884`` -> ``8x8x4``; ``DMMA.16x8x4`` -> ``16x8x4``; modifiers after the shape dropped."""
    parts = opcode.split(".")
    if len(parts) < 2 or parts[0] != "DMMA":
        raise ValueError(f"not a DMMA opcode: {opcode!r}")
    token = parts[1]
    match = _DMMA_SHAPE.match(token)
    if match:
        return "x".join(match.groups())
    match = _DMMA_COMPACT.match(token)
    if match:
        return "x".join(match.groups())
    raise ValueError(f"unrecognized DMMA spelling {opcode!r}")


@dataclass
class _Counts:
    arch: str = ""
    dmma: dict[str, int] = field(default_factory=dict)
    spellings: dict[str, int] = field(default_factory=dict)
    dfma: int = 0
    stl: int = 0
    ldl: int = 0
    ldg: dict[str, int] = field(default_factory=dict)
    stg: dict[str, int] = field(default_factory=dict)
    pf2: int = 0


def _function_lines(text: str) -> Iterator[tuple[str, str, str | None]]:
    """(arch, function, line) for every line of the ``-sass`` section inside a function; a function's
    header yields it once with line None (so that a function without instructions still appears)."""
    arch, name = "", None
    for line in text.splitlines():
        m = _CODE_FOR.match(line)
        if m:
            arch, name = m.group(1), None
            continue
        m = _FUNCTION.match(line)
        if m:
            name = m.group(1)
            yield arch, name, None
        elif name is not None:
            yield arch, name, line


def _access_bits(opcode: str) -> str:
    """Access width of ``LDG.E.128``-style opcodes in bits ("32" when no width modifier is given)."""
    widths = [m for m in opcode.split(".")[1:] if m in ("8", "16", "32", "64", "128", "U8", "S8", "U16", "S16")]
    return widths[-1].lstrip("US") if widths else "32"


def _parse_sass(text: str) -> dict[tuple[str, str], _Counts]:
    """Instruction counts per (arch, function) from the ``-sass`` section."""
    out: dict[tuple[str, str], _Counts] = {}
    for arch, name, line in _function_lines(text):
        current = out.setdefault((arch, name), _Counts(arch=arch))
        if line is None:
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        opcode = m.group(1)
        base = opcode.split(".", 1)[0]
        if base == "DMMA":
            shape = normalize_dmma(opcode)
            current.dmma[shape] = current.dmma.get(shape, 0) + 1
            current.spellings[opcode] = current.spellings.get(opcode, 0) + 1
        elif base == "DFMA":
            current.dfma += 1
        elif base == "STL":
            current.stl += 1
        elif base == "LDL":
            current.ldl += 1
        elif base == "CCTL" and ".PF2" in opcode:
            current.pf2 += 1
        elif base in ("LDG", "STG"):
            bits = _access_bits(opcode)
            target = current.ldg if base == "LDG" else current.stg
            target[bits] = target.get(bits, 0) + 1
    return out


def _parse_res_usage(text: str) -> dict[tuple[str, str], dict[str, int]]:
    """``REG``/``STACK``/``SHARED``/``LOCAL`` per (arch or "", function) from ``-res-usage``."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    arch, current = "", None
    for line in text.splitlines():
        m = _ARCH_BLOCK.match(line) or _CODE_FOR.match(line)
        if m:
            arch = m.group(1)
            continue
        m = _RES_FUNCTION.match(line)
        if m:
            current = m.group(1)
            continue
        if current is not None and "REG:" in line:
            out[(arch, current)] = {k: int(v) for k, v in _RES_FIELD.findall(line)}
            current = None
    return out


def parse_cuobjdump(text: str) -> dict[str, KernelSass]:
    """Kernel summaries from ``cuobjdump -res-usage -sass`` output.

    Keys are function names; a fatbinary holding several architectures keys them ``sm_XX:name``.
    """
    sass = _parse_sass(text)
    usage = _parse_res_usage(text)
    multi_arch = len({arch for arch, _ in sass}) > 1
    result: dict[str, KernelSass] = {}
    for (arch, name), counts in sass.items():
        res = usage.get((arch, name)) or usage.get(("", name)) or {}
        key = f"{arch}:{name}" if multi_arch else name
        result[key] = KernelSass(
            name=name, arch=arch, dmma=dict(sorted(counts.dmma.items())), dfma=counts.dfma,
            registers=res.get("REG", 0), spill_bytes=res.get("STACK", 0) + res.get("LOCAL", 0),
            shared_bytes=res.get("SHARED", 0), local_stores=counts.stl, local_loads=counts.ldl,
            dmma_spellings=dict(sorted(counts.spellings.items())),
            global_loads=dict(sorted(counts.ldg.items())), global_stores=dict(sorted(counts.stg.items())),
            l2_prefetches=counts.pf2)
    return result


def function_sass(text: str) -> dict[str, str]:
    """The ``-sass`` listing of every function, keyed as :func:`parse_cuobjdump` keys kernels."""
    listings: dict[tuple[str, str], list[str]] = {}
    for arch, name, line in _function_lines(text):
        lines = listings.setdefault((arch, name), [])
        if line is not None:
            lines.append(line)
    multi_arch = len({a for a, _ in listings}) > 1
    return {(f"{a}:{n}" if multi_arch else n): "\n".join(lines) for (a, n), lines in listings.items()}


def inspect_cubin(cubin: bytes | Path | str) -> dict[str, KernelSass]:
    """Disassemble a CUBIN (bytes or a file) and summarize every kernel in it."""
    if isinstance(cubin, (bytes, bytearray)):
        if not bytes(cubin[:4]) == b"\x7fELF" and not bytes(cubin[:4]) == b"\x50\xed\x55\xba":
            raise InspectError("not a CUBIN (ELF) or fatbinary image")
        with tempfile.TemporaryDirectory(prefix="composer-sass-") as tmp:
            path = Path(tmp) / "image.cubin"
            path.write_bytes(bytes(cubin))
            return parse_cuobjdump(disassemble(path))
    path = Path(cubin)
    if not path.is_file():
        raise InspectError(f"{path}: no such CUBIN")
    return parse_cuobjdump(disassemble(path))


# --- expectations -----------------------------------------------------------------------------


def check_expected(kernels: Mapping[str, KernelSass] | Iterable[KernelSass], mma: str,
                   arch: str | None = None, mma_per_kernel: Mapping[str, int] | None = None,
                   allow_spills: bool = True) -> list[str]:
    """Problems (empty list: all good) with kernels that should issue the PTX shape ``mma``.

    Each kernel must contain DMMA, and only of the SASS shape ``mma`` becomes on its arch (e.g.
    16x8x4 -> ``16x8x4`` on sm_90, ``8x8x4`` on sm_100); on an expanding arch the count must be
    a multiple of the expansion factor. ``mma_per_kernel`` optionally pins the exact number of
    PTX mma instructions per kernel name (for kernels whose unrolling is known). ``arch`` defaults
    to the one in the SASS. With ``allow_spills=False`` local memory (spills) is a problem too.
    """
    items = list(kernels.values()) if isinstance(kernels, Mapping) else list(kernels)
    shape = mma_shape(mma)
    problems: list[str] = []
    if not items:
        return ["no kernels found"]
    for k in items:
        target = arch or k.arch
        try:
            want, factor = expected_sass(shape, target)
        except ValueError as exc:
            problems.append(f"{k.name} ({target}): {exc}")
            continue
        if k.dmma_total == 0:
            problems.append(f"{k.name} ({target}): no DMMA instruction (expected DMMA {want})")
            continue
        other = {s: n for s, n in k.dmma.items() if s != want}
        if other:
            problems.append(f"{k.name} ({target}): expected only DMMA {want} for mma {shape.name}, "
                            f"found {k.dmma}")
        count = k.dmma.get(want, 0)
        if count % factor:
            problems.append(f"{k.name} ({target}): {count} DMMA {want} is not a multiple of {factor} "
                            f"(each {shape.name} should expand to {factor})")
        if mma_per_kernel and k.name in mma_per_kernel and count != factor * mma_per_kernel[k.name]:
            problems.append(f"{k.name} ({target}): {count} DMMA {want}, expected "
                            f"{factor} x {mma_per_kernel[k.name]} = {factor * mma_per_kernel[k.name]}")
        if k.spill_bytes and not allow_spills:
            problems.append(f"{k.name} ({target}): {k.spill_bytes} bytes of local memory per thread "
                            f"({k.local_stores} STL, {k.local_loads} LDL): register spills")
    return problems


def arch_of(kernels: Mapping[str, KernelSass]) -> str:
    """The single architecture of a CUBIN's kernels ("" if none; mixed raises)."""
    archs = {k.arch for k in kernels.values()}
    if len(archs) > 1:
        raise InspectError(f"kernels of several architectures: {sorted(archs)}")
    arch = archs.pop() if archs else ""
    if arch:
        arch_number(arch)
    return arch
