"""Minimal ELF64 reader for CUBINs: lists function symbols so a build can be checked without cuobjdump."""

from __future__ import annotations

import struct
from dataclasses import dataclass

_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10  # st_other bit NVIDIA sets on __global__ entry points


@dataclass(frozen=True)
class ElfSymbol:
    """One symbol-table entry: name, ELF type, binding, whether it is a kernel entry, code size."""

    name: str
    kind: int
    binding: int
    entry: bool
    size: int


def _cstr(blob: bytes, off: int) -> str:
    end = blob.index(b"\0", off)
    return blob[off:end].decode("utf-8", "replace")


def elf_symbols(image: bytes) -> list[ElfSymbol]:
    """All symbols of the ``.symtab`` of a 64-bit little-endian ELF image (a CUBIN)."""
    if len(image) < 64 or image[:4] != b"\x7fELF":
        raise ValueError("not an ELF image")
    if image[4] != 2 or image[5] != 1:
        raise ValueError("only 64-bit little-endian ELF (CUBIN) is supported")
    e_shoff, = struct.unpack_from("<Q", image, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", image, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    out: list[ElfSymbol] = []
    for sh_name, sh_type, _fl, _addr, sh_offset, sh_size, sh_link, _info, _al, sh_entsize in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh_link]
        strings = image[strtab[4]: strtab[4] + strtab[5]]
        entsize = sh_entsize or 24
        for off in range(sh_offset, sh_offset + sh_size, entsize):
            st_name, st_info, st_other, _shndx, _value, st_size = struct.unpack_from("<IBBHQQ", image, off)
            if st_name == 0:
                continue
            out.append(ElfSymbol(_cstr(strings, st_name), st_info & 0xF, st_info >> 4,
                                 bool(st_other & _STO_CUDA_ENTRY), st_size))
    return out


def entry_points(image: bytes) -> list[str]:
    """Names of the kernel (``__global__``) functions a CUBIN defines."""
    return [s.name for s in elf_symbols(image) if s.kind == _STT_FUNC and s.entry]
