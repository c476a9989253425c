"""symmpin's front command: `symmpin run`, `replay`, `bench`, `doctor`, `version` (symmpin.cli).

libsymmpin.so is a C library preloaded under unmodified NCCL programs; this package finds it,
runs programs under it, merges the statistics every rank writes, and checks a machine
(`symmpin doctor`). The same package is installed by pip (a wheel) and by `meson install`.
"""

from ._build import VERSION as __version__

__all__ = ["__version__"]
