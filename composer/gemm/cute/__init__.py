"""FP64 GEMM kernels written in the CuTe DSL (``nvidia-cutlass-dsl``) with our own DMMA atom.

Importing this package does not import the DSL: ``config``, ``tiles``, ``swizzle`` and
``epilogue`` (pure Python) serve the build, the manifest and the tests on machines without it;
the DSL (``kernel``, ``atom``, ``compile``) is needed only to *compile* kernels
(``composer build``), never to run them.
"""
