"""The device-map options as a person types them (one model over several devices, accelerate's big-model
path): their parsing and checks, torch-free, in the base layer so that ``config.RunConfig.validate`` reads them.
What the options do with a model lives in ``pipeline/models/device_map.py`` (loading) and
``pipeline/memory/per_device.py`` (the plan).

* ``--device-map``: ``auto``, ``balanced``, ``balanced_low_0``, ``sequential`` (accelerate computes the map) or
  a JSON file ``{module name: device}`` (a GPU index, ``"cpu"`` or ``"disk"``);
* ``--max-memory "0=70GiB,1=70GiB,cpu=200GiB"``: what each device may hold (``parse_max_memory``);
* ``--offload-folder DIR``: where weights that fit nowhere go (given only with a map: ``check_options``;
  made and written to before the model loads: ``models.device_map.check_offload_folder``);
* ``normvar plan --devices 8x80`` / ``2x24,cpu=256``: the devices a plan is made for (``parse_devices``), in GiB
  (2³⁰ bytes, as ``--memory-gb``).

Every bad value is one ``NormvarError`` line naming the fix.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from normvar_core.destination import check_regular_input
from normvar_core.errors import NormvarError

DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_DEVICE = re.compile(r"^(\d{1,4}|cpu|disk|mps|cuda:\d{1,4})$", re.ASCII)
MAX_DEVICES = 1024
"""The most GPUs one map or plan may name (accelerate maps one machine's devices; none has more)."""
MAX_BYTES = 2**60
"""The largest size one device may be given (1 EiB): more is a typo, not a machine."""
_NUMBER = r"(\d{1,15}(?:\.\d{1,9})?)"  # ASCII digits only, bounded: never inf, nan or a 400-digit float


def parse_size(text: str, what: str) -> int:
    """``70GiB``, ``200GB``, ``512MiB`` or a whole byte count -> bytes, 1 <= bytes <= MAX_BYTES, parsed once:
    ASCII digits only (``٣`` or ``²`` are not digits here), never a float's inf or nan, never a part of a byte
    (``0.1B``)."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*([KMGT]i?B|B)?\s*", str(text), re.IGNORECASE | re.ASCII)
    fix = "write sizes as 70GiB, 200GB or 512MiB"
    if not m:
        raise NormvarError(f"{what}: cannot read the size {str(text)[:40]!r}", fix=fix)
    unit = _UNITS[(m.group(2) or "").lower()]
    value = _exact(m.group(1)) * unit
    if value < 1 or (unit == 1 and value != int(value)):
        raise NormvarError(f"{what}: the size {text.strip()!r} is not a whole number of bytes (at least 1)", fix=fix)
    if value > MAX_BYTES:
        raise NormvarError(f"{what}: the size {text.strip()[:40]!r} is more than any device holds (1 EiB)", fix=fix)
    return int(value)


def _exact(number: str):
    """A decimal string read exactly (``Fraction``: ``0.1`` is one tenth, never a float's 0.1000000000000000055)."""
    from fractions import Fraction

    return Fraction(number)


def _device_key(name: str, what: str) -> int | str:
    name = name.strip().lower()[:40]
    if not _DEVICE.match(name) or name == "disk":
        raise NormvarError(
            f"{what}: unknown device {name!r}",
            fix="use GPU indices (0, 1, ...) and cpu, e.g. 0=70GiB,1=70GiB,cpu=200GiB",
        )
    index = int(name) if name.isdigit() else int(name[5:]) if name.startswith("cuda:") else name
    if isinstance(index, int) and index >= MAX_DEVICES:
        raise NormvarError(
            f"{what}: GPU {index} is beyond the {MAX_DEVICES} one machine can have",
            fix="number GPUs from 0, as nvidia-smi does",
        )
    return index


def parse_max_memory(text: str | None) -> dict[int | str, int] | None:
    """``"0=70GiB,1=70GiB,cpu=200GiB"`` -> ``{0: bytes, 1: bytes, "cpu": bytes}`` (accelerate's ``max_memory``)."""
    if text is None or not str(text).strip():
        return None
    out: dict[int | str, int] = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        dev, sep, size = part.partition("=")
        if not sep:
            raise NormvarError(
                f"--max-memory: {part.strip()!r} is not DEVICE=SIZE", fix="write it as 0=70GiB,1=70GiB,cpu=200GiB"
            )
        key = _device_key(dev, "--max-memory")
        if key in out:
            raise NormvarError(f"--max-memory names device {dev.strip()!r} twice", fix="give each device once")
        out[key] = parse_size(size, "--max-memory")
    return out or None


def read_device_map(value: str | None) -> str | dict | None:
    """A strategy name as it is, or the JSON file's ``{module: device}`` (devices checked)."""
    if value is None or value in DEVICE_MAP_STRATEGIES:
        return value
    path = Path(value).expanduser()
    if not path.suffix.lower() == ".json":
        raise NormvarError(
            f"unknown --device-map {value!r}",
            fix=f"use one of {', '.join(DEVICE_MAP_STRATEGIES)} or a .json file {{module: device}}",
        )
    check_regular_input(path, "--device-map", "give a JSON file {module: device}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise NormvarError(
            f"cannot read --device-map {path}: {exc.strerror or exc}", fix="give an existing JSON file {module: device}"
        ) from None
    except ValueError as exc:
        raise NormvarError(
            f"--device-map {path} is not valid JSON ({exc})"[:200],
            fix='write it as {"embed_tokens": 0, "layers.0": 0, "layers.1": 1, "norm": 1}',
        ) from None
    if not isinstance(data, dict) or not data:
        raise NormvarError(
            f"--device-map {path} must hold one JSON object {{module: device}}",
            fix='write it as {"embed_tokens": 0, "layers.0": 0, "norm": "cpu"}',
        )
    out = {}
    for module, dev in data.items():
        if isinstance(dev, bool) or not isinstance(dev, (int, str)) or not _DEVICE.match(str(dev).lower()):
            raise NormvarError(
                f"--device-map {path}: module {module!r} on unknown device {dev!r}",
                fix='use a GPU index (0, 1, ...), "cpu" or "disk"',
            )
        out[str(module)] = _device_key(str(dev), f"--device-map {path}") if str(dev).lower() != "disk" else "disk"
    return out


def check_options(device_map: str | None, max_memory: str | None, offload_folder: str | None) -> None:
    """The three options read (no file written): a map given when memory limits or an offload folder are."""
    read_device_map(device_map)
    parse_max_memory(max_memory)
    if device_map is None and (max_memory or offload_folder):
        raise NormvarError(
            "--max-memory and --offload-folder need a device map",
            fix="add --device-map auto (or balanced, sequential, a JSON file)",
        )


def parse_devices(text: str) -> dict[int | str, int]:
    """``normvar plan --devices``: ``8x80`` (eight 80 GiB GPUs), ``2x24,cpu=256``, ``80,40`` -> accelerate's
    ``max_memory`` in bytes (sizes in GiB = 2³⁰ bytes, as ``--memory-gb`` and as the plan prints them: an "80 GB"
    H100 reports 79.1 GiB to torch, so 8x79 is its honest figure), GPUs numbered from 0."""
    out: dict[int | str, int] = {}
    gpu = 0
    fix = "write it as 8x80 or 2x24,cpu=256 (GiB)"
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        if "=" in part:
            key = _device_key(part.split("=")[0], "--devices")
            if key in out:
                raise NormvarError(f"--devices names device {key!r} twice", fix="give each device once")
            out[key] = _gb(part.split("=", 1)[1])
            continue
        count, _, size = part.rpartition("x") if "x" in part else ("1", "", part)
        if not re.fullmatch(r"[1-9]\d{0,5}", count, re.ASCII):
            raise NormvarError(f"--devices: cannot read {part[:40]!r}", fix=fix)
        if gpu + int(count) > MAX_DEVICES:
            raise NormvarError(
                f"--devices: {part[:40]!r} names more than the {MAX_DEVICES} GPUs one machine can have", fix=fix
            )
        for _ in range(int(count)):
            if gpu in out:
                raise NormvarError(f"--devices names GPU {gpu} twice", fix="give each device once")
            out[gpu] = _gb(size)
            gpu += 1
    if not out:
        raise NormvarError("--devices names no device", fix="write it as 8x80 or 2x24,cpu=256 (GiB)")
    return out


def _gb(text: str) -> int:
    """A size in GiB (ASCII digits, finite, > 0, at most MAX_BYTES) -> bytes."""
    m = re.fullmatch(_NUMBER, text, re.ASCII)
    value = _exact(m.group(1)) * 2**30 if m else 0
    if not 1 <= value <= MAX_BYTES:
        raise NormvarError(
            f"--devices: cannot read the size {text[:40]!r}",
            fix="give sizes in GiB (at most 2^30 GiB), e.g. 8x80 or cpu=256",
        )
    return int(value)


__all__ = [
    "DEVICE_MAP_STRATEGIES",
    "MAX_DEVICES",
    "MAX_BYTES",
    "parse_size",
    "parse_max_memory",
    "read_device_map",
    "check_options",
    "parse_devices",
]
