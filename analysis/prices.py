"""Prices and home boxes: the price file, a SkyPilot catalog and the home-box files, read and checked.

    python -m crossover.analysis cost results/scaling --prices aws/vms.csv   # a SkyPilot catalog's prices instead
    from .prices import load_prices; options, billing = load_prices()

Prices come from analysis/prices.yaml (every price with its date and source, and per provider its
billing step, minimum and start-up time) or from a SkyPilot catalog, vms.csv (`--prices FILE`,
`load_skypilot`), home boxes from small YAML files (analysis/home_boxes/, `load_home_box`;
docs/cost.md explains them). Every GPU is named by its model (`gpu:`, a key of analysis/devices.yaml:
H100, H200, A100, L4, T4, A10G, RTX 3060, RTX 4090, RTX 5090, GTX 960; a catalog's names are read as
those keys by `gpu_model`). A bad file is refused with the file, the line and the field, and what to
write instead. What a row costs at these prices: analysis/cost.py; a whole sweep: analysis/decide/.

Reads files only (pyyaml, csv); never imports torch or ray.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Literal, TypedDict, overload

import yaml

from .load import packaged
from .model import load_devices

PRICES = packaged("prices.yaml")
HOME_BOXES = packaged("home_boxes")
HOURS_PER_MONTH = 730  # 365 x 24 / 12
STALE_DAYS = 365  # a price older than this is flagged: re-read its source


class _Terms(TypedDict):
    """A Billing's terms, without the date and source of its figures: SKYPILOT_BILLING's."""

    step_s: float
    minimum_s: float
    startup_s: float


# A SkyPilot catalog (vms.csv): the columns read (GpuInfo, MemoryGiB, AvailabilityZone may be there too),
# the cloud names a path may hold, and what is assumed where the path names none or its billing is unknown.
SKYPILOT_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "Price", "SpotPrice", "Region")
CLOUDS = {"aws": "AWS", "gcp": "GCP", "azure": "Azure", "lambda": "Lambda", "runpod": "RunPod", "nebius": "Nebius",
          "vast": "Vast.ai", "coreweave": "CoreWeave", "oci": "OCI", "paperspace": "Paperspace", "cudo": "Cudo",
          "fluidstack": "FluidStack", "do": "DigitalOcean", "scaleway": "Scaleway", "shadeform": "Shadeform"}
SKYPILOT_PROVIDER = "SkyPilot"
SKYPILOT_BILLING: _Terms = {"step_s": 60, "minimum_s": 60, "startup_s": 300}


def _number(unit: str, low: float, strict: bool = True, high: float | None = None, integer: bool = False) -> dict:
    """A numeric field's metadata (`field(metadata=_number(...))`, a field mypy knows): its unit (for the messages)
    and its valid range, low < value (<= high)."""
    return {"unit": unit, "low": low, "strict": strict, "high": high, "integer": integer}


@dataclass(frozen=True)
class Price:
    usd_per_h: float = field(metadata=_number("US dollars per instance-hour", 0))
    date: str  # when the figure applied: YYYY-MM or YYYY-MM-DD
    source: str  # the provider's page
    via: str = ""  # the third-party page it was read on, if not the provider's
    note: str = ""

    def age_days(self, today: dt.date) -> int:
        return (today - day(self.date)).days

    def is_stale(self, today: dt.date) -> bool:
        """Older than STALE_DAYS on `today`: the figure may have moved; re-read its source."""
        return self.age_days(today) > STALE_DAYS


@dataclass(frozen=True)
class Billing:
    """How a provider charges: in steps of `step_s` seconds, at least `minimum_s` a start."""
    step_s: float = field(metadata=_number("seconds", 0))
    minimum_s: float = field(metadata=_number("seconds", 0, strict=False))
    startup_s: float = field(metadata=_number("seconds", 0, strict=False))  # asking for the instance to the first trial: boot, image, install
    date: str
    source: str
    via: str = ""  # the third-party page it was read on, if not the provider's
    note: str = ""

    def charged_s(self, wall_s: float) -> float:
        return max(self.minimum_s, math.ceil(wall_s / self.step_s - 1e-9) * self.step_s)


@dataclass(frozen=True)
class Option:
    name: str
    provider: str
    region: str
    gpu: str | None  # GPU model (a key of analysis/devices.yaml); null for a CPU instance
    gpus: int = field(metadata=_number("GPUs", 0, strict=False, integer=True))  # 0 for a CPU instance; rented whole
    vcpus: int = field(metadata=_number("vCPUs", 1, strict=False, integer=True))
    on_demand: Price
    spot: Price | None  # null where no spot price is recorded (the note says why)
    note: str = ""
    link: str | None = None  # how its GPUs join (a key of devices.yaml's links:); None: its GPU model's own link
    network: str | None = None  # the network between two of it (a links: key); None: not priced across nodes

    def prices(self) -> list[tuple[str, Price]]:
        return [("on-demand", self.on_demand)] + ([("spot", self.spot)] if self.spot else [])


@dataclass(frozen=True)
class HomeBox:
    name: str
    gpu: str  # GPU model (a key of analysis/devices.yaml)
    purchase_usd: float = field(metadata=_number("US dollars", 0, strict=False))  # what was paid for the parts
    purchase_date: str  # when that price applied: YYYY-MM or YYYY-MM-DD
    purchase_source: str  # where the price comes from
    lifetime_years: float = field(metadata=_number("years", 0))  # written off over this many years
    power_w: float = field(metadata=_number("watts", 0))  # drawn at the wall while training (nominal)
    utilisation: float = field(metadata=_number("a fraction of the month, e.g. 0.25", 0, high=1.0))  # share of the month it trains
    electricity_usd_per_kwh: float = field(metadata=_number("US dollars per kWh", 0, strict=False))
    matches: str | None = None  # regex on device_name for rows measured on this box; default: the gpu as a word
    source: str = ""  # where the other figures come from
    # GB of the box's card where it differs from analysis/devices.yaml's for its gpu (a 4 GB GTX 960); None: the table's
    memory_gb: float | None = field(default=None, metadata=_number("GB (10^9 bytes)", 0))
    # true: purchase_usd is what was paid on purchase_date (seed 002's box of 2017), a record no later source can
    # change, so it is never counted stale; false (the default): a price of the market, re-read after STALE_DAYS
    record: bool = False

    def is_stale(self, today: dt.date) -> bool:
        """A market price older than STALE_DAYS on `today` (a record never is): re-read its source."""
        return not self.record and (today - day(self.purchase_date)).days > STALE_DAYS

    @property
    def fixed_usd_per_month(self) -> float:
        return self.purchase_usd / (self.lifetime_years * 12)

    @property
    def energy_usd_per_h(self) -> float:
        return self.power_w / 1000 * self.electricity_usd_per_kwh

    @property
    def usd_per_h(self) -> float:
        """Cost per hour of use at the box's utilisation: write-off spread over the hours it trains, plus power."""
        return self.fixed_usd_per_month / (self.utilisation * HOURS_PER_MONTH) + self.energy_usd_per_h


# Your own machine's electricity (analysis/decide/'s "your CPU", "your GPU"), costed as a home box's:
# the power its rows measured, else these nominal watts; docs/cost.md gives the sources.
CPU_W = 65.0  # a desktop CPU's package power under load: the TDP of AMD's and Intel's mainstream desktop parts
GPU_W = 300.0  # a data-centre PCIe card's board power (NVIDIA's A100 PCIe datasheet: 300 W; H100 PCIe: 350 W)
USD_PER_KWH = 0.17  # as analysis/home_boxes/*.yaml: a typical US residential price (EIA, 2025)


@dataclass(frozen=True)
class Electricity:
    """What your own machine's electricity costs: its price, and the watts assumed where no row measured
    the power (`decide --usd-per-kwh`, `--cpu-watts`, `--gpu-watts`)."""
    usd_per_kwh: float = USD_PER_KWH  # US dollars per kWh
    cpu_w: float = CPU_W  # watts your CPU draws training, where no row read RAPL (cpu_energy_j)
    gpu_w: float = GPU_W  # watts one of your GPUs draws training, where no row read NVML (gpu_energy_j)

    def __post_init__(self) -> None:
        for flag, value, low in (("--usd-per-kwh", self.usd_per_kwh, 0), ("--cpu-watts", self.cpu_w, 1e-9),
                                 ("--gpu-watts", self.gpu_w, 1e-9)):
            if not math.isfinite(value) or value < low:
                raise ValueError(f"{flag} must be a number {'>= 0' if low == 0 else '> 0'}, got {value:g} "
                                 f"(your machine's electricity; default {getattr(Electricity, _FIELD[flag]):g})")


POWER = Electricity()  # the defaults above: one frozen value, shared as a default argument


_FIELD = {"--usd-per-kwh": "usd_per_kwh", "--cpu-watts": "cpu_w", "--gpu-watts": "gpu_w"}


class _Located(dict):
    """A YAML mapping that remembers its line and the line of each of its keys (set by `_mapping`)."""
    line: int = 0
    lines: dict[str, int]


class _Loader(yaml.SafeLoader):
    pass


def _mapping(loader, node) -> _Located:
    out = _Located(loader.construct_mapping(node, deep=True))
    out.line = node.start_mark.line + 1
    out.lines = {k.value: k.start_mark.line + 1 for k, _ in node.value}
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _utf8(path: Path) -> str:
    """The file's text; a file that is not UTF-8 text (binary, another encoding) refused naming its line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}): "
                         "save it as UTF-8, or give the text file meant") from None


def _yaml(path: Path, example: Path):
    text = _utf8(path)
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader that keeps line numbers
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"{path}: not valid YAML{at} ({getattr(exc, 'problem', exc)}): fix the syntax; "
                         f"{example} shows the format") from None


def day(date) -> dt.date:
    """A date as the files write it, YYYY-MM (its first day) or YYYY-MM-DD."""
    text = str(date)
    return dt.date.fromisoformat(text + "-01" if re.fullmatch(r"\d{4}-\d{2}", text) else text)


def _at(entry, key: str, where: str) -> str:
    line = getattr(entry, "lines", {}).get(key, getattr(entry, "line", 0)) if isinstance(entry, _Located) else 0
    return f"{where}, field {key}" + (f" (line {line})" if line else "")


def _value(entry, f, where: str):
    """One field's value, checked: a number in its range, a date, a regex, or text that is not empty."""
    value, at = entry[f.name], _at(entry, f.name, where)
    meta = f.metadata
    if meta:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{at}: must be a plain number in {meta['unit']} (no unit, no % sign), got {value!r}")
        low_ok = value > meta["low"] if meta["strict"] else value >= meta["low"]
        if not low_ok or (meta["high"] is not None and value > meta["high"]):
            bound = f"{'>' if meta['strict'] else '>='} {meta['low']:g}" + (f" and <= {meta['high']:g}" if meta["high"] else "")
            raise ValueError(f"{at}: must be {bound} ({meta['unit']}), got {value!r}")
        if meta["integer"] and value != int(value):
            raise ValueError(f"{at}: must be a whole number of {meta['unit']}, got {value!r}")
        return int(value) if meta["integer"] else float(value)
    if f.name.endswith("date"):
        try:
            day(value)
        except ValueError:
            raise ValueError(f"{at}: must be a date, YYYY-MM or YYYY-MM-DD, got {value!r}") from None
        return str(value)
    if f.name == "matches" and value is not None:
        try:
            re.compile(str(value))
        except re.error as exc:
            raise ValueError(f"{at}: not a valid regular expression ({exc}): escape its special characters, "
                             "or leave the field out to match the gpu model as a word") from None
    if f.name == "record" and not isinstance(value, bool):
        raise ValueError(f"{at}: must be true or false, got {value!r}")
    if f.name in ("source", "purchase_source", "name", "provider") and not str(value or "").strip():
        raise ValueError(f"{at}: is empty; say where the figure comes from")
    return value


def _build(cls, entry, where: str, fix: str, **built):
    """`cls` from a YAML mapping: every required field present, no unknown one, every value checked."""
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a mapping with {required}, got {entry!r}")
    missing = [name for name in required if name not in entry]
    if missing:
        line = getattr(entry, "line", 0)  # a mapping the YAML loader numbers (its line)
        raise ValueError(f"{where}{f' (line {line})' if line else ''} "
                         f"lacks {', '.join(missing)}: {fix}")
    unknown = sorted(set(entry) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {unknown}; allowed: {[f.name for f in fields(cls)]}")
    values = {f.name: built[f.name] if f.name in built else _value(entry, f, where)
              for f in fields(cls) if f.name in entry}
    return cls(**values)


def load_prices(path: str | Path = PRICES) -> tuple[list[Option], dict[str, Billing]]:
    """The price table and each provider's billing, from our YAML (.yaml, .yml) or a SkyPilot catalog
    (.csv, `load_skypilot`); every field checked, a bad one refused naming its line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"price file {path} does not exist; the project's is {PRICES}")
    if path.suffix.lower() == ".csv":
        return load_skypilot(path)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"{path}: a price file is our YAML (.yaml, as {PRICES}) or a SkyPilot catalog "
                         f"(vms.csv); rename it to say which, got the suffix {path.suffix!r}")
    data = _yaml(path, PRICES) or {}
    if not isinstance(data, dict) or not data.get("options") or not data.get("providers"):
        raise ValueError(f"{path} needs a 'providers:' mapping and an 'options:' list; see {PRICES} for the format")
    billing = {name: _build(Billing, entry, f"{path}: provider {name!r}",
                            "every provider needs step_s, minimum_s, startup_s, date and source")
               for name, entry in data["providers"].items()}
    out = []
    for i, entry in enumerate(data["options"]):
        name = entry.get("name", f"#{i + 1}") if isinstance(entry, dict) else f"#{i + 1}"
        where = f"{path}: option {name!r}"
        priced = {kind: None if not isinstance(entry, dict) or entry.get(kind) is None else _build(
            Price, entry[kind], f"{where}, {kind}", "every price needs usd_per_h, date and source")
            for kind in ("on_demand", "spot")}
        option = _build(Option, entry, where, "every option needs them (see the comment at the top of the file)", **priced)
        if option.on_demand is None:
            raise ValueError(f"{_at(entry, 'on_demand', where)}: is null; every option needs an on-demand price")
        if option.provider not in billing:
            raise ValueError(f"{_at(entry, 'provider', where)}: {option.provider!r} has no billing under 'providers:'; "
                             f"add it there (known: {sorted(billing)})")
        if (option.gpu is None) != (option.gpus == 0):
            raise ValueError(f"{_at(entry, 'gpu', where)}: a GPU instance names its gpu model and gpus >= 1, a CPU "
                             f"instance has gpu: null and gpus: 0; got gpu {option.gpu!r}, gpus {option.gpus}")
        out.append(option)
    return out, billing


def provider_of(path: Path) -> str:
    """The cloud a SkyPilot catalog prices, from a folder or file name in its path (`aws/vms.csv` -> AWS,
    `gcp-2026-11.csv` -> GCP); SKYPILOT_PROVIDER where none is named."""
    words = [w for part in path.parts for w in re.split(r"[^a-z0-9]+", part.lower()) if w]
    return next((CLOUDS[w] for w in reversed(words) if w in CLOUDS), SKYPILOT_PROVIDER)


# SkyPilot's names whose card is not the table's key of the same name: its "A100" is the 40 GB card ("A100-80GB"
# the 80 GB one), which the table holds as "A100 40GB", its "A100" being the 80 GB SXM4
SKYPILOT_CARDS = {"A100": "A100 40GB"}


def gpu_model(accelerator: str, keys) -> str:
    """A SkyPilot AcceleratorName as a key of analysis/devices.yaml (A100-80GB -> A100, A100 -> A100 40GB,
    RTX4090 -> RTX 4090, H100-MEGA -> H100); a name with no key is kept as written (V100, L40S, A10): never dropped."""
    if SKYPILOT_CARDS.get(accelerator.strip().upper()) in keys:
        return SKYPILOT_CARDS[accelerator.strip().upper()]
    flat = re.sub(r"[^A-Z0-9]", "", accelerator.upper())
    for key in sorted(keys, key=len, reverse=True):
        rest = flat.removeprefix(re.sub(r"[^A-Z0-9]", "", key.upper()))
        if rest != flat and re.fullmatch(r"(\d+GB|SXM\d?|PCIE|MEGA|NVL)*", rest):
            return key
    return accelerator


@overload
def _catalog_number(row: dict, column: str, at: str, low: float, empty_ok: Literal[False] = False) -> float: ...


@overload
def _catalog_number(row: dict, column: str, at: str, low: float, empty_ok: bool) -> float | None: ...


def _catalog_number(row: dict, column: str, at: str, low: float, empty_ok: bool = False) -> float | None:
    """One numeric cell of a catalog row: a plain number above `low`, or None where empty and `empty_ok`."""
    text = (row.get(column) or "").strip()
    if not text and empty_ok:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= low:
        need = f"a plain number above {low:g}" + (" or empty" if empty_ok else "")
        raise ValueError(f"{at}, column {column}: must be {need}, got {text!r}; fix the cell or delete the line")
    return value


def _catalog_rows(path: Path) -> list[tuple[int, dict]]:
    """The rows of a SkyPilot vms.csv with their line numbers, its header checked for SKYPILOT_COLUMNS."""
    reader = csv.DictReader(io.StringIO(_utf8(path), newline=""))
    try:
        header = reader.fieldnames
        if not header:
            raise ValueError(f"{path}, line 1: the file is empty; a SkyPilot vms.csv starts with the header "
                             f"{','.join(SKYPILOT_COLUMNS)} (SpotPrice may be empty)")
        missing = [c for c in SKYPILOT_COLUMNS if c not in header]
        if missing:
            raise ValueError(f"{path}, line 1: no column {', '.join(missing)} in the header {header}; a SkyPilot "
                             f"vms.csv has {', '.join(SKYPILOT_COLUMNS)}: add the column (its cells may be empty "
                             "for SpotPrice only)")
        rows = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:  # a NUL byte, an unclosed quote
        raise ValueError(f"{path}, line {reader.line_num}: not a CSV line ({exc}): fix the line; a SkyPilot vms.csv "
                         f"has the columns {', '.join(SKYPILOT_COLUMNS)}") from None
    if not rows:
        raise ValueError(f"{path}, line 2: no instance under the header; give one line per instance type and region")
    return rows


def load_skypilot(path: str | Path) -> tuple[list[Option], dict[str, Billing]]:
    """The options of a SkyPilot catalog (vms.csv, schema of skypilot-org/skypilot-catalog): one per instance
    type and region, on demand at Price, on spot at the lowest SpotPrice of its zones (none where empty).

    The provider comes from the path (`provider_of`), the date from a `Date` column where there is one,
    else the file's modification day; the source is the file. Billing is the project's for that provider
    (analysis/prices.yaml), else SKYPILOT_BILLING. A GPU keeps its catalog name where analysis/devices.yaml
    has no key for it; shares of a GPU (AcceleratorCount < 1) and slices under one vCPU are left out."""
    path = Path(path)
    rows = _catalog_rows(path)
    provider, keys = provider_of(path), load_devices()
    modified = dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
    merged: dict[tuple[str, str], Option] = {}
    for line, row in rows:
        at = f"{path}, line {line}"
        name, region = (row.get("InstanceType") or "").strip(), (row.get("Region") or "").strip()
        if not name:
            raise ValueError(f"{at}, column InstanceType: is empty; name the instance type or delete the line")
        price = _catalog_number(row, "Price", at, 0)
        spot = _catalog_number(row, "SpotPrice", at, 0, empty_ok=True)
        vcpus = _catalog_number(row, "vCPUs", at, 0)
        accelerator = (row.get("AcceleratorName") or "").strip()
        count = _catalog_number(row, "AcceleratorCount", at, 0, empty_ok=not accelerator) or 0
        date = (row.get("Date") or "").strip() or modified
        try:
            day(date)
        except ValueError:
            raise ValueError(f"{at}, column Date: must be a date, YYYY-MM or YYYY-MM-DD, got {date!r}") from None
        if (count and count < 1) or vcpus < 1:
            continue
        source = f"{path} (SkyPilot catalog, line {line})"
        old = merged.get((name, region))
        spots = [Price(spot, date, source, note="the lowest of its zones")] if spot else []
        spots += [old.spot] if old and old.spot else []
        merged[(name, region)] = Option(
            name=f"{provider} {name} {region}".strip(), provider=provider, region=region,
            gpu=gpu_model(accelerator, keys) if accelerator else None, gpus=int(count), vcpus=int(vcpus),
            on_demand=old.on_demand if old else Price(price, date, source),
            spot=min(spots, key=lambda p: p.usd_per_h) if spots else None)
    project = load_prices(PRICES)[1]
    billing = project.get(provider) or Billing(**SKYPILOT_BILLING, date=modified, source=f"{path}", note=(
        f"no billing known for {provider}: assumed per minute, a minute at least, {SKYPILOT_BILLING['startup_s']} s "
        f"to start; add {provider} under providers: in {PRICES} to state it"))
    return list(merged.values()), {provider: billing}


def load_home_box(path: str | Path) -> HomeBox:
    """A home box from its YAML file; every field checked, a bad one refused naming its line and the fix."""
    path = Path(path)
    example = HOME_BOXES / "seed002_gtx960.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"home box file {path} does not exist; copy {example} and edit it")
    return _build(HomeBox, _yaml(path, example), f"home box {path}", f"describe the box as {example} does")


def home_boxes() -> list[Path]:
    """The project's home boxes (analysis/home_boxes/*.yaml)."""
    return sorted(HOME_BOXES.glob("*.yaml"))
