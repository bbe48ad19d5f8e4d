"""FP64 GEMM kernels written in the CuTe DSL (``nvidia-cutlass-dsl``) with our own DMMA atom.

Importing this package does not import the DSL: ``shapes`` (pure Python) is used by the SASS
inspector and the build on machines without it; the DSL is needed only to *compile* kernels
(``composer build``), never to run them.
"""
