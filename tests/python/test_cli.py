"""The `symmpin` command end to end on the CPU (the build tree's launcher, build/tools/symmpin):
usage errors, version's exit statuses, run's exit status, silence and summary, replay and bench
forwarding. The programs run under `symmpin run` here are stand-ins (sh, python3 -c) that make
no communicator or write made-up statistics where run asks; the library is the real one."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

CMD = os.environ["SYMMPIN_TEST_CMD"]
LIB = os.environ["SYMMPIN_TEST_LIB"]
TRACES = os.environ["SYMMPIN_TEST_TRACES"]


def symmpin(*args, env=None, cwd=None):
    full = dict(os.environ)
    full.update(env or {})
    r = subprocess.run([CMD, *args], env=full, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def in_process(code, env=None):
    """Run `code` with the symmpin package in a fresh Python (for patched tools: replay and
    bench exec their tool, which would replace the test's own process)."""
    full = dict(os.environ)
    full.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], env=full, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


class Usage(unittest.TestCase):
    def test_unknown_command_is_named_exit_2(self):
        rc, out, err = symmpin("frobnicate")
        self.assertEqual(rc, 2)
        self.assertEqual(err.splitlines()[0], "symmpin: unknown command 'frobnicate'")
        self.assertEqual(out, "")

    def test_no_command_prints_usage_exit_2(self):
        rc, out, err = symmpin()
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("usage: symmpin run"))

    def test_help_exit_0_on_stdout(self):
        rc, out, err = symmpin("--help")
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("symmpin doctor [--json]", out)

    def test_unknown_run_option_is_named(self):
        rc, _, err = symmpin("run", "--nope", "--", "true")
        self.assertEqual(rc, 2)
        self.assertIn("--nope", err.splitlines()[0])

    def test_run_without_a_command(self):
        rc, _, err = symmpin("run", "--stats")
        self.assertEqual(rc, 2)
        self.assertEqual(err.splitlines()[0], "symmpin run: no COMMAND given")

    def test_doctor_python_and_command_together(self):
        rc, _, err = symmpin("doctor", "--python", "python3", "--", "true")
        self.assertEqual(rc, 2)
        self.assertIn("not both", err)

    def test_doctor_dashes_without_a_command(self):
        rc, _, err = symmpin("doctor", "--")
        self.assertEqual(rc, 2)
        self.assertIn("no COMMAND after --", err)

    def test_version_takes_no_argument(self):
        rc, _, err = symmpin("version", "extra")
        self.assertEqual(rc, 2)
        self.assertIn("extra", err)


class Version(unittest.TestCase):
    def test_found_and_loadable_exit_0(self):
        rc, out, _ = symmpin("version")
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        self.assertRegex(lines[0], r"^symmpin \d+\.\d+\.\d+ \(git \S+\)$")
        self.assertEqual(lines[-1], f"library: {os.path.realpath(LIB)}")

    def test_missing_library_exit_1(self):
        rc, out, _ = symmpin("version", env={"SYMMPIN_LIB": "/nonexistent/libsymmpin.so.0"})
        self.assertEqual(rc, 1)
        self.assertIn("library: not found: SYMMPIN_LIB=/nonexistent/libsymmpin.so.0 is not a file",
                      out)

    def test_unloadable_library_exit_1(self):
        with tempfile.NamedTemporaryFile("w", suffix=".so") as junk:
            junk.write("not a shared object\n")
            junk.flush()
            rc, out, _ = symmpin("version", env={"SYMMPIN_LIB": junk.name})
        self.assertEqual(rc, 1)
        self.assertIn("cannot be preloaded here", out)

    def test_python_dash_m_is_the_same_command(self):
        r = subprocess.run([sys.executable, "-m", "symmpin", "version"], stdout=subprocess.PIPE,
                           text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, symmpin("version")[1]))


class Run(unittest.TestCase):
    def test_exit_status_passed_on(self):
        self.assertEqual(symmpin("run", "--", "sh", "-c", "exit 7")[0], 7)

    def test_killed_program_is_128_plus_signal(self):
        self.assertEqual(symmpin("run", "--", "sh", "-c", "kill -9 $$")[0], 137)

    def test_missing_program_is_127(self):
        rc, _, err = symmpin("run", "--", "/nonexistent/program")
        self.assertEqual(rc, 127)
        self.assertIn("cannot run '/nonexistent/program'", err)

    def test_no_communicator_prints_nothing_and_leaves_no_file(self):
        with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as tmp:
            rc, out, err = symmpin("run", "--", "python3", "-c", "pass", cwd=cwd,
                                   env={"TMPDIR": tmp})
            self.assertEqual((rc, out, err), (0, "", ""))
            self.assertEqual(os.listdir(cwd), [])
            self.assertEqual(os.listdir(tmp), [])

    def test_summary_merged_from_the_ranks_statistics(self):
        from test_summary import rank_doc
        with tempfile.TemporaryDirectory() as d:
            seen = os.path.join(d, "seen.json")
            # A stand-in for two ranks: writes their statistics where run asks, and what it saw.
            stand_in = (
                "import json, os, sys\n"
                "pattern = os.environ['SYMMPIN_STATS_FILE']\n"
                "for r in (0, 1):\n"
                "    p = pattern.replace('%h', 'host').replace('%p', str(r))\n"
                "    with open(p, 'w') as f:\n"
                "        f.write(sys.argv[1].replace('RANK', str(r)))\n"
                "keys = ('SYMMPIN_STATS_FILE', 'SYMMPIN_MEASURE', 'SYMMPIN_STATS', 'LD_PRELOAD')\n"
                "with open(sys.argv[2], 'w') as f:\n"
                "    json.dump({k: os.environ.get(k) for k in keys}, f)\n")
            doc = json.dumps(rank_doc(0)).replace('"rank": 0', '"rank": RANK')
            rc, out, err = symmpin("run", "--", sys.executable, "-c", stand_in, doc, seen)
            with open(seen) as f:
                env = json.load(f)
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("symmpin: communicator 0 (2 ranks; seen: 0,1): 40 of 54 all-reduces", out)
        self.assertIn("time saved: about 0.060 ms per rank", out)
        self.assertEqual(env["SYMMPIN_MEASURE"], "1")
        self.assertIsNone(env["SYMMPIN_STATS"])
        self.assertEqual(env["LD_PRELOAD"], os.path.realpath(LIB))
        self.assertFalse(os.path.exists(os.path.dirname(env["SYMMPIN_STATS_FILE"])),
                         "the statistics folder is removed after the run")

    def test_stats_option_and_the_users_measure_setting(self):
        rc, _, _ = symmpin("run", "--stats", "--", "sh", "-c",
                           '[ "$SYMMPIN_STATS" = 1 ] && [ "$SYMMPIN_MEASURE" = 0 ]',
                           env={"SYMMPIN_MEASURE": "0"})
        self.assertEqual(rc, 0)

    def test_unloadable_library_runs_without_symmpin_in_one_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".so") as junk:
            junk.write("not a shared object\n")
            junk.flush()
            rc, out, err = symmpin("run", "--", "sh", "-c", 'echo "[$LD_PRELOAD]"; exit 5',
                                   env={"SYMMPIN_LIB": junk.name, "LD_PRELOAD": ""})
            rc2, out2, err2 = symmpin("run", "--require", "--", "sh", "-c", "echo ran",
                                      env={"SYMMPIN_LIB": junk.name})
        self.assertEqual((rc, out), (5, "[]\n"))
        self.assertEqual(len(err.splitlines()), 1)
        self.assertIn("running without symmpin: every collective goes to NCCL", err)
        self.assertEqual((rc2, out2), (2, ""))
        self.assertIn("cannot be preloaded here:", err2)


FAKE_TOOL = ("import symmpin.locate as l, symmpin.cli as c, symmpin._build as b\n"
             "l.tool = lambda name: {tool!r}\n"
             "b.LAYOUT = {layout!r}\n"
             "raise SystemExit(c.main({argv!r}))\n")


class Forwarding(unittest.TestCase):
    def test_replay_hands_every_argument_to_its_tool(self):
        with tempfile.TemporaryDirectory() as d:
            tool = os.path.join(d, "symmpin-replay")
            with open(tool, "w") as f:
                f.write('#!/bin/sh\nprintf "%s|" "$@"\nexit 5\n')
            os.chmod(tool, 0o755)
            code = FAKE_TOOL.format(tool=tool, layout="build",
                                    argv=["replay", "--json", "a b", "--", "-x"])
            rc, out, _ = in_process(code)
        self.assertEqual((rc, out), (5, "--json|a b|--|-x|"))

    def test_replay_of_the_bundled_traces(self):
        rc, out, _ = symmpin("replay", "--json", *sorted(
            os.path.join(TRACES, "ddp", f) for f in os.listdir(os.path.join(TRACES, "ddp"))))
        self.assertEqual(rc, 0)
        self.assertTrue(json.loads(out)["comms"])

    def test_replay_options_errors_are_the_tools(self):
        rc, _, err = symmpin("replay", "--foo")
        self.assertEqual(rc, 2)
        self.assertEqual(err.splitlines()[0], "symmpin-replay: unknown option '--foo'")

    def test_bench_outside_the_wheel_says_where_it_is_not(self):
        code = FAKE_TOOL.format(tool=None, layout="wheel", argv=["bench"])
        rc, _, err = in_process(code)
        self.assertEqual(rc, 2)
        self.assertIn("symmpin-bench is not part of the pip package", err)


if __name__ == "__main__":
    unittest.main()
