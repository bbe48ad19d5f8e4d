"""``composer build``: cross-compile every kernel a configuration needs into a build directory
(CUBINs + JSON manifest) on a machine without a GPU; see ``plan`` and ``builder``."""

from composer.build.builder import MANIFEST, BuildError, BuildReport, build
from composer.build.plan import BuildJob, plan

__all__ = ["MANIFEST", "BuildError", "BuildReport", "BuildJob", "build", "plan"]
