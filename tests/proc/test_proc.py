"""solbench.proc: /proc reads, signals to process trees, bounded line reading, the registry of
this process's own children and the parent-death watchdog, each against real processes (or a
stat line written out by hand from proc(5))."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from solbench.proc import lines, procfs, signals
from solbench.proc.registry import OwnProcesses

SRC = str(Path(__file__).resolve().parents[2] / "src")
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux /proc needed")


def _py(code: str, **kw) -> subprocess.Popen:
    """A Python child running ``code`` (stdout a pipe: it prints pids as JSON lines)."""
    env = dict(os.environ, PYTHONPATH=SRC)
    env.update(kw.pop("env", {}))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            env=env, **kw)


def _line(proc: subprocess.Popen) -> dict:
    return json.loads(proc.stdout.readline())


def _gone(pid: int) -> bool:
    """Nothing of ``pid`` runs: gone, or a zombie no thread of which can run."""
    return procfs.state(pid) in (None, "Z", "X") and not procfs.running_tasks(pid)


def _wait_for(cond, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


# ---------------------------------------------------------------------------- procfs
def test_parse_stat_splits_at_the_last_parenthesis():
    # proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    # cmajflt utime stime cutime cstime ... The command name "a) R (b" holds ") " itself: a
    # split at the first ')' would read "R" as the state and "(b" as the ppid.
    line = "4242 (a) R (b) S 17 4242 4242 0 -1 4194560 10 0 0 0 150 50 3 7 20 0 2 0 99 0 0\n"
    f = procfs.parse_stat(line)
    assert f[0] == "S"          # field 3, state
    assert f[1] == "17"         # field 4, ppid
    assert f[3] == "4242"       # field 6, session
    assert f[11:15] == ["150", "50", "3", "7"]  # fields 14-17: utime stime cutime cstime
    assert f[17] == "2"         # field 20, num_threads
    assert procfs.parse_stat("") is None and procfs.parse_stat("4242 (x)") is None


def test_a_real_process_whose_name_holds_a_parenthesis():
    # the child names itself "x) Z (y" (15 bytes fit comm): its state must still read S
    # (sleeping), not "Z", and its parent must be this process
    p = _py("""
        import sys, time
        open('/proc/self/comm', 'w').write('x) Z (y')
        print('{}', flush=True)
        time.sleep(60)
    """)
    try:
        _line(p)
        assert procfs.read_text(f"/proc/{p.pid}/stat").split(" ", 1)[1].startswith("(x) Z (y)")
        assert _wait_for(lambda: procfs.state(p.pid) == "S")
        assert procfs.parent_pid(p.pid) == os.getpid()
        assert procfs.session_id(p.pid) == os.getsid(os.getpid())
        assert not procfs.is_zombie(p.pid)
        assert procfs.num_threads(p.pid) == 1
    finally:
        p.kill()
        p.wait()
    assert procfs.state(p.pid) is None and procfs.thread_ids(p.pid) == set()
    assert procfs.cmdline(p.pid) == "" and procfs.stat_fields(p.pid) is None


def test_cpu_time_agrees_with_the_process_own_clock():
    # the child spins 0.3 s of CPU, then reports its own user+system time (os.times, an
    # independent reading of the same counters) and sleeps: /proc's utime+stime, in 10 ms
    # ticks, must agree within two ticks
    p = _py("""
        import os, time
        t0 = time.process_time()
        while time.process_time() - t0 < 0.3:
            pass
        t = os.times()
        print((t.user + t.system) * 1000, flush=True)
        time.sleep(60)
    """)
    try:
        own_ms = float(p.stdout.readline())
        got = procfs.process_cpu_ms(p.pid)
        assert own_ms >= 290
        assert abs(got - own_ms) <= 2 * 1000 / procfs.CLK_TCK + 1, (got, own_ms)
    finally:
        p.kill()
        p.wait()


def test_children_descendants_and_a_zombie():
    # child -> grandchild (sleeps) and child -> short-lived grandchild it never waits for
    # (a zombie): both are children of the child, the sleeper is a descendant of this process
    p = _py("""
        import json, os, subprocess, sys, time
        a = subprocess.Popen(['sleep', '60'])
        b = subprocess.Popen(['true'])
        print(json.dumps([a.pid, b.pid]), flush=True)
        time.sleep(60)
    """)
    try:
        a, b = json.loads(p.stdout.readline())
        assert procfs.child_pids(p.pid) == {a, b}
        assert {a, b} <= procfs.descendants(os.getpid())
        assert _wait_for(lambda: procfs.is_zombie(b))
        assert procfs.running_tasks(b) == []
        assert procfs.exe_name(a) == "sleep"
        assert procfs.cmdline(a) == "sleep 60 "
    finally:
        signals.kill_tree(p.pid)
        p.wait()


def test_has_env_matches_the_whole_entry_only():
    p = _py("import time; print('{}', flush=True); time.sleep(60)",
            env={"SOLBENCH_TEST_MARK": "abc123"})
    try:
        _line(p)
        assert procfs.has_env(p.pid, b"SOLBENCH_TEST_MARK=abc123")
        assert not procfs.has_env(p.pid, b"SOLBENCH_TEST_MARK=abc")   # a prefix is no match
        assert p.pid in signals.marked("SOLBENCH_TEST_MARK", "abc123")
        assert os.getpid() not in signals.marked("SOLBENCH_TEST_MARK", "abc123")
    finally:
        p.kill()
        p.wait()


def test_meminfo_and_resident_bytes():
    txt = Path("/proc/meminfo").read_text()
    kb = int(next(ln for ln in txt.splitlines() if ln.startswith("MemAvailable:")).split()[1])
    got = procfs.mem_available()
    assert abs(got - kb * 1024) < (256 << 20)   # it moves a little between the two reads
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    assert abs(procfs.resident_bytes() - pages * os.sysconf("SC_PAGE_SIZE")) < (64 << 20)


# ---------------------------------------------------------------------------- signals
_TREE = """
    import json, os, time
    same = os.fork()
    if same == 0:                      # a grandchild in the child's process group
        time.sleep(60); os._exit(0)
    r, w = os.pipe()
    other = os.fork()
    if other == 0:                     # a grandchild that left: its own session and group
        os.setsid()
        deep = os.fork()
        if deep == 0:                  # and a great-grandchild under it
            time.sleep(60); os._exit(0)
        os.write(w, str(deep).encode()); time.sleep(60); os._exit(0)
    deep = int(os.read(r, 32))
    print(json.dumps([same, other, deep]), flush=True)
    time.sleep(60)
"""


def test_kill_tree_leaves_no_process_of_the_tree():
    p = _py(_TREE, start_new_session=True)
    same, other, deep = json.loads(p.stdout.readline())
    tree = [p.pid, same, other, deep]
    assert set(signals.tree(p.pid)) == set(tree)
    assert os.getsid(other) == other and os.getpgid(same) == p.pid
    killed = signals.kill_tree(p.pid)
    assert set(killed) == set(tree)
    p.wait(timeout=10)
    assert p.returncode == -signal.SIGKILL
    # the grandchildren were re-parented (to init or a subreaper) and die there
    assert _wait_for(lambda: all(_gone(x) for x in tree)), [(x, procfs.state(x)) for x in tree]


def test_stop_tree_stops_every_process_and_cont_resumes_them():
    p = _py("""
        import json, os
        kids = []
        for _ in range(2):
            k = os.fork()
            if k == 0:
                while True:
                    pass
            kids.append(k)
        print(json.dumps(kids), flush=True)
        while True:
            pass
    """, start_new_session=True)
    try:
        kids = json.loads(p.stdout.readline())
        stopped = signals.stop_tree(p.pid, settle_s=2.0)
        assert set(stopped) == {p.pid, *kids}
        assert signals.wait_stopped(stopped, wait_s=2.0)
        assert all(procfs.state(x) == "T" for x in stopped)
        signals.send(stopped, signal.SIGCONT)
        assert _wait_for(lambda: all(procfs.running_tasks(x) for x in stopped), 5)
        # a spinning process that was never stopped does not count as stopped
        assert not signals.wait_stopped([p.pid], wait_s=0.05)
    finally:
        signals.kill_tree(p.pid)
        p.wait()


def test_kill_marked_finds_a_process_that_left_the_session():
    token = os.urandom(8).hex()
    p = _py("""
        import json, os, time
        k = os.fork()
        if k == 0:
            os.setsid()
            if os.fork():
                os._exit(0)            # a double fork: the grandchild is re-parented away
            time.sleep(60); os._exit(0)
        os.waitpid(k, 0)
        print('{}', flush=True)
        time.sleep(60)
    """, env={"SOLBENCH_TEST_MARK": token})
    try:
        _line(p)
        marked = signals.marked("SOLBENCH_TEST_MARK", token)
        assert p.pid in marked and len(marked) == 2
        orphan = next(x for x in marked if x != p.pid)
        assert p.pid not in procfs.descendants(p.pid) and orphan not in procfs.descendants(p.pid)
        killed = signals.kill_marked("SOLBENCH_TEST_MARK", token, sweeps=3)
        assert set(killed) == set(marked)
        assert _wait_for(lambda: _gone(orphan))
    finally:
        p.kill()
        p.wait()


def test_subreaper_finds_and_kills_a_double_fork():
    # in a child: become the subreaper, double-fork a daemon (setsid), then kill every
    # descendant; the daemon was re-parented to the child, so it is found and reaped there
    p = _py("""
        import json, os, time
        from solbench.proc import procfs, signals
        assert signals.become_subreaper()
        k = os.fork()
        if k == 0:
            os.setsid()
            if os.fork():
                os._exit(0)
            time.sleep(60); os._exit(0)
        os.waitpid(k, 0)
        time.sleep(0.2)
        kids = sorted(procfs.child_pids(os.getpid()))
        n = signals.kill_own_descendants()
        print(json.dumps({"kids": kids, "killed": n, "left": sorted(procfs.child_pids(os.getpid()))}), flush=True)
    """)
    out = _line(p)
    p.wait(timeout=10)
    assert len(out["kids"]) == 1 and out["kids"][0] != p.pid   # the re-parented daemon
    assert out["killed"] == 1 and out["left"] == []
    assert _gone(out["kids"][0])


def test_reap_returns_the_status_of_a_killed_child():
    p = subprocess.Popen(["sleep", "60"])
    os.kill(p.pid, signal.SIGKILL)
    assert signals.reap(p, timeout_s=5) == -signal.SIGKILL


# ---------------------------------------------------------------------------- lines
def test_line_reader_cuts_a_long_line_and_keeps_the_next():
    r, w = os.pipe()
    reader = lines.LineReader(r, max_line=10, overlong="cut", poll_s=0.05)
    os.write(w, b"x" * 100 + b"\nok\n" + b"0123456789\n" + b"012345678\n")
    try:
        assert reader.get(5) == b"x" * 9 + b"\n"      # the cut: max_line - 1 bytes and "\n"
        assert reader.get(5) == b"ok\n"
        assert reader.get(5) == b"012345678\n"        # 11 bytes with its newline: cut too
        assert reader.get(5) == b"012345678\n"        # exactly 10 bytes: whole
        assert reader.overlong_lines == 2
        os.write(w, b"half")
        os.close(w)
        assert reader.get(5) is None                  # end of input; the half line is no line
        assert reader.get(0) is None
    finally:
        reader.stop()
    assert reader.join(2)


def test_line_reader_drops_a_long_line_when_told():
    r, w = os.pipe()
    reader = lines.LineReader(r, max_line=10, overlong="drop", poll_s=0.05)
    # the long line arrives in pieces: no newline within the first 10 bytes, then the rest
    os.write(w, b"y" * 30)
    time.sleep(0.2)
    os.write(w, b"y" * 30 + b"\nnext\n")
    os.close(w)
    try:
        assert reader.get(5) == b"next\n"
        assert reader.get(5) is None
    finally:
        reader.stop()


def test_line_reader_never_waits_past_its_timeout_on_a_silent_writer():
    r, w = os.pipe()   # the write end stays open and nothing is ever written
    reader = lines.LineReader(r, max_line=64, poll_s=0.1)
    try:
        t0 = time.monotonic()
        with pytest.raises(queue.Empty):
            reader.get(0.3)
        took = time.monotonic() - t0
        assert 0.25 <= took < 1.5, took
        reader.stop()
        assert reader.join(2), "the reading thread did not stop while the writer held the pipe"
    finally:
        os.close(w)


def test_line_reader_holds_at_most_max_queued_lines():
    r, w = os.pipe()
    reader = lines.LineReader(r, max_line=16, max_queued=3, poll_s=0.05)
    os.write(w, b"".join(b"%d\n" % i for i in range(20)))
    os.close(w)
    try:
        time.sleep(0.3)
        assert reader._q.qsize() == 3                 # the thread waits for the reader
        got = [reader.get(5) for _ in range(20)]
        assert got == [b"%d\n" % i for i in range(20)]
        assert reader.get(5) is None
    finally:
        reader.stop()


def test_line_reader_refuses_nonsense_bounds():
    with pytest.raises(ValueError):
        lines.LineReader(0, max_line=1)
    with pytest.raises(ValueError):
        lines.LineReader(0, max_line=8, overlong="truncate")


# ---------------------------------------------------------------------------- registry
def test_registry_accounts_for_baseline_workers_and_helpers():
    reg = OwnProcesses()
    old = subprocess.Popen(["sleep", "60"])
    assert reg.mark_baseline() and not reg.mark_baseline()
    worker, helper, keeper, stray = (subprocess.Popen(["sleep", "60"]) for _ in range(4))
    try:
        reg.workers.add(worker.pid)
        reg.add(helper.pid)
        reg.add(keeper.pid, survive=True)
        mine = {old.pid, worker.pid, helper.pid, keeper.pid, stray.pid}
        unreg = set(reg.unregistered_children()) & mine
        assert unreg == {stray.pid}
        assert reg.known() >= {old.pid, worker.pid, helper.pid, keeper.pid}
        assert reg.helpers() == {helper.pid, keeper.pid} and reg.helpers(survive=True) == {keeper.pid}
        # a shutdown spares the children older than the first worker and the survivors only
        assert reg.spared_at_shutdown() & mine == {old.pid, keeper.pid}
        assert reg.spared_at_shutdown(baseline=False) & mine == {keeper.pid}
        reg.discard(helper.pid)
        assert set(reg.unregistered_children()) & mine == {stray.pid, helper.pid}
    finally:
        for q in (old, worker, helper, keeper, stray):
            q.kill()
            q.wait()


def test_registry_reaps_a_finished_orphan_instead_of_listing_it():
    reg = OwnProcesses()
    reg.mark_baseline()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    assert _wait_for(lambda: procfs.is_zombie(pid))
    assert pid not in reg.unregistered_children()
    with pytest.raises(ChildProcessError):            # reaped by the registry
        os.waitpid(pid, os.WNOHANG)


_SHUTDOWN = """
    import json, os, subprocess, sys
    from solbench.harness import process
    from solbench.proc.registry import OWN
    process.become_subreaper()
    counting = subprocess.Popen(['sleep', '60'])
    watchdog = subprocess.Popen(['sleep', '60'])
    stray = subprocess.Popen(['sleep', '60'])
    process.HARNESS_HELPERS.add(counting.pid)          # the SOL counting child's registration
    OWN.add(watchdog.pid, survive=True)                # the CLI watchdog's
    before = sorted(process.unregistered_children())
    process.shutdown_all()
    alive = lambda p: p.poll() is None
    print(json.dumps({"unregistered": before, "stray": stray.pid, "alive": [alive(counting), alive(watchdog), alive(stray)]}), flush=True)
    watchdog.kill()
"""


def test_harness_shutdown_and_stray_guard_read_the_one_registry():
    # in a child (shutdown_all refuses new workers for the rest of its process): the stray
    # guard lists neither helper; a shutdown kills the counting child and the stray, and
    # spares the helper registered to survive
    p = _py(_SHUTDOWN)
    out = _line(p)
    p.wait(timeout=30)
    assert out["unregistered"] == [out["stray"]]
    assert out["alive"] == [False, True, False]


_ARMED = """
    import json, os, sys, time
    from solbench.proc import watchdog
    wd = watchdog.start("SOLBENCH_TEST_RUN", sys.argv[1])
    os.environ["SOLBENCH_TEST_RUN"] = sys.argv[1]
    r, w = os.pipe()
    k = os.fork()
    if k == 0:                                        # a daemon: setsid, double fork, exec
        os.setsid()
        d = os.fork()
        if d:
            os.write(w, str(d).encode())
            os._exit(0)
        os.execvp("sleep", ["sleep", "60"])           # its environment block: the marked one
    os.waitpid(k, 0)
    print(json.dumps({"watchdog": wd.pid, "daemon": int(os.read(r, 32))}), flush=True)
    time.sleep(60)
"""


def test_watchdog_kills_the_marked_processes_when_its_parent_is_sigkilled():
    token = os.urandom(8).hex()
    env = dict(os.environ, PYTHONPATH=SRC)
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_ARMED), token],
                         stdout=subprocess.PIPE, env=env)
    try:
        out = _line(p)
        wd, daemon = out["watchdog"], out["daemon"]
        # a process started after the mark was set carries it (this one's own block, read in
        # /proc, is the one it was started with); the watchdog never does
        assert _wait_for(lambda: signals.marked("SOLBENCH_TEST_RUN", token) == [daemon])
        assert daemon not in procfs.descendants(p.pid)
        p.kill()
        p.wait()
        assert _wait_for(lambda: _gone(daemon) and _gone(wd), 10), procfs.state(daemon)
    finally:
        signals.kill_marked("SOLBENCH_TEST_RUN", token)
