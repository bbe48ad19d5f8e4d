"""Hardware facts, below everything else: the DMMA instruction shapes (``mma``), the per-architecture
SM and block limits (``limits``, data in ``archs.toml``), the machine capacity table (``machines``),
and what a cubin's SASS says about a kernel (``sass``, ``hotloop``).

Nothing here imports a path, a kernel generator, the runtime or the schedule loader: only
``composer.errors``, the generic TOML field readers (``composer.config.fields``) and the
packaged-data locator (``composer.packaged``). The generators, the build, the inspector and the
model all read the same facts from this one package.
"""
