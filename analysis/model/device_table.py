"""The device table (analysis/devices.yaml): each GPU's datasheet peaks, bandwidth, memory and launch overhead,
with its source and date; `device_key` finds a device name's entry.
"""
from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..load import packaged


DEVICES = packaged("devices.yaml")


DEVICE_FIELDS = ("name", "fp32_flops", "tf32_flops", "bf16_flops", "memory_bytes_per_s", "launch_overhead_s",
                 "source", "date")


PRECISION_PEAK = {"fp32": "fp32_flops", "tf32": "tf32_flops", "bf16": "bf16_flops", "fp16": "fp16_flops"}
UNIT = {"tf32": "TF32", "bf16": "BF16", "fp16": "FP16 tensor-core"}  # the unit a precision's peak needs


MATCH_KEY = "_device_key"


@dataclass(frozen=True)
class Device:
    key: str  # short name, as prices and home boxes write it
    name: str
    fp32_flops: float  # FLOP/s, dense
    tf32_flops: float | None  # FLOP/s, dense tensor cores; None: no TF32
    bf16_flops: float | None  # FLOP/s, dense, FP32 accumulate; None: no BF16
    memory_bytes_per_s: float
    launch_overhead_s: float  # s per eager op, before the fitted scale
    source: str
    date: str
    memory_gb: float | None = None  # the card's memory, GB (10^9 bytes); None: not known
    # FLOP/s, dense FP16 on tensor cores, FP32 accumulate, where it differs from bf16_flops: a GPU of FP16 tensor cores
    # and no BF16 (Volta, Turing); None: as bf16_flops
    fp16_flops: float | None = None
    link: str | None = None  # how boards of several join it: a key of the table's `links:` (model/collective.py)

    def peak(self, precision: str) -> float:
        """FLOP/s at `precision`, falling back to FP32 where the GPU lacks the unit (`lacks`)."""
        if precision == "fp16":
            return self.fp16_flops or self.bf16_flops or self.fp32_flops
        return getattr(self, PRECISION_PEAK.get(precision, "fp32_flops")) or self.fp32_flops

    def lacks(self, precision: str) -> str | None:
        """The unit `precision` runs on that this GPU has not: its table entry gives that precision no peak (null; fp16
        runs on a BF16 unit where there is one), else None. Its time is then priced at its FP32 peak: PyTorch runs TF32
        as FP32 there, and bf16 emulated or fp16 without tensor cores, no faster. A unit no faster than FP32 is not
        lacked (the GeForce RTX 3090's TF32, 35.6 TFLOP/s as its FP32): it runs, and the public tables order it."""
        if precision not in UNIT:
            return None
        peak = (self.fp16_flops or self.bf16_flops) if precision == "fp16" else getattr(self, PRECISION_PEAK[precision])
        return None if peak else UNIT[precision]


def load_devices(path: Path = DEVICES) -> dict[str, Device]:
    """The device table; an entry missing a field (its source and date included) is refused by name. Read once a
    process for each version of the file (`read_table`)."""
    stat = Path(path).stat()
    return dict(_devices(Path(path).resolve(), stat.st_mtime_ns, stat.st_size))


def read_table(path: Path = DEVICES) -> dict:
    """The device table's YAML, its GPUs and its links, as parsed once a process for each version of the file (its
    size and time of change), by libyaml where PyYAML has it: a prediction asks for it a few dozen times, and
    PyYAML's own parser took a fifth of `crossover predict`'s answer from a kept count. A copy: the caller's own."""
    stat = Path(path).stat()
    return copy.deepcopy(_parsed(Path(path).resolve(), stat.st_mtime_ns, stat.st_size))


@functools.cache
def _parsed(path: Path, changed_ns: int, size: int) -> dict:
    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


@functools.cache
def _devices(path: Path, changed_ns: int, size: int) -> dict[str, Device]:
    table = read_table(path)
    table.pop("links", None)  # the links between GPUs: model/collective.py reads them
    devices = {}
    for key, entry in table.items():
        missing = [f for f in DEVICE_FIELDS if f not in (entry or {}) or
                   (f in ("name", "source", "date", "fp32_flops", "memory_bytes_per_s", "launch_overhead_s")
                    and not entry[f])]
        if missing:
            raise ValueError(f"{path}: device {key!r} lacks {missing}: give every entry its figures, the source "
                             "they come from and its date (YYYY-MM)")
        figures: dict[str, Any] = {}  # Device's figures by name: float, None where one may be left out (tf32, bf16)
        for f in DEVICE_FIELDS[1:6]:
            try:
                figures[f] = None if entry[f] is None else float(entry[f])
            except (TypeError, ValueError):
                raise ValueError(f"{path}: device {key!r}: {f} must be a number (e.g. 66.9e12), "
                                 f"got {entry[f]!r}") from None
        fp16 = entry.get("fp16_flops")
        try:  # as the figures above: YAML reads 125e12 (no dot) as a string
            fp16 = None if fp16 is None else float(fp16)
        except (TypeError, ValueError):
            fp16 = -1.0
        if fp16 is not None and fp16 <= 0:
            raise ValueError(f"{path}: device {key!r}: fp16_flops must be a number above 0 (e.g. 125e12), got "
                             f"{entry['fp16_flops']!r}; leave it out where FP16 runs at bf16_flops")
        memory = entry.get("memory_gb")
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory <= 0):
            raise ValueError(f"{path}: device {key!r}: memory_gb must be a number of GB above 0 (e.g. 80), "
                             f"got {memory!r}; leave it out where not known")
        devices[str(key)] = Device(key=str(key), name=str(entry["name"]), **figures,
                                   source=str(entry["source"]), date=str(entry["date"]),
                                   memory_gb=None if memory is None else float(memory),
                                   fp16_flops=fp16, link=entry.get("link"))
    return devices


def device_key(device_name: str, devices: dict[str, Device]) -> str | None:
    """The table's key that `device_name` contains as a whole word, case-insensitive (the longest)."""
    found = [k for k in devices if re.search(rf"(?<![a-z0-9]){re.escape(k.lower())}(?![a-z0-9])", str(device_name).lower())]
    return max(found, key=len) if found else None
