"""Project exception hierarchy: one base so the CLI can turn any expected failure into one line.

Every error the project raises on purpose derives from ComposerError, whatever layer raises it
(the runtime's CudaError, NoGpuError, CompileError, ... keep a second, builtin base such as
RuntimeError or MemoryError for callers that catch those). Each class says how the command line
reports it: ``exit_status`` (2: the command cannot do what was asked — bad input, a missing GPU,
tool or package; 1: a check ran and failed) and an optional ``hint``, the one thing to do about it.
"""

from __future__ import annotations

#: Exit statuses of the ``composer`` command (composer/cli/main.py documents the contract).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


class ComposerError(Exception):
    """Base of every error the project raises on purpose (bad input, unsupported request)."""

    exit_status: int = EXIT_USAGE
    hint: str = ""


class ConfigError(ComposerError, ValueError):
    """A configuration file or value is invalid.

    The message starts with the file and the dotted key, e.g.
    ``p0007.toml: benchmark.dt: expected a positive float, got 'abc'``, so a user can fix it
    without a traceback.
    """


class RunFailure(ComposerError):
    """A step of a run failed on the device or in a compiler (a CUDA call, a kernel launch, a
    compile, a device allocation), as opposed to a request that is wrong: a benchmark sweep records
    it against the run and goes on, where any other ComposerError stops the sweep."""


class CheckFailed(ComposerError):
    """A check ran to the end and its verdict is a failure (a validation criterion, a SASS
    expectation). The command has printed its report; the message says which criteria failed."""

    exit_status = EXIT_CHECK_FAILED
