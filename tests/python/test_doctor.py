"""symmpin doctor on the CPU: its judgement over made-up machines (facts as symmpin.facts gathers
them), the driver facts read through a FAKE driver object (no libcuda), nvidia-smi replaced by a
FAKE script, and the real path on a machine without an NVIDIA driver (this CI machine)."""

import ctypes
import io
import json
import os
import re
import subprocess
import tempfile
import unittest

from symmpin import cudadriver, doctor, facts

CMD = os.environ.get("SYMMPIN_TEST_CMD")
H200 = {"name": "NVIDIA H200", "cc": [9, 0], "vmm": True, "posix_fd": True, "multicast": True}


def machine(ngpus=2, gpu=H200, p2p=True):
    """A machine where symmpin redirects: ngpus H200s with P2P between all, CUDA 13 driver,
    PyTorch with its cu13 runtime and NCCL 2.28.9, a loadable library, a roomy /dev/shm."""
    return {
        "symmpin": {"version": "0.1.0", "git": "test", "layout": "build",
                    "kernel_archs": ["sm_80", "sm_90", "sm_100", "sm_120", "compute_90"]},
        "library": {"path": "/x/libsymmpin.so.0", "error": None, "preload_ok": True,
                    "preload_output": ""},
        "target": {"target": "/venv/bin/python", "how": "python", "torch": {
            "version": "2.11.0", "cuda": "13.0", "nccl": [2, 28, 9]}, "libraries": [
            {"kind": "cudart", "path": "/venv/nvidia/cu13/lib/libcudart.so.13",
             "version": [13, 0], "how": "loaded"},
            {"kind": "nccl", "path": "/venv/nvidia/nccl/lib/libnccl.so.2",
             "version": [2, 28, 9], "how": "loaded"}]},
        "driver": {"loaded": True, "error": None, "version": 13000, "kernel_module": None,
                   "get_proc_address": True, "functions_missing": []},
        "gpus": [dict(gpu, index=i) for i in range(ngpus)],
        "peer": [[a, b, p2p] for a in range(ngpus) for b in range(ngpus) if a != b],
        "shm": {"path": "/dev/shm", "exists": True, "writable": True, "free_bytes": 8 << 30},
        "mig": {"smi": "/usr/bin/nvidia-smi", "mig_lines": [], "visible_mig": False},
        "env": {"watched": {}, "symmpin_other": {}},
    }


def verdict(f):
    return doctor.judge(f)[1]


def status(f, name):
    return next(c["status"] for c in doctor.judge(f)[0] if c["name"] == name)


class Verdict(unittest.TestCase):
    def test_a_good_machine_redirects_and_exits_0(self):
        v = verdict(machine())
        self.assertEqual(v, {"redirect": True, "line": doctor.REDIRECT_LINE})
        out = io.StringIO()
        self.assertEqual(doctor.report(machine(), True, out), 0)
        doc = json.loads(out.getvalue())
        self.assertEqual(doc["verdict"]["line"], doctor.REDIRECT_LINE)
        self.assertEqual({c["status"] for c in doc["checks"]}, {"ok"})

    def test_text_report_one_line_per_check_and_the_verdict_last(self):
        out = io.StringIO()
        doctor.report(machine(p2p=False), False, out)
        lines = out.getvalue().splitlines()
        self.assertTrue(lines[0].startswith("symmpin 0.1.0 (git test); kernels: sm_80"))
        self.assertTrue(lines[-1].startswith("verdict: symmpin will stay on NCCL because no pair "
                                             "of GPUs has peer access (P2P)"))
        self.assertIn("OK    gpus: 2 GPU(s): GPU 0: NVIDIA H200, sm_90: runs sm_90; GPU 1: "
                      "NVIDIA H200, sm_90: runs sm_90", lines)
        self.assertTrue(any(ln.startswith("FAIL  peer_access: ") for ln in lines))

    def test_one_gpu_is_a_warning_that_says_there_is_nothing_to_speed_up(self):
        # One GPU that runs the kernels: symmpin serves ranks sharing it, so not a FAIL (the line
        # once read "FAIL  gpus: 1 GPU(s): GPU 0: NVIDIA H200, sm_90: runs sm_90"); the line and
        # the verdict say what the finding is, and the exit status follows the verdict.
        out = io.StringIO()
        self.assertEqual(doctor.report(machine(ngpus=1), False, out), 0)
        lines = out.getvalue().splitlines()
        self.assertIn("WARN  gpus: one GPU, nothing to speed up between GPUs: ranks sharing it are "
                      "served, but gain nothing (they take turns on it); GPU 0: NVIDIA H200, "
                      "sm_90: runs sm_90", lines)
        self.assertFalse(any(ln.startswith("FAIL") for ln in lines), lines)
        self.assertEqual(lines[-1], "verdict: symmpin will redirect all-reduces, all-gathers and "
                         "reduce-scatters of communicators within this machine, but this "
                         "machine has one GPU: nothing to speed up (ranks sharing it take turns "
                         "on it)")
        self.assertIn("OK    memory_export: VMM and POSIX-fd export on GPU 0", lines)
        out = io.StringIO()
        self.assertEqual(doctor.report(machine(ngpus=1), True, out), 0)
        doc = json.loads(out.getvalue())
        self.assertTrue(doc["verdict"]["redirect"])
        gpus = next(c for c in doc["checks"] if c["name"] == "gpus")
        self.assertEqual(gpus["status"], "warn")

    def test_one_gpu_without_memory_export_stays_on_nccl_exit_1(self):
        f = machine(ngpus=1, gpu=dict(H200, vmm=False))
        self.assertEqual(status(f, "gpus"), "warn")
        self.assertEqual(status(f, "memory_export"), "fail")
        self.assertIn("no GPU with code can export memory", verdict(f)["line"])
        self.assertEqual(doctor.report(f, True, io.StringIO()), 1)

    def test_one_of_two_gpus_with_code_says_which(self):
        f = machine()
        f["gpus"][1] = dict(H200, name="Tesla V100", cc=[7, 0], index=1)
        checks, v = doctor.judge(f)
        gpus = next(c for c in checks if c["name"] == "gpus")
        self.assertEqual(gpus["status"], "warn")
        self.assertTrue(gpus["summary"].startswith("only GPU 0 of 2 runs the kernels, nothing to "
                                                   "speed up between GPUs"), gpus["summary"])
        self.assertTrue(v["redirect"])
        self.assertIn("but only GPU 0 of 2 runs the kernels: nothing to speed up", v["line"])
        f = machine()
        f["gpus"][1]["posix_fd"] = False
        checks, v = doctor.judge(f)
        export = next(c for c in checks if c["name"] == "memory_export")
        self.assertEqual(export["status"], "warn")
        self.assertIn("only GPU 0 of 2 can hold a pool, nothing to speed up", export["summary"])
        self.assertIn("GPU 1 lacks POSIX-fd export", export["summary"])
        self.assertTrue(v["redirect"])

    def test_no_peer_access(self):
        v = verdict(machine(p2p=False))
        self.assertFalse(v["redirect"])
        self.assertIn("no pair of GPUs has peer access (P2P)", v["line"])

    def test_some_pairs_without_peer_access_warn_only(self):
        f = machine(ngpus=3)
        f["peer"] = [[a, b, {a, b} != {0, 2}] for a, b, _ in f["peer"]]
        checks, v = doctor.judge(f)
        self.assertTrue(v["redirect"])
        p = next(c for c in checks if c["name"] == "peer_access")
        self.assertEqual(p["status"], "warn")
        self.assertIn("without: 0-2", p["summary"])

    def test_one_way_peer_access_is_none(self):
        f = machine()
        f["peer"] = [[0, 1, True], [1, 0, False]]
        self.assertFalse(verdict(f)["redirect"])

    def test_gpus_older_than_sm_80(self):
        v = verdict(machine(gpu=dict(H200, name="Tesla V100", cc=[7, 0])))
        self.assertFalse(v["redirect"])
        self.assertIn("0 of 2 GPU(s) can run symmpin's kernels", v["line"])

    def test_no_code_for_the_gpu(self):
        f = machine(gpu=dict(H200, cc=[10, 0]))
        f["symmpin"]["kernel_archs"] = ["sm_90"]
        self.assertFalse(verdict(f)["redirect"])

    def test_memory_export_missing(self):
        v = verdict(machine(gpu=dict(H200, posix_fd=False)))
        self.assertFalse(v["redirect"])
        self.assertIn("POSIX file descriptors", v["line"])

    def test_driver_missing_old_or_without_functions(self):
        f = machine()
        f["driver"] = {"loaded": False, "error": "libcuda.so.1 cannot be loaded", "version": None,
                       "kernel_module": None, "get_proc_address": False, "functions_missing": []}
        self.assertIn("no usable NVIDIA driver", verdict(f)["line"])
        f = machine()
        f["driver"]["version"] = 11080
        self.assertIn("the driver is older than CUDA 12.0 (r525)", verdict(f)["line"])
        f = machine()
        f["driver"]["get_proc_address"] = False
        self.assertIn("no cuGetProcAddress_v2", verdict(f)["line"])
        f = machine()
        f["driver"]["functions_missing"] = ["cuMemCreate"]
        self.assertIn("the driver lacks functions symmpin needs", verdict(f)["line"])
        driver = next(c for c in doctor.judge(f)[0] if c["name"] == "driver")
        self.assertIn("does not give cuMemCreate at the CUDA 12.0 ABI", driver["summary"])

    def test_cuda_12_drivers_serve_symmpin(self):
        # The CUDA 12 drivers PyTorch's cu12 wheels run on (r525-r575): symmpin acts there.
        for v in (12000, 12040, 12080):
            f = machine()
            f["driver"]["version"] = v
            self.assertEqual(status(f, "driver"), "ok", v)
            driver = next(c for c in doctor.judge(f)[0] if c["name"] == "driver")
            self.assertIn(f"supports CUDA 12.{(v % 1000) // 10}: symmpin can act", driver["summary"])
            self.assertTrue(verdict(f)["redirect"], v)

    def test_library_that_cannot_be_preloaded(self):
        f = machine()
        f["library"].update(preload_ok=False, preload_output="ERROR: ld.so: object ... "
                            "(libcudart.so.13: cannot open shared object file): ignored.")
        v = verdict(f)
        self.assertFalse(v["redirect"])
        self.assertIn("cannot be preloaded here: ERROR: ld.so", v["line"])
        f["library"] = {"path": None, "error": "libsymmpin.so.0 not found", "preload_ok": False,
                        "preload_output": ""}
        self.assertIn("the library cannot be found: libsymmpin.so.0 not found", verdict(f)["line"])

    def test_several_reasons_all_named(self):
        f = machine(gpu=dict(H200, name="Tesla V100", cc=[7, 0]))
        f["env"]["watched"]["SYMMPIN_DISABLE"] = "yes"
        line = verdict(f)["line"]
        self.assertIn("0 of 2 GPU(s)", line)
        self.assertIn("SYMMPIN_DISABLE is set", line)

    def test_no_gpu_visible(self):
        f = machine()
        f.update(gpus=[], peer=[])
        self.assertIn("no GPU is visible here", verdict(f)["line"])


class Settings(unittest.TestCase):
    def test_symmpin_disable(self):
        f = machine()
        f["env"]["watched"]["SYMMPIN_DISABLE"] = "1"
        self.assertIn("SYMMPIN_DISABLE is set", verdict(f)["line"])
        f["env"]["watched"]["SYMMPIN_DISABLE"] = "0"
        self.assertTrue(verdict(f)["redirect"])

    def test_mig_from_nvidia_smi_or_visible_devices(self):
        f = machine()
        f["mig"]["mig_lines"] = ["MIG 3g.71gb Device 0: (UUID: MIG-abc)"]
        self.assertIn("MIG is on", verdict(f)["line"])
        f = machine()
        f["mig"]["visible_mig"] = True
        self.assertIn("MIG is on", verdict(f)["line"])

    def test_nccl_p2p_and_multicast_are_information(self):
        f = machine()
        f["env"]["watched"].update(NCCL_P2P_DISABLE="1", NCCL_NVLS_ENABLE="0")
        checks, v = doctor.judge(f)
        self.assertTrue(v["redirect"])
        by = {c["name"]: c for c in checks}
        self.assertEqual(by["nccl_p2p"]["status"], "info")
        self.assertIn("symmpin does not read it", by["nccl_p2p"]["summary"])
        self.assertEqual(by["multicast"]["status"], "info")

    def test_other_symmpin_settings_listed(self):
        f = machine()
        f["env"]["symmpin_other"] = {"SYMMPIN_MAX_BYTES": "0"}
        c = [c for c in doctor.judge(f)[0] if c["name"] == "symmpin_settings"]
        self.assertIn("SYMMPIN_MAX_BYTES=0", c[0]["summary"])

    def test_shm_missing_or_low(self):
        f = machine()
        f["shm"].update(exists=False, writable=False, free_bytes=None)
        self.assertIn("/dev/shm is missing", verdict(f)["line"])
        f = machine()
        f["shm"]["free_bytes"] = 1 << 20
        self.assertEqual(status(f, "shm"), "warn")
        self.assertTrue(verdict(f)["redirect"])


class Runtime(unittest.TestCase):
    def test_cuda_12_program(self):
        # A CUDA 12 program keeps its runtime; symmpin carries none (issue 27): nothing to say.
        f = machine()
        f["target"]["libraries"][0]["version"] = [12, 8]
        self.assertEqual(status(f, "runtime"), "ok")
        runtime = next(c for c in doctor.judge(f)[0] if c["name"] == "runtime")
        self.assertIn("CUDA runtime 12.8", runtime["summary"])
        self.assertNotIn("runs beside it", runtime["summary"])
        self.assertTrue(verdict(f)["redirect"])

    def test_nccl_too_old_or_another_major(self):
        for v in ([2, 17, 1], [3, 0, 0]):
            f = machine()
            f["target"]["torch"]["nccl"] = v
            self.assertIn("symmpin takes NCCL 2.x from 2.18", verdict(f)["line"], v)

    def test_python_without_nccl(self):
        f = machine()
        f["target"].update(torch=None, libraries=[])
        self.assertIn("has no NCCL", verdict(f)["line"])

    def test_program_ldd_cannot_answer_is_a_warning(self):
        f = machine()
        f["target"] = {"target": "/bin/app", "how": "ldd", "torch": None, "libraries": [],
                       "note": "ldd lists no libnccl"}
        self.assertEqual(status(f, "runtime"), "warn")
        self.assertTrue(verdict(f)["redirect"])


class CodeFor(unittest.TestCase):
    ARCHS = ["sm_80", "sm_90", "sm_100", "sm_120", "compute_90"]

    def test_the_compatibility_table(self):
        expect = {80: "sm_80", 86: "sm_80", 89: "sm_80", 90: "sm_90", 100: "sm_100",
                  103: "sm_100", 120: "sm_120", 121: "sm_120"}
        for cc, code in expect.items():
            self.assertEqual(doctor.code_for(cc, self.ARCHS), code, cc)
        self.assertTrue(doctor.code_for(110, self.ARCHS).startswith("compute_90 PTX"))
        self.assertIsNone(doctor.code_for(75, self.ARCHS))

    def test_without_ptx_newer_gpus_have_none(self):
        self.assertIsNone(doctor.code_for(100, ["sm_90"]))
        self.assertIsNone(doctor.code_for(89, ["sm_90", "compute_90"]))


class FakeDriver:
    """FAKE: stands in for cudadriver.Driver (no libcuda here); answers from a table."""

    def __init__(self, gpus, peer, version=13000, fail=None, missing=()):
        self.gpus, self.peer, self.v, self.fail, self.missing = gpus, peer, version, fail, missing

    def _maybe_fail(self, call):
        if self.fail == call:
            raise cudadriver.DriverError(f"{call} failed: CUDA_ERROR_NO_DEVICE")

    def has_function(self, fn):
        return fn not in self.missing

    def has_get_proc_address(self):
        return self.v >= 12000

    def init(self):
        self._maybe_fail("cuInit")

    def version(self):
        return self.v

    def device_count(self):
        return len(self.gpus)

    def name(self, i):
        return self.gpus[i]["name"]

    def attribute(self, attr, i):
        g = self.gpus[i]
        return {cudadriver.ATTR_CC_MAJOR: g["cc"][0], cudadriver.ATTR_CC_MINOR: g["cc"][1],
                cudadriver.ATTR_VMM: int(g["vmm"]), cudadriver.ATTR_POSIX_FD: int(g["posix_fd"]),
                cudadriver.ATTR_MULTICAST: int(g["multicast"])}[attr]

    def can_access_peer(self, a, b):
        return self.peer[a][b]


class DriverFacts(unittest.TestCase):
    def test_gpus_attributes_and_every_ordered_pair(self):
        fake = FakeDriver([H200, dict(H200, name="NVIDIA H100", cc=[9, 0])],
                          [[None, True], [False, None]])
        f = facts.driver_facts(load=lambda: fake)
        self.assertEqual(f["driver"]["version"], 13000)
        self.assertEqual(f["gpus"][1], dict(H200, name="NVIDIA H100", index=1))
        self.assertEqual(f["peer"], [[0, 1, True], [1, 0, False]])

    def test_init_failure_is_reported_without_gpus(self):
        f = facts.driver_facts(load=lambda: FakeDriver([H200], [[None]], fail="cuInit"))
        self.assertEqual(f["gpus"], [])
        self.assertIn("cuInit failed", f["driver"]["error"])

    def test_no_driver(self):
        def load():
            raise cudadriver.DriverError("libcuda.so.1 cannot be loaded: not found")
        f = facts.driver_facts(load=load)
        self.assertFalse(f["driver"]["loaded"])
        self.assertIn("cannot be loaded", f["driver"]["error"])

    def test_missing_functions_named(self):
        f = facts.driver_facts(load=lambda: FakeDriver([H200], [[None]], missing=["cuMemMap"]))
        self.assertEqual(f["driver"]["functions_missing"], ["cuMemMap"])

    def test_a_driver_older_than_12_0_is_asked_nothing_more(self):
        fake = FakeDriver([H200], [[None]], version=11080, fail="cuInit")
        f = facts.driver_facts(load=lambda: fake)
        self.assertEqual(f["driver"]["version"], 11080)
        self.assertIsNone(f["driver"]["error"], "cuInit was not called")
        self.assertEqual(f["gpus"], [])

    def test_the_function_list_is_the_library_s(self):
        # driver/cu.h's X-macro list and cudadriver.CU_FUNCTIONS name the same functions in the
        # same order: the doctor checks what the library will ask for.
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "driver", "cu.h"), encoding="utf-8") as h:
            text = h.read()
        body = text[text.index("#define SYMMPIN_CU_FUNCTIONS(X)"):text.index("typedef struct")]
        listed = ["cu" + n for n in re.findall(r"X\((\w+), \d+\)", body)]
        self.assertGreater(len(listed), 30)
        self.assertEqual(list(cudadriver.CU_FUNCTIONS), listed)

    def test_facts_of_the_fake_driver_judged_end_to_end(self):
        m = machine()
        m.update(facts.driver_facts(load=lambda: FakeDriver([H200, H200],
                                                            [[None, True], [True, None]])))
        self.assertTrue(verdict(m)["redirect"])


class OtherFacts(unittest.TestCase):
    def test_mig_lines_from_nvidia_smi(self):
        with tempfile.TemporaryDirectory() as d:
            smi = os.path.join(d, "nvidia-smi")  # FAKE nvidia-smi
            with open(smi, "w") as f:
                f.write("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-1)'\n"
                        "echo '  MIG 3g.71gb     Device  0: (UUID: MIG-2)'\n")
            os.chmod(smi, 0o755)
            m = facts.mig_facts(env={"CUDA_VISIBLE_DEVICES": "0"}, smi=smi)
        self.assertEqual(m["mig_lines"], ["MIG 3g.71gb     Device  0: (UUID: MIG-2)"])
        self.assertFalse(m["visible_mig"])

    def test_shm_of_a_folder(self):
        with tempfile.TemporaryDirectory() as d:
            s = facts.shm_facts(d)
        self.assertTrue(s["exists"] and s["writable"])
        self.assertGreater(s["free_bytes"], 0)
        self.assertFalse(facts.shm_facts("/nonexistent/shm")["exists"])

    def test_env_facts(self):
        e = facts.env_facts({"NCCL_P2P_LEVEL": "LOC", "SYMMPIN_WARMUP": "8", "HOME": "/root"})
        self.assertEqual(e, {"watched": {"NCCL_P2P_LEVEL": "LOC"},
                             "symmpin_other": {"SYMMPIN_WARMUP": "8"}})


def driver_loads():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@unittest.skipIf(driver_loads(), "this machine has an NVIDIA driver: the no-GPU path is not it")
class RealNoGpuMachine(unittest.TestCase):
    def test_doctor_json_says_no_driver_and_exits_nonzero(self):
        r = subprocess.run([CMD, "doctor", "--json"], stdout=subprocess.PIPE, text=True,
                           timeout=300)
        doc = json.loads(r.stdout)
        self.assertEqual(r.returncode, 1)
        self.assertFalse(doc["verdict"]["redirect"])
        self.assertTrue(doc["verdict"]["line"].startswith("will stay on NCCL because "))
        self.assertIn("no usable NVIDIA driver", doc["verdict"]["line"])
        drv = next(c for c in doc["checks"] if c["name"] == "driver")
        self.assertEqual(drv["status"], "fail")


if __name__ == "__main__":
    unittest.main()
