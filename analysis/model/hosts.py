"""What the host sets of a step: how much the same configuration's time moves from one host to another, as a
function of the host's share of its step (`host_spread`), and what CUDA graphs and torch.compile leave of a step
(`Cure`, `cure`): both measured on the shipped reference rows, neither on validation data.

    python -m crossover.analysis model --validate    # its intervals widened by host_spread, as predictions' are

A small batch's step is bound by how fast the host's CPU dispatches kernels (the per-class model's H over its G),
and a rented GPU's host is unknown: the same H100 ran the same step 1.5x apart on two hosts (docs/model.md, "Bound by
the host"). A whole step captured in one CUDA graph (engine 'graph', trainables/graph.py) replays its kernels with
no dispatch of the host's; torch.compile(mode="reduce-overhead") (engine 'compile') captures the model's forward and
backward so, and leaves the optimiser and the loop eager.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .counts import _counted, config_keys
from .device_table import Device, MATCH_KEY, device_key
from .intervals import conformal_q
from .perclass import Fit, Parts, cupti_attached

# A step is said to be bound by the host where the host's share of its work (Parts.host_share) passes this
HOST_BOUND = 0.5


def host_of(frame: pd.DataFrame) -> pd.Series:
    """Each row's host: the folder its sweep's folder lies in (results/reference/<one machine, one day>/<sweep>);
    every shipped row's hostname is the same 'vm', so the folder is what tells two leases apart."""
    return frame["results_dir"].astype(str).str.rstrip("/").str.rsplit("/", n=2).str[-2]


def host_spread(frame: pd.DataFrame, fitted: Fit, devices: dict[str, Device]) -> float:
    """The 90% conformal quantile of how far one host's time of a configuration lies from the mean over the hosts
    that measured it on the same GPU model (log, at the geometric mean), per unit of the step's host share: a
    configuration of host share s on an unknown host lies within exp(+-s x this) of the hosts' mean 90% of the time.
    Each deviation is scaled by sqrt(n / (n - 1)) for the n hosts it was measured against (a mean of n hosts is
    nearer each than the population's). Rows timed with CUPTI attached are left out (`cupti_attached`: a harness's
    cost per launch, not a host's); NaN where no configuration was measured on two hosts of one GPU."""
    per = _per_host(frame, fitted, devices)
    if per.empty:
        return math.nan
    hosts = per.groupby("_key")["_host"].transform("nunique")
    log = np.log(per["step"])
    deviation = (log - log.groupby(per["_key"]).transform("mean")) * np.sqrt(hosts / (hosts - 1))
    return conformal_q(deviation / per["share"])


def hosts_apart(frame: pd.DataFrame, fitted: Fit, devices: dict[str, Device]) -> pd.DataFrame:
    """Per configuration measured on two hosts or more of one GPU model (CUPTI's rows aside, as `host_spread`'s), the
    slowest host's median step time over the fastest's (`apart`), the hosts (`hosts`) and its host share (`share`):
    the spread an interval of a step that host bound must span."""
    per = _per_host(frame, fitted, devices)
    step = per.groupby("_key")["step"]
    return pd.DataFrame({"apart": step.max() / step.min(), "hosts": step.size(),
                         "share": per.groupby("_key")["share"].median()})


def _per_host(frame: pd.DataFrame, fitted: Fit, devices: dict[str, Device]) -> pd.DataFrame:
    """One line a (configuration on a GPU model, host) of the configurations two hosts or more measured: its median
    step time and host share; CUPTI's rows left out (`cupti_attached`)."""
    empty = pd.DataFrame(columns=["_key", "_host", "step", "share"])
    if not len(frame) or "results_dir" not in frame or MATCH_KEY not in frame:
        return empty
    rows = frame[~cupti_attached(frame)]
    if rows.empty:
        return empty
    rows = rows.assign(_host=host_of(rows), _share=fitted.parts(rows, devices).host_share, _key=_key(rows))
    per = rows.groupby(["_key", "_host"]).agg(step=("step_s", "median"), share=("_share", "median")).reset_index()
    return per[per.groupby("_key")["_host"].transform("nunique") >= 2].reset_index(drop=True)


def _key(rows: pd.DataFrame) -> pd.Series:
    """One string a configuration on one GPU model, its engine aside: what two hosts or two engines share."""
    keys = [MATCH_KEY, *(k for k in config_keys(rows) if k != "engine")]
    return pd.Series(["|".join(map(str, values)) for values in zip(*(rows[k] for k in keys))], index=rows.index)


def widened(q, share, spread: float):
    """A prediction's interval quantile (log) with the host's part added: sqrt(q^2 + (share x spread)^2), the model's
    error and an unknown host's taken as independent; q where no spread was measured."""
    return np.sqrt(np.square(q) + np.square(np.asarray(share, float) * spread)) if np.isfinite(spread) else q


@dataclass(frozen=True)
class Cure:
    """A step under CUDA graphs, from the per-class model's own terms: the host's dispatch gone, each kernel replayed
    at a cost of its own on the GPU, graph_s = alpha x bulk + kappa x overhead x kernels (`Parts`); under
    torch.compile(mode="reduce-overhead"), the same plus a fixed cost a step (compile_s: the optimiser and the loop,
    eager, and the replay's checks). Calibrated on the engines' reference rows: each configuration's graph (compile)
    time over its eager one, against the model's ratio (`cure`)."""

    alpha: float  # x the GPU's seconds of the step's FLOPs and bytes (Parts.bulk), under the fit's shares
    kappa: float  # x the device's launch overhead: a kernel's cost in a replay
    compile_s: float  # s a step torch.compile's reduce-overhead adds to the graph's
    q_graph: float  # 90% conformal quantile of the calibration's |log residual|, graphs
    q_compile: float  # the same, torch.compile
    pairs: int  # configurations measured eager and under graphs (or compile) the calibration rests on

    def graph_s(self, parts: Parts) -> np.ndarray:
        return self.alpha * parts.bulk + self.kappa * parts.overhead * parts.kernels

    def compiled_s(self, parts: Parts) -> np.ndarray:
        return self.graph_s(parts) + self.compile_s


def _engine_pairs(rows: pd.DataFrame, devices: dict[str, Device]) -> pd.DataFrame:
    """The engines' rows (single trials on one table GPU, engines eager, graph and compile) with the CPU's count of
    their configuration (their own rows predate the per-class columns), one line a configuration, GPU and engine:
    its median step time."""
    ok = rows[(rows["status"] == "ok") & rows["engine"].isin(["eager", "graph", "compile"])
              & rows["fused_members"].fillna(1).eq(1) & rows["whole_gpu"]] if "engine" in rows else rows.iloc[:0]
    ok = ok.assign(**{MATCH_KEY: ok["device_name"].map(lambda n: device_key(n, devices))}).dropna(subset=[MATCH_KEY])
    counted = _counted(ok)
    ok = ok.drop(columns=[c for c in counted if c in ok]).join(counted).dropna(subset=["launches_per_step"])
    return ok.assign(step_s=ok["epoch_s_median"] / ok["steps_per_epoch"])


def cure(rows: pd.DataFrame, fitted: Fit, devices: dict[str, Device]) -> Cure | None:
    """`Cure` fitted on `rows`' engine pairs: alpha and kappa by least squares on log(graph / eager) measured against
    log(graph_s / the model's eager step), each pair of one configuration on one GPU; compile_s the median of
    (compile / eager measured) x the model's eager step - graph_s. None where no configuration was measured both ways."""
    pairs = _engine_pairs(rows, devices)
    if pairs.empty:
        return None
    pairs = pairs.assign(_key=_key(pairs))
    step = pairs.pivot_table(index="_key", columns="engine", values="step_s", aggfunc="median")
    if "eager" not in step or "graph" not in step:
        return None
    step = step[step["eager"].notna()]
    eager = pairs[pairs["engine"] == "eager"].drop_duplicates("_key").set_index("_key").loc[step.index]
    parts, model_s = fitted.parts(eager, devices), fitted.step_s(eager, devices)
    graphs = step["graph"].notna().to_numpy() & step["eager"].notna().to_numpy()
    measured = np.log(step["graph"] / step["eager"]).to_numpy()[graphs]

    def residual(x):
        a, k = np.exp(x)
        return measured - np.log((a * parts.bulk + k * parts.overhead * parts.kernels)[graphs] / model_s[graphs])

    from scipy.optimize import least_squares  # here, as perclass.fit imports it: only a fit needs the solver

    solved = least_squares(residual, np.zeros(2))
    alpha, kappa = np.exp(solved.x)
    graph = alpha * parts.bulk + kappa * parts.overhead * parts.kernels
    both = graphs & step.get("compile", pd.Series(np.nan, index=step.index)).notna().to_numpy()
    compile_s, q_compile = math.nan, math.nan
    if both.any():
        ratio = (step["compile"] / step["eager"]).to_numpy()[both]
        compile_s = max(float(np.median(ratio * model_s[both] - graph[both])), 0.0)
        q_compile = conformal_q(np.log(ratio) - np.log((graph[both] + compile_s) / model_s[both]))
    return Cure(float(alpha), float(kappa), compile_s, conformal_q(solved.fun), q_compile, int(graphs.sum()))
