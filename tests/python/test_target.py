"""Which CUDA runtime and NCCL a program would use (symmpin.target, symmpin._probe), on the CPU:
ldd's output and #! lines parsed from made-up text; the probe run by another Python environment
(a fresh virtual environment holding a FAKE `torch` package and the FAKE libnccl.so.2 of
tests/fakes where pip's nvidia-nccl wheel puts it); a script and a binary as `doctor -- CMD`."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from symmpin import _probe, target

FAKE_NCCL = os.environ["SYMMPIN_TEST_FAKE_NCCL"]
REPLAY = os.environ["SYMMPIN_TEST_REPLAY"]

LDD = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibcudart.so.13 => /usr/local/cuda/lib64/libcudart.so.13 (0x00007f3b84a00000)
\tlibnccl.so.2 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f3b8481e000)
"""


class Parsing(unittest.TestCase):
    def test_ldd_lines(self):
        self.assertEqual(target.parse_ldd(LDD), [
            ("libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.13"),
            ("libnccl.so.2", None)])

    def test_probe_output_among_chatter(self):
        text = 'warning: something\nSYMMPIN-PROBE {"libraries": []}\nmore chatter\n'
        self.assertEqual(target.parse_probe_output(text), {"libraries": []})
        self.assertIsNone(target.parse_probe_output("SYMMPIN-PROBE {broken\n"))
        self.assertIsNone(target.parse_probe_output(""))

    def test_interpreter_lines(self):
        with tempfile.TemporaryDirectory() as d:
            def script(text):
                p = os.path.join(d, "s")
                with open(p, "wb") as f:
                    f.write(text)
                return target.interpreter_of(p)
            self.assertEqual(script(b"#!/opt/venv/bin/python3.11\nimport x\n"),
                             "/opt/venv/bin/python3.11")
            self.assertEqual(script(b"#!/usr/bin/env -S bash -e\n"), shutil.which("bash"))
            self.assertIsNone(script(b"\x7fELF\x02\x01"))
            self.assertEqual(script(b"#!\n"), "")

    def test_nccl_version_of_the_fake_library(self):
        self.assertEqual(_probe.version_of(FAKE_NCCL), ([2, 28, 9], None))
        ver, err = _probe.version_of("/nonexistent/libnccl.so.2")
        self.assertIsNone(ver)
        self.assertTrue(err)


FAKE_TORCH = '''"""FAKE torch for symmpin's tests: loads the NCCL its environment holds, as PyTorch does."""
import ctypes, glob, os, site
__version__ = "0.0-fake"
class version:
    cuda = "13.0"
class _Nccl:
    @staticmethod
    def version():
        return (2, 28, 9)
class cuda:
    nccl = _Nccl
    @staticmethod
    def is_available():
        return False
for d in site.getsitepackages():
    for p in glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so.2")):
        ctypes.CDLL(p)
'''


class AnotherEnvironment(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        venv = os.path.join(cls.tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True,
                       timeout=120)
        cls.python = os.path.join(venv, "bin", "python")
        site_dir = subprocess.run([cls.python, "-c", "import site; print(site.getsitepackages()"
                                   "[0])"], check=True, stdout=subprocess.PIPE,
                                  text=True).stdout.strip()
        cls.site = site_dir
        lib = os.path.join(site_dir, "nvidia", "nccl", "lib")
        os.makedirs(lib)
        shutil.copy(FAKE_NCCL, os.path.join(lib, "libnccl.so.2"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_without_torch_the_wheels_copy_is_found_in_site_packages(self):
        t = target.python_target(self.python)
        self.assertEqual(t["how"], "python")
        self.assertIsNone(t["torch"])
        nccl = [e for e in t["libraries"] if e["kind"] == "nccl"]
        self.assertEqual(len(nccl), 1)
        self.assertEqual((nccl[0]["how"], nccl[0]["version"]), ("site-packages", [2, 28, 9]))
        self.assertTrue(nccl[0]["path"].startswith(os.path.realpath(self.site)))

    def test_with_torch_what_it_loaded_is_read_from_the_maps(self):
        pkg = os.path.join(self.site, "torch")
        os.makedirs(pkg)
        try:
            with open(os.path.join(pkg, "__init__.py"), "w") as f:
                f.write(FAKE_TORCH)
            t = target.python_target(self.python)
        finally:
            shutil.rmtree(pkg)
        self.assertEqual(t["torch"]["version"], "0.0-fake")
        self.assertEqual(t["torch"]["nccl"], [2, 28, 9])
        nccl = [e for e in t["libraries"] if e["kind"] == "nccl"]
        self.assertEqual([e["how"] for e in nccl], ["loaded"])

    def test_a_python_script_is_probed_as_its_python(self):
        script = os.path.join(self.tmp, "launcher")
        with open(script, "w") as f:
            f.write(f"#!{self.python}\nprint('hi')\n")
        os.chmod(script, 0o755)
        t = target.command_target([script, "--nproc_per_node=2"])
        self.assertEqual(t["how"], "python")
        self.assertIn("is a Python script: probed its Python", t["note"])
        self.assertTrue(any(e["kind"] == "nccl" for e in t["libraries"]))


class Programs(unittest.TestCase):
    def test_a_shell_script_cannot_be_told(self):
        with tempfile.TemporaryDirectory() as d:
            s = os.path.join(d, "job.sh")
            with open(s, "w") as f:
                f.write("#!/bin/sh\nexec ./app\n")
            os.chmod(s, 0o755)
            t = target.command_target([s])
        self.assertEqual(t["how"], "unknown")
        self.assertIn("ldd cannot tell", t["note"])

    def test_a_binary_without_nccl_says_ldd_cannot_tell(self):
        t = target.command_target([REPLAY])
        self.assertEqual((t["how"], t["libraries"]), ("ldd", []))
        self.assertIn("ldd lists no libnccl", t["note"])

    def test_a_program_that_is_not_there(self):
        t = target.command_target(["/nonexistent/prog"])
        self.assertEqual(t["how"], "unknown")
        self.assertIn("is not a program here", t["note"])

    def test_no_such_python(self):
        t = target.python_target("/nonexistent/python3")
        self.assertEqual(t["how"], "unknown")


if __name__ == "__main__":
    unittest.main()
