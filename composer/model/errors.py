"""The model's bad-input errors: each names what is missing or does not match, in one line."""

from __future__ import annotations

from composer.errors import ComposerError


class ModelError(ComposerError):
    """Base of the instruction-aware model's errors."""


class MissingMetricError(ModelError):
    """A profile lacks a metric the model reads (the message names the metric and the file)."""


class KernelListMismatch(ModelError):
    """A build or a measurement does not hold the kernels of the calibration (names them)."""


class MissingCapacityError(ModelError):
    """A machine of the table has no capacities per SM cycle, so it cannot be predicted."""


class ModelFileError(ModelError):
    """A model or prediction file is unreadable, of another schema, or altered after writing."""
