"""Where each layout finds the library and the tools (symmpin.locate), over made-up install trees
in a temporary folder: a build tree, a `meson install` prefix, a wheel's site-packages. A copy
must find its own library and never another install's."""

import os
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from symmpin import _build, locate


def touch(p, mode=0o644):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("x")
    p.chmod(mode)
    return p


class Layouts(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_build_tree(self):
        pkg = self.root / "build" / "python" / "symmpin"
        self.assertEqual(locate.places("lib", pkg, "build"), [self.root / "build"])
        self.assertEqual(locate.places("tool", pkg, "build"),
                         [self.root / "build" / "tools", self.root / "build" / "tests" / "gpu"])

    def test_prefix(self):
        pkg = self.root / "usr" / "share" / "symmpin" / "python" / "symmpin"
        with mock.patch.multiple(_build, DATADIR="share", LIBDIR="lib/x86_64-linux-gnu",
                                 BINDIR="bin"):
            self.assertEqual(locate.places("lib", pkg, "prefix"),
                             [self.root / "usr" / "lib" / "x86_64-linux-gnu"])
            self.assertEqual(locate.places("tool", pkg, "prefix"), [self.root / "usr" / "bin"])
            with mock.patch.object(_build, "LIBDIR", "/opt/lib64"):
                self.assertEqual(locate.places("lib", pkg, "prefix"), [Path("/opt/lib64")])
            # a package that is not where the build put it finds nothing rather than a guess
            self.assertEqual(locate.places("lib", self.root / "elsewhere" / "symmpin", "prefix"),
                             [])

    def test_wheel(self):
        pkg = self.root / "site-packages" / "symmpin"
        places = locate.places("lib", pkg, "wheel")
        self.assertEqual(places[0], self.root / "site-packages" / ".symmpin.mesonpy.libs")
        self.assertEqual(locate.places("tool", pkg, "wheel"), places)

    def test_library_of_a_wheel_and_its_tool(self):
        libs = self.root / "site-packages" / ".symmpin.mesonpy.libs"
        lib = touch(libs / locate.LIB_NAME)
        tool = touch(libs / "symmpin-replay", 0o755)
        pkg = self.root / "site-packages" / "symmpin"
        with mock.patch.object(_build, "LAYOUT", "wheel"), \
                mock.patch.object(locate, "package_dir", lambda: pkg):
            self.assertEqual(locate.library({}), (lib.resolve(), None))
            self.assertEqual(locate.tool("symmpin-replay"), tool)
            self.assertIsNone(locate.tool("symmpin-bench"))
            # a wheel holds no symbolic link: the versioned file alone is found
            lib.unlink()
            versioned = touch(libs / (locate.LIB_NAME + ".1.0"))
            self.assertEqual(locate.library({}), (versioned.resolve(), None))
            versioned.unlink()
            found, why = locate.library({})
        self.assertIsNone(found)
        self.assertIn(str(libs / locate.LIB_NAME), why)

    def test_a_tool_must_be_executable(self):
        tool = touch(self.root / "build" / "tools" / "symmpin-replay", 0o644)
        with mock.patch.object(locate, "package_dir",
                               lambda: self.root / "build" / "python" / "symmpin"), \
                mock.patch.object(_build, "LAYOUT", "build"):
            self.assertIsNone(locate.tool("symmpin-replay"))
            tool.chmod(0o755)
            self.assertEqual(locate.tool("symmpin-replay"), tool)

    def test_symmpin_lib_names_another(self):
        other = touch(self.root / "other.so")
        self.assertEqual(locate.library({"SYMMPIN_LIB": str(other)}), (other.resolve(), None))
        found, why = locate.library({"SYMMPIN_LIB": str(self.root / "none.so")})
        self.assertIsNone(found)
        self.assertIn("is not a file", why)

    def test_this_build_trees_copy_finds_its_library(self):
        lib, why = locate.library({})
        self.assertEqual(lib, Path(os.environ["SYMMPIN_TEST_LIB"]).resolve(), why)


if __name__ == "__main__":
    unittest.main()
