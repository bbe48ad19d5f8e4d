"""Fused element-local paths (FUSED, FUSED_TC, FUSED_DFMA, FUSED_TC16): one volume-kernel template
specialized per order by the ``[paths.FUSED*]`` schedule tables and compiled through NVRTC.

``config`` reads and checks the schedule tables, ``builder`` renders and compiles the kernels,
``emulate`` replays their index math in NumPy for CPU tests; ``composer.paths.fused`` launches
them as Path objects.
"""

from composer.fused.config import SUPPORTED_ORDERS, VARIANTS, FusedConfig, KernelConfig, fused_config

__all__ = ["SUPPORTED_ORDERS", "VARIANTS", "FusedConfig", "KernelConfig", "fused_config"]
