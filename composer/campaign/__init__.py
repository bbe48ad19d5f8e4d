"""``composer campaign``: the whole study on one GPU as one resumable command.

``plan`` turns the axes and orders into steps (each an existing ``composer`` command: bench,
profile, graph), ``estimate`` prices them before anything runs, ``runner`` runs them in order under
a budget with a journal (``journal``, ``budget``), ``execute`` is the device side (a seam tests
replace with a fake device), and ``decide`` writes what was measured (or predicted) into the
crossover map that ``path="auto"`` reads (``composer.config.crossover``).
"""
