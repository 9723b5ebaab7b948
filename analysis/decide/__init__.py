"""The decision: what a whole sweep costs and how long it takes on each option, measured or predicted.

    crossover decide results/scaling                      # the measured grid as the sweep
    crossover decide results/scaling --trials 1000 --workload peaks --deadline 2
    crossover decide results/scaling --home-box analysis/home_boxes/rtx4090.yaml
    crossover decide results/scaling --workload tabular --epochs 20 --dataset-size 1000000 --width 256   # your run
    crossover decide results/resnet --epochs 30 --dataset-size 50000 --batch-size 128 --json run.json

The sweep is the unit: a list of configurations, each run some number of trials (`sweep`): by default
the measured grid (every configuration your rows measured, as many trials as the seeds they ran of
it; the reference rows beside them add none), or N trials of a
workload spread evenly over its measured sizes. The options (`table`): every instance of
analysis/prices.yaml on demand and on spot, your machine ("your CPU, 16 threads (measured here)",
"your H100 (measured here)": the CPU and GPU rows not under results/reference/, `own_gpus`), every
home box. For each, the sweep's wall time and cost, each with its 90% interval where it rests on a
prediction, and its source (`source`): "measured on <host>, <date>" (the rows' hostname and newest
finished_at), "predicted", or "62% predicted; measured on ..." (the predicted share of its GPU-time):

    trial_s     setup_s + h2d_s + warmup_s + eval_s + (epochs - warmup_epochs) x epoch_s_median: the
                median over a configuration's measured rows of that GPU model (or CPU), at the sweep's
                epochs. Where rows measured K trials packed on one GPU (device cuda/K), the K that gives
                the most trials per GPU-second is used: a trial then holds 1/K of a GPU for its trial_s.
                A GPU's rows at a configuration always win, your machine's over the reference rows
                (`_yours_first`); at a configuration no row of it measured, analysis/model/'s
                epoch_s_median and its interval (epoch_s_lo, epoch_s_hi) over the sweep's epochs (fitted
                on the shipped reference rows alone, applied to the configuration's counted step costs:
                `predictions`), plus the fixed seconds of the measured GPUs' rows, else of the CPU's
                (measured: no interval). Every figure
                that rests on a prediction is marked '~' and printed with its interval: ~4.8 min (3.9-6.1).
    makespan    on G GPUs: the trials, longest first, each to the GPU that frees first (by their GPU
                share), and never less than the longest trial; on a CPU: one trial after another, each
                with all the threads it was measured with.
    cloud       wall = provider's startup_s + makespan; cost = price x the billed time: wall rounded up
                to the provider's billing step, at least its minimum. One instance, rented whole.
    your CPU, GPU  wall = makespan; cost = its electricity (already owned): the power its rows measured
                (RAPL cpu_energy_j, NVML gpu_energy_j, over train_s), else prices.Electricity's nominal
                watts (--cpu-watts, --gpu-watts), x wall (x GPUs) x --usd-per-kwh; its source says which.
    home box    wall = makespan; cost = write-off (purchase over lifetime, spread over the hours the
                box trains at its utilisation) + electricity: measured GPU energy where the rows of its
                GPU have gpu_energy_j (their mean power over the timed epochs, train_s), else its nominal power_w.

Your planned run (`Request`, `planned_rows`, `plan_grid`, `plan_speeds`; --epochs E --dataset-size N
[--workload W] [--batch-size B, --width, --depth, --context, --param k=v, --precision P]): E epochs of N samples of
exactly one configuration, priced instead of the measured grid, once (or --trials runs of it). Where
the workload's rows hold several shapes (its configurations less the dataset size) and the flags name
none, it is refused in one line listing them: shapes are never summed. A GPU whose rows did not measure
N (nor sizes around it) at PyTorch's default precision is priced at the model's prediction of the run's own
configuration (`at_plan`: its step counted as `crossover predict` counts it, `planned_step`, the count read from
the counts `crossover decide` and `crossover report` hand over, keyed by the step, which `steps` names for them to
count; the same function predict prices with, so both say one figure), scaled by that GPU's rows at other sizes where it has some
(`corrected`), never at a line far past the sizes measured. A CPU's time per epoch
(`per_epoch`), and the measured GPUs', and their fixed costs at N come from the
dataset sizes its rows measured (`along`): at a measured size, the measurement; between two, the
straight line through them; outside, a least-squares line a + b x N over the NEAREST sizes at that
end, its spread the RMS of its relative residuals (one size measured: its time per sample x N). The
run's time is fixed(N) + E x epoch(N) on a whole GPU (packed rows, cuda/K, left aside), and each option
says where N lies: measured, inside the range, or how many times past the largest (below the smallest)
measured size; a time extrapolated outside the range is predicted, marked '~' as the model's are.

Break-even (`break_even`): a home box costs its write-off every month, whether it trains or not, plus
the electricity of each sweep; the best option of each class (cheapest on-demand GPU, cheapest spot
GPU, the own CPU) costs its price per sweep. The box is cheaper beyond
fixed_usd_per_month / (option's $ per sweep - box's electricity per sweep) sweeps a month, each at the
box's own speed (measured, or predicted and marked): never an assumed equal speed.

Fits in memory (`memory_needed`, `memory`): each GPU option says whether the run fits its card (devices.yaml's
memory_gb, a home box's own): the GPU rows' measured peak_gpu_bytes, else the peak of a step counted by
`crossover predict` (trainables/memory.py), else an estimate from n_params and bytes_per_step, + CONTEXT_BYTES
(docs/cost.md); where it does not fit, `largest_batch` says the batch that would. One that does not fit is never picked nor on the front.

Picks (`picks`): one rule names every pick, for every screen and JSON record: the fastest is the least wall time
(start-up included), the cheapest the least cost, among the options the run fits: the GPU to rent (fastest, and
cheapest on demand), the box to buy (the cheapest run of a box for sale, with its break-even), your CPU and GPU, the
fastest and the cheapest of all, the cheapest within --deadline, and where several GPUs are rented, the cheapest as
fast as one GPU and each GPU model's cheapest count; and where the pick of yours or the box to buy is faster and
cheaper than every rental, start-up included, that one (BEATS).

Output (`brief`, the default): at most BRIEF_LINES lines of at most WIDTH columns: first, where a pick beats every
rental, that renting does not pay (`not_renting`); the GPU memory the run needs and the cards it does not fit, the
first screen's picks (`first`: the GPU to rent, fastest and cheapest; the box to buy, its break-even and what its
write-off assumes, `bought`; your CPU: `pick_lines`, which `crossover predict` says its picks with too; a rental's run
time holds its start-up, said beside it), the cheapest within --deadline, the
cost-versus-time front where lines are left, the stale prices in one line. `render` (--verbose, and the report) adds
every option, every pick, the break-even, how each is costed, the notes. `records` (--json): every option's figures
and the picks it is.

Rows of the eager engine at PyTorch's default precision only (analysis/load.py `eager_ok`;
analysis/engines.py compares engines). Reads rows only (pandas); never imports torch or ray.

The package, one idea a module, each reading only those before it:

    request    the run a user asks about (Request): built once where a command reads its flags
    grid       what is priced: the sweep's configurations and trials, or your planned run
    line       an option's figures (Line) and a home box's break-even (Even), typed: what the answer holds
    memory     whether a run fits a card, and the largest batch that does
    speeds     each configuration's time on each GPU and CPU: measured, or analysis/model/'s prediction
    pricing    every option's wall time and cost (table)
    choosing   the picks, the cost-versus-time front and the break-even
    text       the decision in words and in JSON records, the marks and their notes
    many       a planned run on N GPUs of an instance and on M instances, priced as rented (data-parallel)
    answer     answer(): this requested run, its counted steps and these options (Request, Offer), the one
               answer predict, decide, report and the end of a sweep give, on one GPU and many; decide(): the
               above put together from rows; steps(): what it looks up in the counts it is handed
    screen     a run predicted with nothing measured in words (`crossover predict`): the first screen and every
               GPU model's line, from the answer
"""

from __future__ import annotations

from .request import AXIS_FLAGS, MOST, Request  # noqa: F401 (the package's names)
from .grid import (  # noqa: F401 (the package's names)
    AXIS_NAMES, Along, BUSY_MARKS, FIXED, FULL_BATCH, HERE, HOME_BOX, NEAREST, NO_PRICE, OWN_CPU, OWN_GPU,
    SHAPE, along, busy, counted_grid, plan_grid, planned_rows, sweep)
from .line import (  # noqa: F401 (the package's names)
    Config, Even, Line, configs, frame, lines)
from .memory import (  # noqa: F401 (the package's names)
    ACTIVATION_MOVES, BYTES_PER_PARAM, CONTEXT_BYTES, FLOOR_BYTES, largest_batch, memory_needed)
from .speeds import (  # noqa: F401 (the package's names)
    HOST, OWN_SIZE, PLANNED, SPEED, at_plan, corrected, missing, plan_speeds, planned_step, predictions, speeds,
    wanted)
from .pricing import (  # noqa: F401 (the package's names)
    ENDS, card_fits, makespan, own_gpus, table)
from .choosing import (  # noqa: F401 (the package's names)
    AS_FAST, BEATS, BUY, CHEAPEST, FASTEST, FIRST, RENT_CHEAPEST, RENT_FASTEST, RENTALS, WITHIN, YOUR_CPU, YOUR_GPU,
    beats, break_even, by_cost, by_time, cheapest, fastest, first, fitting, monthly, pareto, picks)
from .text import (  # noqa: F401 (the package's names)
    BRIEF_LINES, CENT, HOST_MARK, HOST_WORDS, STALE, WIDTH, bought, bound_mark, brief, busy_notes, cards,
    costed, duration, evens, graph_said, header, host_note, how_known, memory, money, not_renting, per_epoch, pick_lines,
    precision_of, priced_on, records, render, run_time, said, significant, source, startup, tables, usd)
from . import many  # noqa: F401,E402 (the package's names)
from .answer import (  # noqa: F401 (the package's names)
    Decision, Offer, answer, counted, decide, one_each, smaller, steps)
