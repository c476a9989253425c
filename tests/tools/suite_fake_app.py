#!/usr/bin/env python3
"""A stand-in for the GPU suite's programs, so that scripts/gpu-suite.sh runs end to end on a CPU
(tests/tools/check_gpu_suite_dryrun.sh): it prints the lines each real program prints (results,
RESULTS-DONE, summaries) and, under the preload (LD_PRELOAD names libsymmpin), writes what
libsymmpin would (statistics JSON, traces, the INFO line of a rank on another host), and NCCL's
INFO lines. What it knows of symmpin is what the suite checks, no more: it tests the suite's
plumbing and policy, never the library.

The C apps (symmpin-app, symmpin-trust, symmpin-dp, symmpin-life) start their ranks as the real ones do, through
APP_RANK_WRAPPER (scripts/rank-env.sh), and each rank checks what the rig gave it: an NCCL host id
of its own where ranks share a GPU, its host's /dev/shm (a file it leaves there only if told).
FAKE_BREAK=KIND:SIDE[,KIND:SIDE...] (SIDE nccl, symmpin or both) breaks a side on purpose:
hang-after (a rank sleeps after its results), wrong (a different result line or digest),
leave-board (a file left in /dev/shm), unstable (sp_decode.py at 3 ranks or more: a digest
that differs from run to run), inflight-nccl (symmpin-life's trace: NCCL ran the all-reduce
in flight at the revoke or shrink); e.g. hang-after:nccl,wrong:symmpin breaks both sides.

    suite_fake_app.py AS [ARGS...]     AS: symmpin-app, symmpin-trust, symmpin-dp, symmpin-life,
                                           torch-<script>
"""
import json
import os
import re
import subprocess
import sys
import time

from group_trace import group_trace  # beside this file

NAME = sys.argv[1]
ARGS = sys.argv[2:]
SIDE = "symmpin" if "libsymmpin" in os.environ.get("LD_PRELOAD", "") else "nccl"
BREAKS = {tuple(b.partition(":")[::2]) for b in os.environ.get("FAKE_BREAK", "").split(",") if b}


def broken(kind):
    """Whether FAKE_BREAK breaks this side in this way."""
    return (kind, SIDE) in BREAKS or (kind, "both") in BREAKS


def opt(name, default=None):
    return ARGS[ARGS.index(name) + 1] if name in ARGS else default


def pattern(env, rank):
    p = os.environ.get(env)
    return p.replace("%r", str(rank)).replace("%p", str(os.getpid())).replace("%h", "fakehost") if p else None


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def nccl_info(rank, nranks):
    path = pattern("NCCL_DEBUG_FILE", rank)
    if path and nranks > 1:
        shared = os.environ.get("RANK_ENV_NCCL_HOSTS", "0") != "0"
        with open(path, "w") as f:
            f.write(f"fakehost:{os.getpid()}:1 [0] NCCL INFO Channel 00/0 : {rank}[0] -> "
                    f"{(rank + 1) % nranks}[0] [send] via {'NET/Socket/0' if shared else 'P2P/CUMEM'}\n")


def host_of(rank, nranks, hosts):
    return rank * hosts // nranks if hosts else 0


def write_stats(rank, comms):
    path = pattern("SYMMPIN_STATS_FILE", rank)
    if SIDE == "symmpin" and path:
        with open(path, "w") as f:
            json.dump({"version": 1, "comms": comms}, f)


def comm(rank, nranks, redirected, ordinal=0, sites=None):
    sites = sites or [{"count": 1024, "redirected": redirected, "nccl": 64,
                       "reasons": {"warmup": 64} if redirected else {"warmup": 2, "comm": 62}}]
    return {"ordinal": ordinal, "rank": rank, "nranks": nranks, "device": 0, "sites": sites}


def check_placement(rank, nranks):
    """What the rig owes a rank: its own NCCL host id where ranks share the GPU (one here)."""
    hosts = int(os.environ.get("RANK_ENV_NCCL_HOSTS", "0"))
    if nranks > 1 and hosts != nranks:
        say(f"FATAL: rank {rank}: {nranks} ranks on one GPU but NCCL_HOSTS={hosts}")
        sys.exit(2)
    if hosts and not os.environ.get("NCCL_HOSTID", "").endswith(f"host{host_of(rank, nranks, hosts)}"):
        say(f"FATAL: rank {rank}: NCCL_HOSTID={os.environ.get('NCCL_HOSTID')}")
        sys.exit(2)
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        say(f"FATAL: rank {rank}: NCCL_NVLS_ENABLE is not 0")
        sys.exit(2)


def multi_host(nranks):
    return int(os.environ.get("RANK_ENV_SHM_HOSTS", "0")) > 1


def board(rank, nranks):
    """A symmpin board in this rank's /dev/shm while it runs, removed unless told otherwise."""
    if SIDE != "symmpin":
        return lambda: None
    path = f"/dev/shm/symmpin-fake-{os.getppid()}-{rank}"
    open(path, "w").close()
    return lambda: None if broken("leave-board") else os.unlink(path)


def end(rank):
    say(f"RESULTS-DONE rank={rank}")
    if broken("hang-after"):
        time.sleep(600)


# ---- the ranks of each program ----

def app_rank(rank, nranks):
    done = board(rank, nranks)
    wrong = "1" if broken("wrong") else "0"
    say(f"RESULT rank={rank} passed=367 failed=0 checksum=00ab{wrong}")
    say(f"TIME rank={rank} first_call_ms=12.0 checks_ms=900.0")
    split = int(opt("--split-hosts", "0"))
    sites = None
    if "--colls" in ARGS:  # as the library writes them: a site per collective, each redirected
        sites = [{"coll": c, "count": 1024, "redirected": 100, "nccl": 64, "reasons": {"warmup": 64}}
                 for c in ("allreduce", "allgather", "reducescatter")]
    comms = [comm(rank, nranks, 0 if multi_host(nranks) else 100, sites=sites)]
    if split:
        say(f"SPLIT rank={rank} host={host_of(rank, nranks, split)} host_rank={rank % (nranks // split)} "
            f"host_ranks={nranks // split} calls=367")
        comms.append(comm(rank % (nranks // split), nranks // split, 100, ordinal=1))
    if "--reset" in ARGS:  # the communicator made after cudaDeviceReset: one more, redirected too
        say(f"RESET rank={rank} calls=122")
        comms.append(comm(rank, nranks, 100, ordinal=1))
    if multi_host(nranks) and SIDE == "symmpin":
        # As the library does: on each host, a rank finds a peer missing from the host's board and
        # says so (here the host's first rank; each rank when every rank is a host of its own),
        # then every rank says its agreements stop, naming the first rank missing from its host's
        # board (the lowest rank of another host).
        host_ranks = nranks // split if split else 1
        away = host_ranks if rank < host_ranks else 0
        if rank % host_ranks == 0:
            sys.stderr.write(f"fakehost:{os.getpid()}:7 [0] symmpin INFO comm 0 rank {rank}: rank "
                             f"{away} has not opened this host's board although "
                             "the first all-reduce completed: it is on another host\n")
        sys.stderr.write(f"fakehost:{os.getpid()}:7 [0] symmpin INFO comm 0 rank {rank}/{nranks}: "
                         "no more plan agreements on this communicator: ranks on several hosts: "
                         f"rank {away} is missing from this host's board\n")
    if "--group-simulate" in ARGS:
        say(f"GROUPSIM rank={rank} call=184 count=1024 dtype=7 estimated_us=5.0 touched_bytes=0")
        trace = pattern("SYMMPIN_TRACE", rank)
        if trace and SIDE == "symmpin":
            with open(trace, "w") as f:
                f.write(f"#symmpin-trace 1\n#rank={rank}\n")
                for i in range(1, 6 * 61 + 2):
                    f.write(f"{i} 0 1 ncclAllReduce rc=0 comm=0 count=1024 path={1 if i > 64 else 0} reason=0\n")
    if os.environ.get("SYMMPIN_KERNEL_TIMEOUT_MS") and SIDE == "symmpin" and rank == 1:
        done()
        sys.stderr.write("symmpin WARN kernel gave up waiting for rank 0 at site x\n")
        say("symmpin-app: FATAL: ncclAllReduce: remote process exited or there was a network error")
        sys.exit(2)
    write_stats(rank, comms)
    done()
    end(rank)


def trust_rank(rank, nranks):
    sc = opt("--scenario", "side")
    lines = {"side": lambda: f"SIDE rank={rank} calls=400 side_call=200 errors=0",
             "sites": lambda: f"SITES rank={rank} calls=400 from_other_sites={40 if rank == 1 else 0} errors=0",
             "graphs": lambda: f"GRAPHS rank={rank} warmup_calls=200 captured_calls=7 "
                               f"replays={2 * int(opt('--cycles'))} errors=0",
             "abort": lambda: f"ABORT rank={rank} aborted=1 abort_took_ms=3",
             "busy": lambda: f"BUSY rank={rank} destroy_ms=4 abort_ms=5"}
    fault = os.environ.get("SYMMPIN_TEST_FAULT")
    if sc == "fault":
        say(f"FAULT rank={rank} fault_call={fault.split(':')[2] if fault else 0} calls_done=400 "
            f"error={5 if fault else 0} error_after_ms=3 aborted={1 if fault else 0}")
    elif sc == "churn":
        say(f"CHURN rank={rank} cycles={opt('--cycles')} wanted={opt('--cycles')} seconds=1.0 "
            f"device_bytes_grown={4096 if SIDE == 'symmpin' else 0} fds=20->20 shm_boards=0->0")
    else:
        say(lines[sc]())
    sites = None
    if sc == "graphs":
        sites = [{"count": c, "redirected": r, "nccl": 0, "reasons": {}} for c, r in ((3000, 3), (20000, 2), (100000, 2))]
    write_stats(rank, [comm(rank, nranks, 100, sites=sites)])
    passed = 400 if sc != "abort" else 90 + rank  # how far an abort got differs by timing
    say(f"RESULT rank={rank} passed={passed} failed=0")
    end(rank)


def dp_rank(rank, nranks):
    say(f"DP-DIGEST rank={rank} steps=60 comm=1 digest=00000000000000ff")
    if rank == 0:
        say("DP-TIME layers=12 step_us=900.00 compute_us=500.00 group_us=300.00")
    write_stats(rank, [comm(rank, nranks, 100)])
    trace = pattern("SYMMPIN_TRACE", rank)
    if trace and SIDE == "symmpin":  # a one-rank communicator's groups go back to NCCL
        with open(trace, "w") as f:
            f.write(group_trace(rank, nranks, back=nranks == 1))
    end(rank)


def life_rank(rank, nranks):
    """symmpin-life: what the step owes it (an NCCL with ncclCommRevoke first in LD_LIBRARY_PATH,
    the static choice), its lines, and under the preload a trace whose in-flight call is
    symmpin's (rank 0's last all-reduce before its revoke or shrink)."""
    first = os.environ.get("LD_LIBRARY_PATH", "").split(":")[0]
    if not os.path.exists(os.path.join(first, "libnccl.so.2")) or os.environ.get("SYMMPIN_CHOOSE") != "static":
        say(f"FATAL: rank {rank}: LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH')} "
            f"SYMMPIN_CHOOSE={os.environ.get('SYMMPIN_CHOOSE')}")
        sys.exit(2)
    sc = opt("--scenario", "revoke")
    calls = int(opt("--calls", "400"))
    say(f"LIFE rank={rank} scenario={sc} allreduces={calls + (rank == 0)} call_ms=1.0 drain_ms=1.0")
    trace = pattern("SYMMPIN_TRACE", rank)
    if trace and SIDE == "symmpin":
        with open(trace, "w") as f:
            f.write(f"#symmpin-trace 1\n#rank={rank}\n")
            for i in range(1, calls + 1 + (rank == 0)):
                nccl = i <= 16 or (i > calls and broken("inflight-nccl"))
                f.write(f"{i} 0 1 ncclAllReduce rc=0 comm=0 count=1024 path={0 if nccl else 1}\n")
            if rank == 0 or sc == "revoke":
                stop = "ncclCommRevoke rc=0 comm=0" if sc == "revoke" else "ncclCommShrink rc=0 comm=-1 parent=0"
                f.write(f"{calls + 2} 0 1 {stop}\n")
    write_stats(rank, [comm(rank, nranks, 100)])
    say(f"symmpin-life: rank {rank}: {5 if rank == 0 else 2} passed, 0 failed")
    end(rank)


def torch_rank(script, rank, nranks):
    if script == "ddp_train.py":
        if rank == 0:
            say("step 0 loss 0x1.8p-1")
        say(f"DDP rank={rank} world={nranks} digest=abc")
    elif script == "tp_loop.py":
        say(f"TP rank={rank} eager_checks passed=144 failed=0 graph_checks passed=600 failed=0")
        say("tp_loop: 744 passed, 0 failed")
    elif script == "tp_decode.py":
        for mode in os.environ.get("TPD_MODES", "eager").split(","):
            say(f"TPD-DIGEST rank={rank} hidden=4096 tokens=1 mode={mode} "
                f"digest=012{'4' if broken('wrong') else '3'}")
            if rank == 0:
                say(f"TPD-TIME hidden=4096 tokens=1 mode={mode} calls=8 step_us=400.00 "
                    f"compute_us=300.00 allreduce_us={'nan' if mode == 'compile' else '9.00'}")
        say(f"tp_decode: rank {rank}: 1 runs, 0 skipped")
    elif script == "sp_decode.py":
        # unstable: at 3 ranks or more, a digest that differs from run to run
        mlp = f"{time.time_ns():x}" if broken("unstable") and nranks > 2 else "0b1"
        for mode in ("eager", "graph"):
            say(f"SPD-DIGEST rank={rank} part=colls mode={mode} what=ag dtype=bf16 bytes=1024 "
                f"digest=0a{'2' if broken('wrong') else '1'}")
            say(f"SPD-DIGEST rank={rank} part=mlp mode={mode} hidden=1024 tokens=2 digest={mlp}")
        say(f"sp_decode: rank {rank}: 6 runs")
        write_stats(rank, [comm(rank, nranks, 100, sites=[
            {"coll": c, "count": 512, "redirected": 100, "nccl": 64, "reasons": {"warmup": 64}}
            for c in ("allgather", "reducescatter")])])
        end(rank)
        return
    elif script == "overlap.py":
        if rank == 0:
            say("OVL-TIME bytes=65536 gemm_alone_us=100.0 gemm_with_us=110.0 slowdown=1.100 "
                "allreduce_us=20.00 calls=5")
        say(f"OVL-DIGEST rank={rank} bytes=65536 digest=feed")
    write_stats(rank, [comm(rank, nranks, 100)])
    end(rank)


# ---- launching (the C apps' launcher, in short: tests/apps/launch.h) ----

def launch(nranks):
    wrapper = os.environ.get("APP_RANK_WRAPPER", "").split()
    teardown = float(os.environ.get("APP_TEARDOWN_S", "60"))
    procs = []
    for r in range(nranks):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nranks))
        cmd = wrapper + [sys.executable, os.path.abspath(__file__), NAME] + ARGS + ["--child", str(r)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True))
    hung, failed = False, False
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=teardown + 1)
            sys.stdout.write(out)
            if p.returncode:
                say(f"launch: rank {r} exited abnormally (exit status {p.returncode})")
                failed = True
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, _ = p.communicate()
            sys.stdout.write(out)
            say(f"launch: rank {r} hung after its results: stopped {teardown:.0f} s after them")
            hung = True
    return 1 if failed else 3 if hung else 0


def main():
    if ARGS == ["--version"]:
        say(f"{NAME} (stand-in) 0.0")
        return 0
    nranks = int(opt("--ranks", os.environ.get("WORLD_SIZE", "2" if NAME == "symmpin-life" else "1")))
    if NAME.startswith("torch-"):
        rank = int(os.environ["RANK"])
        nccl_info(rank, nranks)
        check_placement(rank, nranks)
        torch_rank(NAME[6:], rank, nranks)
        return 0
    if "--child" in ARGS:
        rank = int(opt("--child"))
        nccl_info(rank, nranks)
        check_placement(rank, nranks)
        {"symmpin-app": app_rank, "symmpin-trust": trust_rank, "symmpin-dp": dp_rank,
         "symmpin-life": life_rank}[NAME](rank, nranks)
        return 0
    if NAME == "symmpin-app":
        say(f"symmpin-app: mode={opt('--mode', 'procs')} ranks={nranks} gpus=1 iters=6 ops/iter=61")
    rc = launch(nranks)
    prog = NAME
    text = "" if rc == 1 else f"{prog}: {nranks * 367 if prog == 'symmpin-app' else nranks} passed, 0 failed"
    if rc == 1:
        text = f"{prog}: 0 passed, 1 failed"
    say(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
