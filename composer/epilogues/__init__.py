"""Epilogue visitor trees for the CuTe DSL GEMM family (GEMM_FUSED's carry and fold).

- :mod:`~composer.epilogues.tree`: the nodes (leaves Accumulator, Aux, Face, Scalar; Mul, Add,
  Neg, Fma; the Store root), their JSON and text forms and the checks a kernel needs;
- :mod:`~composer.epilogues.index`: which volume node each GEMM output element is, per role;
- :mod:`~composer.epilogues.evaluate`: the one walk of a tree over an output site, shared by
- :mod:`~composer.epilogues.numpy_eval` (the emulation the CPU tests check) and
- :mod:`~composer.epilogues.cute_emit` (the tree emitted into the kernel's epilogue hook; needs
  the CuTe DSL, imported only to compile);
- :mod:`~composer.epilogues.paper`: the paper's trees (store, fold, carry) and which GEMM runs
  which (:class:`~composer.epilogues.paper.FusedPlan`).

Importing this package imports no DSL.
"""
