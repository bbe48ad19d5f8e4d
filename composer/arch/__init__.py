"""Hardware facts, below everything else: the DMMA instruction shapes (``mma``), the machine
capacity table (``machines``), and what a cubin's SASS says about a kernel (``sass``, ``hotloop``).

Nothing here imports a path, a kernel generator or the runtime: the generators, the build, the
inspector and the model all read the same facts from this one package.
"""
