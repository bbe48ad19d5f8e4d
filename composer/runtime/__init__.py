"""Thin GPU runtime on cuda-python: NVRTC compilation with a disk cache, CUBIN manifests, device,
memory, streams, modules/launches and graph capture. Importable (and NVRTC usable) without a GPU."""

from .device import Device, default_device, device_count, gpu_available
from .elf import ElfSymbol, elf_symbols, entry_points
from .errors import (
    CompileError,
    CudaError,
    LaunchError,
    ManifestError,
    NoGpuError,
    OutOfDeviceMemory,
    check,
)
from .graph import CudaGraph, capture_graph
from .gridexpr import GridRuleError
from .gridexpr import evaluate as evaluate_grid_rule
from .manifest import KernelEntry, file_sha256, read_manifest, write_manifest
from .memory import DeviceBuffer, PinnedHostBuffer
from .module import Kernel, Module
from .nvrtc import CompiledKernel, compile_cuda, default_cache_dir, nvrtc_version
from .params import CTYPES, Param, params
from .stream import Event, Stream

__all__ = [
    "CTYPES", "CompileError", "CompiledKernel", "CudaError", "CudaGraph", "Device", "DeviceBuffer",
    "ElfSymbol", "Event", "GridRuleError", "Kernel", "KernelEntry", "LaunchError", "ManifestError", "Module",
    "NoGpuError", "OutOfDeviceMemory", "Param", "PinnedHostBuffer", "Stream", "capture_graph", "check",
    "compile_cuda", "default_cache_dir", "default_device", "device_count", "elf_symbols", "entry_points",
    "evaluate_grid_rule", "file_sha256", "gpu_available", "nvrtc_version", "params", "read_manifest",
    "write_manifest",
]
