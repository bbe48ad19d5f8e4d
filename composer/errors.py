"""Project exception hierarchy: one base so the CLI can turn any expected failure into one line."""

from __future__ import annotations


class ComposerError(Exception):
    """Base of every error the project raises on purpose (bad input, unsupported request)."""


class ConfigError(ComposerError, ValueError):
    """A configuration file or value is invalid.

    The message starts with the file and the dotted key, e.g.
    ``p0007.toml: benchmark.dt: expected a positive float, got 'abc'``, so a user can fix it
    without a traceback.
    """
