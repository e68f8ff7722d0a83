"""Hardware specs: per-resource peaks of a GPU, read from TOML data files.

Each spec file (``src/solbench/sol/hardware/<ID>.toml``, or any path) gives the dense peaks
(FLOP/s per tensor-core dtype and per CUDA-core dtype, special-function ops/s, DRAM bytes/s),
L2 size, SM count, the clock the peaks hold at, and a ``[source]`` (datasheet URL + date, or
"measured on <host> <date> by solbench calibrate"). Specs are never keyed on an exact device
name: :func:`hardware_for_device_name` matches each spec's ``device_name_pattern`` regex.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import SolbenchError

HARDWARE_DIR = Path(__file__).parent / "hardware"

#: tensor-core operand classes (FLOP/s keys under [peak.tensor_flops_per_s])
TENSOR_CLASSES = ("fp64", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")
#: CUDA-core arithmetic classes (FLOP/s keys under [peak.cuda_flops_per_s])
CUDA_CLASSES = ("fp64", "fp32", "fp16")


class HardwareError(SolbenchError):
    """A hardware spec is missing or invalid (names the file and field)."""


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str | None = None
    date: str | None = None
    note: str | None = None
    host: str | None = None


class Peaks(BaseModel):
    """Peak rates. Units: FLOP/s (FLOP = 2 per MAC), ops/s, bytes/s. Dense (no sparsity)."""

    model_config = ConfigDict(extra="forbid")
    dram_bytes_per_s: float = Field(gt=0)
    sfu_ops_per_s: float | None = Field(default=None, gt=0)
    tensor_flops_per_s: dict[str, float] = Field(default_factory=dict)
    cuda_flops_per_s: dict[str, float] = Field(default_factory=dict)
    #: calibrate only: read-only and write-only stream bandwidths (bytes/s), informational
    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None


class HardwareSpec(BaseModel):
    """One GPU's speed-of-light figures (see module docstring)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    name: str
    kind: Literal["datasheet", "solar-lock", "measured"]
    device_name_pattern: str = ""
    sm_count: int | None = None
    l2_bytes: int | None = None
    dram_bytes: int | None = None
    clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    solar_fixed_overhead_ms: float = 0.0
    #: the spec whose constants upstream SOLAR prices this GPU with (B200 -> B200_SOLAR, the
    #: 1.5 GHz lock of the official numbers): ``model="solar"`` on this spec uses it
    solar_spec: str | None = None
    #: for measured specs: the datasheet spec id the unmeasured figures were taken from
    base: str | None = None
    #: for measured specs: peak keys taken from ``base`` rather than measured
    inherited: list[str] = Field(default_factory=list)
    source: Source
    peak: Peaks
    path: str | None = Field(default=None, exclude=True)

    def tensor_peak(self, cls: str) -> float | None:
        """Dense tensor-core FLOP/s for operand class ``cls`` (None when the GPU has none)."""
        return self.peak.tensor_flops_per_s.get(cls)

    def cuda_peak(self, cls: str) -> float | None:
        """CUDA-core FLOP/s for ``cls`` (fp64, fp32, fp16)."""
        return self.peak.cuda_flops_per_s.get(cls)


#: parsed specs by (path, modification time, size): a batch prices thousands of workloads, and
#: parsing the TOML each time was most of a warm ``solbench sol``; a changed file is a new key
_PARSED: dict[tuple[str, int, int], HardwareSpec] = {}


def _parse(path: Path) -> HardwareSpec:
    """The spec in ``path``: parsed once per file version, a deep copy handed out each time (a
    caller that changes its copy changes no other's)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise HardwareError(f"{path}: file not found") from None
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    spec = _PARSED.get(key)
    if spec is None:
        spec = _PARSED[key] = _parse_file(path)
    return spec.model_copy(deep=True)


def _parse_file(path: Path) -> HardwareSpec:
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise HardwareError(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise HardwareError(f"{path}: invalid TOML: {e}") from None
    try:
        spec = HardwareSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ()))
        raise HardwareError(f"{path}: {loc}: {err.get('msg')}") from None
    for table, allowed in (("tensor_flops_per_s", TENSOR_CLASSES), ("cuda_flops_per_s", CUDA_CLASSES)):
        for k, v in getattr(spec.peak, table).items():
            if k not in allowed:
                raise HardwareError(f"{path}: peak.{table}.{k}: unknown class (expected one of {allowed})")
            if not v > 0:
                raise HardwareError(f"{path}: peak.{table}.{k}: must be > 0")
    spec.path = str(path)
    return spec


def list_hardware() -> list[HardwareSpec]:
    """All bundled specs, sorted by id."""
    return sorted((_parse(p) for p in HARDWARE_DIR.glob("*.toml")), key=lambda s: s.id)


def load_hardware(name_or_path: str | Path | HardwareSpec) -> HardwareSpec:
    """A bundled spec by id (case-insensitive; ``-``/space equal ``_``) or a TOML file path.

    Raises:
        HardwareError: unknown id, missing file or invalid spec (naming file and field).
    """
    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        return _parse(p)
    key = re.sub(r"[\s-]+", "_", str(name_or_path)).upper()
    for f in HARDWARE_DIR.glob("*.toml"):
        if f.stem.upper() == key:
            return _parse(f)
    ids = ", ".join(s.id for s in list_hardware())
    raise HardwareError(f"unknown hardware {name_or_path!r} (bundled: {ids}; or give a .toml path)")


def hardware_for_device_name(device_name: str) -> str | None:
    """The bundled datasheet spec id whose ``device_name_pattern`` matches a torch device name
    (e.g. ``torch.cuda.get_device_name()`` = "NVIDIA H200" -> "H200"), or None.

    Matching is a case-insensitive regex search, never an exact string compare; when several
    specs match, the longest pattern wins (the most specific).
    """
    best: tuple[int, str] | None = None
    for spec in list_hardware():
        pat = spec.device_name_pattern
        if not pat or spec.kind != "datasheet":
            continue
        if re.search(pat, device_name, flags=re.IGNORECASE):
            if best is None or len(pat) > best[0]:
                best = (len(pat), spec.id)
    return best[1] if best else None


# -- writing (calibrate) ------------------------------------------------------------------

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def spec_to_toml(spec: HardwareSpec) -> str:
    """Serialise a spec to TOML text that :func:`load_hardware` reads back unchanged."""
    data = spec.model_dump(exclude_none=True)
    data.pop("path", None)
    lines: list[str] = []
    tables: list[tuple[str, dict]] = []

    def emit(prefix: str, d: dict) -> None:
        subs = []
        for k, v in d.items():
            if isinstance(v, dict):
                subs.append((k, v))
            else:
                lines.append(f"{k} = {_toml_value(v)}")
        for k, v in subs:
            name = f"{prefix}.{k}" if prefix else k
            lines.append("")
            lines.append(f"[{name}]")
            emit(name, v)

    emit("", data)
    del tables
    return "\n".join(lines) + "\n"


def calibrated_spec(base: HardwareSpec, measured: dict, *, host: str, date: str,
                    spec_id: str | None = None) -> HardwareSpec:
    """A usable spec from calibration results: measured peaks replace the base's, and every
    peak not measured is taken from ``base`` and listed in ``inherited``.

    Args:
        base: the datasheet spec of the same GPU (from :func:`hardware_for_device_name`).
        measured: ``{"dram_bytes_per_s": float, "read_bytes_per_s": ..., "write_bytes_per_s": ...,
            "tensor_flops_per_s": {cls: FLOP/s}, "cuda_flops_per_s": {cls: FLOP/s}}`` (any subset).
    """
    peak = base.peak.model_dump()
    inherited = []
    for k in ("dram_bytes_per_s", "sfu_ops_per_s", "read_bytes_per_s", "write_bytes_per_s"):
        if measured.get(k):
            peak[k] = float(measured[k])
        elif peak.get(k) is not None:
            inherited.append(k)
    for table in ("tensor_flops_per_s", "cuda_flops_per_s"):
        got = measured.get(table) or {}
        for cls, v in list(peak[table].items()):
            if cls in got and got[cls]:
                peak[table][cls] = float(got[cls])
            else:
                inherited.append(f"{table}.{cls}")
        for cls, v in got.items():
            if cls not in peak[table] and v:
                peak[table][cls] = float(v)
    return HardwareSpec(
        id=spec_id or f"{base.id}_measured",
        name=f"{base.name} (attainable ceilings measured by solbench calibrate)",
        kind="measured",
        device_name_pattern="",
        sm_count=base.sm_count, l2_bytes=base.l2_bytes, dram_bytes=base.dram_bytes,
        clock_mhz=measured.get("clock_mhz") or base.clock_mhz,
        memory_clock_mhz=measured.get("memory_clock_mhz") or base.memory_clock_mhz,
        base=base.id, inherited=inherited,
        source=Source(host=host, date=date,
                      note=f"measured on {host} {date} by solbench calibrate; "
                           f"unmeasured peaks inherited from {base.id}"),
        peak=Peaks.model_validate(peak),
    )
