"""The parent's own read of the worker's guarded names (threats.md principle 7).

The worker's snapshot check (:func:`~solbench.harness.guards.verify_snapshot`) runs in the
candidate's process and reports through a channel the candidate's Python can rewrite (a hook
on the JSON encoder emptied its ``changed`` list: issue 30 item 10). This module checks the
same names from the parent, in the worker's memory, where no code of the candidate's runs.

Before any candidate code exists, the worker lists for each guarded name (``time.perf_counter``,
``json.JSONEncoder.encode``, the worker's own methods and module globals, the connection's
send path) where it lives: the address of the dict that holds it (a module's ``__dict__``, a
class's type dict), of the key object in that dict and of the value, and for a Python
function of its code object and defaults (:func:`table`, op ``guard_table``). The parent
then reads ``/proc/<worker>/mem`` (the ptrace access check of a debugger) and finds each key's
entry in the dict's current key table (:func:`changed`): a value, code object or defaults
pointer other than the listed one, or a key no longer in its dict, is a replaced name.

CPython layout read (3.11-3.13, 64-bit, the GIL build; checked against the table itself
right after the worker starts, :func:`changed` on an untouched worker must find nothing, so
any other layout turns the check off instead of reporting): ``PyDictObject`` has ``ma_keys``
at offset 32 and ``ma_values`` at 40 (a split table, not used by module and type dicts, is
skipped); ``PyDictKeysObject`` is ``dk_refcnt`` (8), ``dk_log2_size``, ``dk_log2_index_bytes``,
``dk_kind`` (1 byte each), ``dk_version`` (4, after one pad byte), ``dk_usable``,
``dk_nentries`` (8 each): 32 bytes, then ``1 << dk_log2_index_bytes`` bytes of indices, then
the entries: (key, value) pointers for unicode-keyed tables (``dk_kind`` 1), (hash, key,
value) otherwise. ``PyFunctionObject`` holds ``func_code`` at offset 48 and
``func_defaults`` at 56 (Include/cpython/funcobject.h: globals, builtins, name, qualname,
code, defaults after the object header).
"""

from __future__ import annotations

import gc
import os
import struct
import sys
import types
from typing import Any

#: offsets (bytes) of the CPython structures read (module doc)
MA_KEYS, MA_VALUES = 32, 40
DK_HEADER = 32
FUNC_CODE, FUNC_DEFAULTS = 48, 56
#: most entries of a key table scanned (a module dict holds a few thousand at most)
MAX_ENTRIES = 1 << 16
#: the layout above is this interpreter's (64-bit CPython 3.11-3.13 with the GIL)
SUPPORTED = sys.implementation.name == "cpython" and sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)) \
    and sys.maxsize == 2**63 - 1 and getattr(sys, "_is_gil_enabled", lambda: True)()


def _owner_dict(owner: Any, attr: str) -> dict | None:
    """The real dict that holds ``owner``'s attribute ``attr``: a module's ``__dict__``, the
    type dict (behind its mappingproxy) of the first class of ``owner``'s MRO that defines
    it. (A name then set on a class before the definer shadows it unseen here: the worker's
    own snapshot still looks there.)"""
    if isinstance(owner, types.ModuleType):
        return owner.__dict__
    if isinstance(owner, type):
        cls = next((c for c in owner.__mro__ if attr in c.__dict__), None)
        if cls is None:
            return None
        got = [r for r in gc.get_referents(cls.__dict__) if type(r) is dict]
        return got[0] if len(got) == 1 else None
    return None


def table(names: dict[str, tuple[Any, str]]) -> list[dict[str, Any]]:
    """Worker side, before any candidate code: for each name -> (owner, attribute) whose
    owner is a module or class holding the attribute in its own dict, {"name", "ns",
    "key", "value", "code", "defaults"} (addresses; code and defaults None for what is not a
    Python function)."""
    out = []
    for name, (owner, attr) in names.items():
        d = _owner_dict(owner, attr)
        if d is None or attr not in d:
            continue
        key = next((k for k in d if k == attr), None)
        v = d[attr]
        fn = v if isinstance(v, types.FunctionType) else None
        out.append({"name": name, "ns": id(d), "key": id(key), "value": id(v),
                    "code": id(fn.__code__) if fn is not None else None,
                    # no defaults: the C field is NULL (the attribute reads None)
                    "defaults": (id(fn.__defaults__) if fn.__defaults__ is not None else 0)
                    if fn is not None else None})
    return out


def _u64(fd: int, addr: int) -> int:
    b = os.pread(fd, 8, addr)
    if len(b) != 8:
        raise OSError(f"short read at {addr:#x}")
    return struct.unpack("<Q", b)[0]


def _entries(fd: int, dict_addr: int) -> dict[int, int] | None:
    """Key pointer -> value pointer of every entry of the dict at ``dict_addr`` of the process
    behind ``fd`` (the first entry of a key, in table order); None for a split table."""
    keys = _u64(fd, dict_addr + MA_KEYS)
    if _u64(fd, dict_addr + MA_VALUES) != 0:
        return None
    hdr = os.pread(fd, DK_HEADER, keys)
    if len(hdr) != DK_HEADER:
        raise OSError("short read of a key table")
    log2_index_bytes, kind = hdr[9], hdr[10]
    nentries = struct.unpack("<q", hdr[24:32])[0]
    if not 0 <= nentries <= MAX_ENTRIES or log2_index_bytes > 40:
        raise OSError(f"implausible key table ({nentries} entries)")
    step = 16 if kind == 1 else 24
    base = keys + DK_HEADER + (1 << log2_index_bytes)
    raw = os.pread(fd, nentries * step, base)
    if len(raw) != nentries * step:
        raise OSError("short read of the entries")
    off = 0 if kind == 1 else 8  # (key, value) or (hash, key, value)
    out: dict[int, int] = {}
    for i in range(nentries):
        k, v = struct.unpack_from("<QQ", raw, i * step + off)
        out.setdefault(k, v)
    return out


def changed(fd: int, entries: list[dict[str, Any]]) -> list[str]:
    """Parent side: the names of ``entries`` (from :func:`table`) whose dict entry, code
    object or defaults differ in the process behind ``fd`` (a read-only fd on its
    ``/proc/<pid>/mem``). Each dict's key table is read once per call (the worker's class and
    module dicts hold dozens of the names each; the worker is waiting for a request while
    the parent reads). Raises OSError when the memory cannot be read as laid out."""
    out = []
    tables: dict[int, dict[int, int] | None] = {}
    for e in entries:
        if e["ns"] not in tables:
            tables[e["ns"]] = _entries(fd, e["ns"])
        t = tables[e["ns"]]
        v = None if t is None else t.get(e["key"])
        if v is None:
            out.append(f"{e['name']} (removed from its namespace)")
            continue
        if v != e["value"]:
            out.append(e["name"])
            continue
        if e["code"] is not None and (_u64(fd, v + FUNC_CODE) != e["code"]
                                      or _u64(fd, v + FUNC_DEFAULTS) != e["defaults"]):
            out.append(f"{e['name']} (code or defaults replaced)")
    return out
