"""The instruction-aware performance model of the paper (§6-9, A2-A3): per kernel, demands per
resource from Nsight Compute counters priced by the instructions each machine issues, one
calibration factor eta, and predictions for machines (or SM counts) that are not run.

Modules, one job each: ``counters`` (the ncu metrics read), ``kernels`` (what a kernel name is),
``capacity`` (a machine's capacities per SM cycle, restricted or not), ``demand`` (Equations 3-7,
eta, closure), ``shapes`` (DMMA counts across shapes, Equation 8), ``build`` (a cross-compiled
build's SASS shapes), ``calibrate`` (profiles -> model file), ``predict`` (model + machine + build
-> predictions file), ``ratios`` (the seven ratios, S/E), ``measured`` and ``score``.
"""
