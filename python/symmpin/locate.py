"""Where the library and the tools of this copy of symmpin are.

The package knows its layout from the build (_build.LAYOUT) and looks only where that layout puts
things, relative to the package's own folder, so that a wheel in one virtual environment never
picks up a library of another install:

- 'build': a meson build tree: build/python/symmpin -> build/libsymmpin.so.0,
  build/tools/symmpin-replay, build/tests/gpu/symmpin-bench;
- 'prefix': `meson install`: PREFIX/DATADIR/symmpin/python/symmpin -> PREFIX/LIBDIR/libsymmpin.so.0,
  PREFIX/BINDIR/symmpin-replay and symmpin-bench;
- 'wheel': a pip install: meson-python moves what meson installs into libdir to the
  `.symmpin.mesonpy.libs` folder beside the package (site-packages), library and symmpin-replay
  alike; the library as libsymmpin.so.0.X.Y only (a wheel holds no symbolic link). symmpin-bench
  is not in the wheel (it links NCCL; README).

SYMMPIN_LIB, when set, names the library instead (a library built elsewhere, or a test's).
"""

import os
import sysconfig
from pathlib import Path

from . import _build

LIB_NAME = f"libsymmpin.so.{_build.SOVERSION}"
# meson-python's folder for what a project installs into libdir: ".<distribution>.mesonpy.libs".
WHEEL_LIBS = ".symmpin.mesonpy.libs"


def package_dir():
    return Path(__file__).resolve().parent


def _prefix(pkg):
    """PREFIX of a 'prefix' layout: the package is PREFIX/DATADIR/symmpin/python/symmpin."""
    tail = Path(_build.DATADIR) / "symmpin" / "python" / "symmpin"
    if tail.is_absolute():
        return None  # datadir outside the prefix: the prefix cannot be told from here
    if pkg.parts[-len(tail.parts):] != tail.parts:
        return None
    return Path(*pkg.parts[:-len(tail.parts)])


def _under(prefix, folder):
    p = Path(folder)
    return p if p.is_absolute() else prefix / p


def _wheel_libs(pkg):
    """The wheel's library folder: beside the package, or in platlib where purelib differs."""
    places = [pkg.parent / WHEEL_LIBS]
    platlib = sysconfig.get_paths().get("platlib")
    if platlib:
        places.append(Path(platlib) / WHEEL_LIBS)
    return places


def places(kind, pkg=None, layout=None):
    """The folders where this layout keeps `kind` ('lib' or 'tool'), most likely first."""
    pkg = pkg or package_dir()
    layout = layout or _build.LAYOUT
    if layout == "build":
        root = pkg.parent.parent
        return [root] if kind == "lib" else [root / "tools", root / "tests" / "gpu"]
    if layout == "prefix":
        prefix = _prefix(pkg)
        if prefix is None:
            return []
        return [_under(prefix, _build.LIBDIR if kind == "lib" else _build.BINDIR)]
    if layout == "wheel":
        return _wheel_libs(pkg)
    return []


def library(env=None):
    """(path, None) for the library to preload, or (None, why it was not found)."""
    env = os.environ if env is None else env
    named = env.get("SYMMPIN_LIB")
    if named:
        p = Path(named)
        if p.is_file():
            return p.resolve(), None
        return None, f"SYMMPIN_LIB={named} is not a file"
    looked = [d / LIB_NAME for d in places("lib")]
    for p in looked:
        if p.is_file():
            return p.resolve(), None
        # A wheel is a zip, without the soname's symbolic link: only libsymmpin.so.0.X.Y is there
        # (preloaded by path, the name does not matter).
        versioned = sorted(p.parent.glob(LIB_NAME + ".*")) if p.parent.is_dir() else []
        if versioned:
            return versioned[-1].resolve(), None
    where = ", ".join(str(p) for p in looked) or f"(no place known for layout '{_build.LAYOUT}')"
    return None, f"{LIB_NAME} not found (looked at {where}; SYMMPIN_LIB names another)"


def tool(name):
    """The path of the tool `name` (symmpin-replay, symmpin-bench) of this copy, or None."""
    for d in places("tool"):
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None
