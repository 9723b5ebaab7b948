"""Energy over a trial's timed epochs: its GPUs' from NVML, the CPU packages' from RAPL, where readable.

    with Meter(where.devices) as energy:       # around the timed epochs (trainables/measure.py)
        ...
    energy.columns()   # {'gpu_energy_j': ..., 'cpu_energy_j': ..., 'energy_note': ...}

GPU: NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver
loaded; Volta and later), read before and after, summed over the trial's GPUs. It is the whole
board's energy, whatever else ran on it (packed trials share one GPU). CPU: the RAPL package counters
(/sys/class/powercap/intel-rapl:N/energy_uj, microjoules, one per socket, also on AMD's kernels),
summed over the packages, each difference taken modulo its max_energy_range_uj (the counter wraps).
It is the whole package's energy, every process on it included; most kernels let only root read it.
A counter that cannot be read leaves its column null and says why in energy_note.
"""

from __future__ import annotations

from pathlib import Path

import torch

POWERCAP = Path("/sys/class/powercap")


def _nvml_handles(devices: tuple) -> tuple[list, str | None]:
    """NVML handles of the trial's GPUs (found by UUID, which CUDA_VISIBLE_DEVICES does not renumber),
    or the reason there are none."""
    gpus = [d for d in devices if d.type == "cuda"]
    if not gpus:
        return [], "gpu: none used (CPU trial)"
    try:
        import pynvml

        pynvml.nvmlInit()
        return [pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{torch.cuda.get_device_properties(d).uuid}") for d in gpus], None
    except Exception as exc:  # noqa: BLE001 (pynvml's errors have no common base): no driver library, an old driver, a MIG slice: the column stays null
        return [], f"gpu: no NVML ({type(exc).__name__}: {exc})"


def _gpu_mj(handles: list) -> int:
    import pynvml

    return sum(pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in handles)


def _rapl_packages() -> tuple[list[Path], str | None]:
    """The RAPL package zones whose counters this process can read, or the reason there are none."""
    if not POWERCAP.is_dir():
        return [], f"cpu: {POWERCAP} absent"
    zones = sorted(p for p in POWERCAP.glob("intel-rapl:*") if p.name.count(":") == 1)  # packages, not sub-zones
    if not zones:
        return [], f"cpu: no RAPL package zone in {POWERCAP}"
    try:
        for zone in zones:
            int((zone / "energy_uj").read_text())
    except (OSError, ValueError) as exc:
        return [], f"cpu: {zone / 'energy_uj'} not readable ({type(exc).__name__}; root only on most kernels)"
    return zones, None


def _uj(zones: list[Path]) -> list[int]:
    return [int((zone / "energy_uj").read_text()) for zone in zones]


class Meter:
    """Reads the energy counters on entry and on exit; `columns()` gives the row's energy columns."""

    gpu_j: float | None  # J the trial's GPUs drew between entry and exit (NVML); None: no counter
    cpu_j: float | None  # J the CPU packages drew between entry and exit (RAPL); None: no counter

    def __init__(self, devices: tuple):
        self.devices = devices

    def __enter__(self) -> Meter:
        self.handles, gpu_note = _nvml_handles(self.devices)
        self.zones, cpu_note = _rapl_packages()
        self.notes = [n for n in (gpu_note, cpu_note) if n]
        try:
            self.gpu_start = _gpu_mj(self.handles) if self.handles else None
        except Exception as exc:  # noqa: BLE001 NVMLError_NotSupported before Volta
            self.handles, self.gpu_start = [], None
            self.notes.insert(0, f"gpu: NVML energy counter unsupported ({type(exc).__name__})")
        self.cpu_start = _uj(self.zones) if self.zones else None
        return self

    def __exit__(self, *exc) -> None:
        # the start counts are there wherever the handles and zones are (__enter__ reads them together)
        self.gpu_j = (_gpu_mj(self.handles) - self.gpu_start) / 1e3 if self.handles and self.gpu_start is not None \
            else None
        if self.zones and self.cpu_start is not None:
            ranges = [int((zone / "max_energy_range_uj").read_text()) for zone in self.zones]
            self.cpu_j = sum((b - a) % r for a, b, r in zip(self.cpu_start, _uj(self.zones), ranges)) / 1e6
        else:
            self.cpu_j = None

    def columns(self) -> dict:
        return {"gpu_energy_j": self.gpu_j, "cpu_energy_j": self.cpu_j, "energy_note": "; ".join(self.notes) or None}
