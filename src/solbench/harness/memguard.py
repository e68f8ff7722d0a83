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
code, defaults after the object header). A str holds its cached hash at offset 24
(``PyASCIIObject``: the object header, ``length``, ``hash``). Every object's type pointer is
at offset 8; ``PyTypeObject`` holds ``tp_mro`` at offset 344 (the same on 3.11-3.13); a
tuple's length is at 16 and its items from 24.

For the objects of the reply path (the Worker and its connection, :func:`instance_table`)
the parent also reads what decides an attribute read on them besides their own dict: the
object's type pointer (``__class__`` reassigned), and per class of that type's MRO its
metaclass, the classes of its MRO (``__bases__`` reassigned) and every (key, value) of its
dict (``__getattribute__`` added, a data descriptor named as an instance attribute).
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
#: offset of a str's cached hash (``PyASCIIObject``: the object header, ``length``, ``hash``)
STR_HASH = 24
#: most shadowing class dicts listed per name
MAX_SHADOWS = 16
#: where an instance's dict pointer lives (``MANAGED_DICT_OFFSET``: three words before the
#: object, 3.11-3.13), and the offset of the values in a split table's value array (3.13
#: puts a 4-byte header, padded to 8, before them)
MANAGED_DICT = -24
SPLIT_VALUES = 8 if sys.version_info[:2] >= (3, 13) else 0
#: an object's type pointer (``ob_type``, after the reference count), a type's MRO tuple
#: (``tp_mro``, PyTypeObject of 3.11-3.13: the 42nd word), a tuple's length and first item
#: (``ob_size`` after the object header, then ``ob_item``)
OB_TYPE, TP_MRO, TUPLE_SIZE, TUPLE_ITEMS = 8, 344, 16, 24
#: most classes of an instance's type listed, and most entries of one class dict
MAX_CLASSES, MAX_CLASS_ITEMS = 16, 4096
#: most entries of a key table scanned (a module dict holds a few thousand at most)
MAX_ENTRIES = 1 << 16
#: the layout above is this interpreter's (64-bit CPython 3.11-3.13 with the GIL)
SUPPORTED = sys.implementation.name == "cpython" and sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)) \
    and sys.maxsize == 2**63 - 1 and getattr(sys, "_is_gil_enabled", lambda: True)()


def _type_dict(cls: type) -> dict | None:
    """The real dict behind ``cls.__dict__`` (a mappingproxy)."""
    got = [r for r in gc.get_referents(cls.__dict__) if type(r) is dict]
    return got[0] if len(got) == 1 else None


def _owner_dict(owner: Any, attr: str) -> tuple[dict | None, list[dict]]:
    """The real dict that holds ``owner``'s attribute ``attr`` (a module's ``__dict__``, the
    type dict of the first class of ``owner``'s MRO that defines it), and the type dicts of
    the classes before that definer in the MRO: a name set on one of them later shadows the
    definer's (``Connection.send_bytes`` set on ``Connection`` hides ``_ConnectionBase``'s),
    so the parent reads them too."""
    if isinstance(owner, types.ModuleType):
        return owner.__dict__, []
    if isinstance(owner, type):
        i = next((i for i, c in enumerate(owner.__mro__) if attr in c.__dict__), None)
        if i is None:
            return None, []
        shadows = [_type_dict(c) for c in owner.__mro__[:i]]
        return _type_dict(owner.__mro__[i]), [d for d in shadows if d is not None]
    return None, []


def table(names: dict[str, tuple[Any, str]]) -> list[dict[str, Any]]:
    """Worker side, before any candidate code: for each name -> (owner, attribute) whose
    owner is a module or class holding the attribute in its own dict, {"name", "ns",
    "key", "value", "code", "defaults"} (addresses; code and defaults None for what is not a
    Python function)."""
    out = []
    for name, (owner, attr) in names.items():
        d, shadows = _owner_dict(owner, attr)
        if d is None or attr not in d:
            continue
        key = next((k for k in d if k == attr), None)
        v = d[attr]
        fn = v if isinstance(v, types.FunctionType) else None
        out.append({"name": name, "ns": id(d), "key": id(key), "value": id(v),
                    "code": id(fn.__code__) if fn is not None else None,
                    # no defaults: the C field is NULL (the attribute reads None)
                    "defaults": (id(fn.__defaults__) if fn.__defaults__ is not None else 0)
                    if fn is not None else None,
                    # the dicts where the name would shadow this one, and its hash in this
                    # process (an equal key is found there by hash, whatever its object)
                    "shadows": [id(x) for x in shadows][:MAX_SHADOWS], "hash": hash(attr)})
    return out


def _u64(fd: int, addr: int) -> int:
    b = os.pread(fd, 8, addr)
    if len(b) != 8:
        raise OSError(f"short read at {addr:#x}")
    return struct.unpack("<Q", b)[0]


def _code_and_defaults(fd: int, func: int) -> tuple[int, int]:
    """A function object's ``func_code`` and ``func_defaults`` pointers, adjacent
    (:data:`FUNC_CODE`, :data:`FUNC_DEFAULTS`), in one read."""
    b = os.pread(fd, 16, func + FUNC_CODE)
    if len(b) != 16:
        raise OSError(f"short read at {func + FUNC_CODE:#x}")
    return struct.unpack("<QQ", b)


def _entries(fd: int, dict_addr: int, split: bool = False) -> list[tuple[int | None, int, int]] | None:
    """(hash or None, key pointer, value pointer) of every entry of the combined dict at
    ``dict_addr`` in the process behind ``fd``; None for a split table unless ``split``
    (an instance's dict: the keys are its class's shared ones, and the values, an array
    of their own at ``ma_values`` + :data:`SPLIT_VALUES`, are NULL where this instance
    has none). Unicode-keyed tables
    (``dk_kind`` 1) keep no hash in the entry: the key's own cached hash is read where it
    is wanted (:data:`STR_HASH`)."""
    keys = _u64(fd, dict_addr + MA_KEYS)
    values = _u64(fd, dict_addr + MA_VALUES)
    if values != 0 and not split:
        return None
    hdr = os.pread(fd, DK_HEADER, keys)
    if len(hdr) != DK_HEADER:
        raise OSError("short read of a key table")
    log2_index_bytes, kind = hdr[9], hdr[10]
    nentries = struct.unpack("<q", hdr[24:32])[0]
    if not 0 <= nentries <= MAX_ENTRIES or log2_index_bytes > 40:
        raise OSError(f"implausible key table ({nentries} entries)")
    step = 24 if kind == 0 else 16  # general: (hash, key, value); unicode and split: (key, value)
    base = keys + DK_HEADER + (1 << log2_index_bytes)
    raw = os.pread(fd, nentries * step, base)
    if len(raw) != nentries * step:
        raise OSError("short read of the entries")
    if values != 0:  # split: the values are the instance's own array
        vals = os.pread(fd, nentries * 8, values + SPLIT_VALUES)
        if len(vals) != nentries * 8:
            raise OSError("short read of the split values")
        return [(None, struct.unpack_from("<Q", raw, i * step)[0], struct.unpack_from("<Q", vals, i * 8)[0])
                for i in range(nentries)]
    if kind != 0:  # (key, value)
        return [(None, *struct.unpack_from("<QQ", raw, i * step)) for i in range(nentries)]
    return [struct.unpack_from("<qQQ", raw, i * step) for i in range(nentries)]  # (hash, key, value)


def _keys_of(fd: int, dict_addr: int) -> tuple[frozenset[int], frozenset[int]]:
    """The key pointers of the dict at ``dict_addr`` and their hashes (the entry's own for a
    general table; for a unicode-keyed one each key's cached hash, at :data:`STR_HASH`); a
    deleted entry's NULL key is skipped."""
    addrs, hashes = set(), set()
    for h, k, _ in _entries(fd, dict_addr) or ():
        if k == 0:
            continue
        addrs.add(k)
        hashes.add(h if h is not None else struct.unpack("<q", os.pread(fd, 8, k + STR_HASH))[0])
    return frozenset(addrs), frozenset(hashes)


def _holds(fd: int, dict_addr: int, key_addr: int, key_hash: int,
           seen: dict[int, tuple[frozenset[int], frozenset[int]]]) -> bool:
    """Whether the dict at ``dict_addr`` holds the key object ``key_addr`` or any key whose
    hash is ``key_hash`` (:func:`_keys_of`). A different name of the same 64-bit hash is a
    false alarm of probability 2^-64 per key. ``seen``: the dicts already read in this pass,
    by address (one pass reads each once: a class dict is the shadow of dozens of names)."""
    if dict_addr not in seen:
        seen[dict_addr] = _keys_of(fd, dict_addr)
    addrs, hashes = seen[dict_addr]
    return key_addr in addrs or key_hash in hashes


def changed(fd: int, entries: list[dict[str, Any]]) -> list[str]:
    """Parent side: the names of ``entries`` (from :func:`table`) whose dict entry, code
    object or defaults differ in the process behind ``fd`` (a read-only fd on its
    ``/proc/<pid>/mem``). Each dict's key table is read once per call (the worker's class and
    module dicts hold dozens of the names each; the worker is waiting for a request while
    the parent reads). Raises OSError when the memory cannot be read as laid out."""
    out = []
    tables: dict[int, dict[int, int]] = {}
    seen: dict[int, tuple[frozenset[int], frozenset[int]]] = {}
    for e in entries:
        shadow = next((a for a in e.get("shadows") or () if _holds(fd, a, e["key"], e["hash"], seen)), None)
        if shadow is not None:
            out.append(f"{e['name']} (shadowed by a class before its definer)")
            continue
        if e["ns"] not in tables:  # the first entry of a key, in table order
            tables[e["ns"]] = {}
            for _, k, val in _entries(fd, e["ns"]) or ():
                tables[e["ns"]].setdefault(k, val)
        v = tables[e["ns"]].get(e["key"])
        if v is None:
            out.append(f"{e['name']} (removed from its namespace)")
            continue
        if v != e["value"]:
            out.append(e["name"])
            continue
        if e["code"] is not None and _code_and_defaults(fd, v) != (e["code"], e["defaults"]):
            out.append(f"{e['name']} (code or defaults replaced)")
    return out


# ------------------------------------------------------------------------------ instances
def instance_table(objs: dict[str, tuple[Any, tuple[str, ...]]]) -> list[dict[str, Any]]:
    """Worker side, before any candidate code: for each label -> (object, data attributes
    whose value must stay) (an object that is a class: only its classes, below), {"name", "obj", "ns" (its __dict__), "methods", "method_hashes", "pinned",
    "pinned_hashes", "pinned_values"}: the object's address and its ``__dict__``'s (made
    now, so every attribute set later lands there), the names and hashes of the methods of
    its class (an instance attribute of such a name shadows the method for every call made
    through the object: the worker's reply path), and the data attributes it reads its
    connection through, with their values' addresses."""
    out = []
    for label, (obj, pinned) in objs.items():
        if isinstance(obj, type):
            # a class whose instances the reply path makes as it goes (json.dumps' encoder):
            # its classes only
            out.append({"name": label, "obj": id(obj), "ns": 0, "methods": [], "method_hashes": [],
                        "pinned": [], "pinned_hashes": [], "pinned_values": [], "type": None,
                        "classes": _class_entries(obj)})
            continue
        d = getattr(obj, "__dict__", None)  # materialised: later attributes are set in this dict
        if type(d) is not dict:
            continue  # no instance dict (None, a C object): nothing can be set on it
        cls = type(obj)
        methods = sorted({n for c in cls.__mro__[:-1] for n, v in vars(c).items()
                          if isinstance(v, (types.FunctionType, staticmethod, classmethod))})[:MAX_METHODS]
        pins = [a for a in pinned if a in d]
        # what decides an attribute read on the object besides its own dict: its type, and per
        # class of that type's MRO (object, a static type, left out) the metaclass, the MRO
        # itself and every entry of the class's dict. A new key there (``__getattribute__``, a
        # data descriptor named as a pinned attribute) or a reassigned ``__class__`` /
        # ``__bases__`` reroutes the reply path without touching any listed entry
        classes = _class_entries(cls)
        out.append({"name": label, "obj": id(obj), "ns": id(d), "methods": methods,
                    "method_hashes": [hash(n) for n in methods], "pinned": pins,
                    "pinned_hashes": [hash(a) for a in pins], "pinned_values": [id(d[a]) for a in pins],
                    "type": id(cls), "classes": classes})
    return out


def _class_entries(cls: type) -> list[dict[str, Any]]:
    """Per class of ``cls.__mro__`` but ``object`` (a static type): its address, metaclass,
    MRO's classes, type dict and that dict's (key, value) addresses."""
    out = []
    for c in cls.__mro__[:-1][:MAX_CLASSES]:
        cd = _type_dict(c)
        if cd is None:
            continue
        out.append({"name": c.__qualname__[:200], "cls": id(c), "meta": id(type(c)),
                    "mro_classes": [id(m) for m in c.__mro__][:MAX_CLASSES], "ns": id(cd),
                    "items": sorted([id(k), id(v)] for k, v in cd.items())[:MAX_CLASS_ITEMS]})
    return out


def _classes_changed(fd: int, label: str, e: dict[str, Any]) -> list[str]:
    """:func:`instances_changed` for the object's type and its MRO's classes (see
    :func:`instance_table`): the type pointer, and per class its metaclass, the classes of its
    MRO (read through the tuple, so a new tuple at the old address is compared too) and the
    (key, value) pointers of its dict."""
    out = []
    if e.get("type") is not None and _u64(fd, e["obj"] + OB_TYPE) != e["type"]:
        return [f"{label}.__class__ (reassigned)"]
    for c in e.get("classes") or ():
        if _u64(fd, c["cls"] + OB_TYPE) != c["meta"]:
            out.append(f"{label}: class {c['name']} (metaclass replaced)")
            continue
        mro = _u64(fd, c["cls"] + TP_MRO)
        n = _u64(fd, mro + TUPLE_SIZE) if mro else 0
        if n != len(c["mro_classes"]) or any(_u64(fd, mro + TUPLE_ITEMS + 8 * i) != a
                                           for i, a in enumerate(c["mro_classes"])):
            out.append(f"{label}: class {c['name']} (__bases__ reassigned: its MRO changed)")
            continue
        now = sorted([k, v] for _, k, v in _entries(fd, c["ns"]) or () if k != 0 and v != 0)
        if now != c["items"]:
            was = {k for k, _ in c["items"]}
            added = sum(1 for k, _ in now if k not in was)
            out.append(f"{label}: class {c['name']} (its dict changed: {added} key(s) added, "
                       f"{len(now) - added} of {len(was)} kept)")
    return out


#: most method names listed per instance
MAX_METHODS = 512


def instances_changed(fd: int, entries: list[dict[str, Any]]) -> list[str]:
    """Parent side: for each of ``entries`` (:func:`instance_table`), what changed in the
    process behind ``fd``: its ``__dict__`` replaced, an instance attribute named as a
    method of its class (found by hash), a pinned attribute rebound or removed, its
    ``__class__`` reassigned, or a class of its type's MRO changed (metaclass, MRO, any entry
    of its dict). Raises
    OSError when the memory cannot be read as laid out."""
    out = []
    for e in entries:
        cls_changes = _classes_changed(fd, e["name"], e)
        out.extend(cls_changes)
        if e["ns"] == 0 or (cls_changes and cls_changes[0].endswith(".__class__ (reassigned)")):
            continue  # a class entry (no instance), or an object whose type is no longer its own
        if _u64(fd, e["obj"] + MANAGED_DICT) != e["ns"]:
            out.append(f"{e['name']}.__dict__ (replaced)")
            continue
        items = _entries(fd, e["ns"], split=True) or []
        present: dict[int, int] = {}
        for h, k, v in items:
            if k == 0 or v == 0:
                continue
            if h is None:
                h = struct.unpack("<q", os.pread(fd, 8, k + STR_HASH))[0]
            present[h] = v
        for n, h in zip(e["methods"], e["method_hashes"]):
            if h in present:
                out.append(f"{e['name']}.{n} (set on the instance)")
        for n, h, v in zip(e["pinned"], e["pinned_hashes"], e["pinned_values"]):
            if present.get(h) != v:
                out.append(f"{e['name']}.{n} (rebound)")
    return out
