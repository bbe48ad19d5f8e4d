"""Nsight Compute profiling of one tendency call per (path, order): the binding resource of each kernel."""

from .ncu import KernelProfile, find_ncu, parse_raw_csv, summarize

__all__ = ["KernelProfile", "find_ncu", "parse_raw_csv", "summarize"]
