"""A model of time per epoch, fitted on the measured devices, that predicts the GPUs nobody measured.

    python -m crossover.analysis model --validate            # the shipped reference rows: held-out error, coverage, targets
    python -m crossover.analysis model RESULTS... [--validate]

    predict(rows, ["A100", "L4"], fitted=shipped)   # what analysis/decide/ asks: one predicted row per
                                     # configuration and GPU, epoch_s_median with a 90% conformal interval
                                     # (epoch_s_lo, epoch_s_hi), from the fit on the shipped reference rows
    predict_counted(configs, ["A100"])   # the same for a step counted, never timed (crossover predict)
    predict_step(step, ["A100"])          # one counted step's Prediction per GPU, typed (analysis/decide/)

THE model is per op class (matmul, conv, rnn, norm, elementwise, optimizer: crossover/schema.py's OP_CLASSES,
counted by trainables/costs.py into each row as {class}_{flops,bytes,launches}_per_step, and the ops the
forward pass dispatches as forward_ops_per_step). On a GPU of the device table (analysis/devices.yaml:
peak FLOP/s, bandwidth, a per-launch overhead), a class with FLOPs F, bytes B and launches n costs

    host_c = n x overhead x k,   gpu_c = max(F / (peak x u_c(F/n)), B / (bandwidth x m(B/n)))
    u(s) = u_max s / (s + s_half)          (a saturating utilisation in the op's size, NeuSight-style)
    H = sum of host_c + forward ops x overhead x k_forward + cuDNN RNN calls x overhead x k_rnn_call
    G = sum of gpu_c, or on a table GPU, where the row lists its ops (ops_per_step), the same gpu_c op by op,
        each op taking the larger of its own compute and memory bounds
    step_s = (H^q + G^q)^(1/q)             (q = overlap: 1 the sum, larger as the GPU's work hides the host's)
    epoch_s = steps_per_epoch x step_s

the forward pass's ops costing the host the workload's Python besides (autograd's engine dispatches the
backward's from C++). u_c for matmul, conv and rnn (a matmul on the tensor cores its own, u_tensor; a cuDNN
recurrent net the matmul's, without the size term), m for every class's bytes (a norm's and a grouped
convolution's their own), k
(k_launch for a kernel of matmul, conv, norm or elementwise, k_rnn for one cuDNN launches for a recurrent net,
k_optimizer for the optimiser's), k_forward and k_rnn_call (a cuDNN RNN call's own cost, from the step's op list):
shared by every GPU, fitted by least squares on log step time (each pulled weakly towards PARAMETERS; k_rnn's and
k_rnn_call's from the operator study, `operators.rnn_host_s`) on the table GPUs. `model --validate` also prices each op of the operator study (studies/opbench.py: about 1,900 single
ops on an H100 and an H200, results/reference/_ops) from the study itself (operators.py: `op_study`); a step's ops
are not priced so, since whole steps came out worse (docs/validation.md, "The operator-level model"). A CPU, which no table
knows, gets its own fit per thread count, from nominal figures (CPU_NOMINAL) its parameters scale, and is
only explained where measured, never predicted. Rows without the per-class columns (written before them)
fall back to the three-term model (`calibrate`: launches, FLOPs and bytes in total, with a bias per
workload); every prediction says which in `model_form`.

Every prediction carries a 90% split-conformal interval from leave-one-device-out residuals (a
workload the fit saw) or leave-one-workload-out residuals (a new one): `conformal_q`. docs/model.md
gives the equations, docs/validation.md the validation. Reads rows only: never imports torch or ray.

The package, one idea a module, each reading only those before it:

    devices     the device table (analysis/devices.yaml)
    counts      a row's step counts: measured, or counted on a laptop (old rows, as_counted)
    threeterm   the fallback model of rows without the per-class columns
    operators   each op's GPU time from the operator study, as model --validate checks it
    perclass    the per-class model: its equations and its fit
    intervals   split-conformal intervals from held-out residuals
    predict     predictions for unmeasured GPUs, ordered by the public tables and floored by the roofline
    validate    model --validate: the held-out errors, the coverage and the targets
    bounds      what bounds each measured step, and the text of `crossover.analysis model`
"""

from __future__ import annotations

from .device_table import (  # noqa: F401 (the package's names)
    DEVICES, DEVICE_FIELDS, Device, MATCH_KEY, PRECISION_PEAK, device_key, load_devices)
from .counts import (  # noqa: F401 (the package's names)
    CLASS_COLUMNS, CLASS_FLOPS, COST_COLUMNS, COUNTED, COUNTED_NOTE, COUNT_KEYS, MODEL, PER_CLASS, THREE_TERM,
    as_counted, config_keys, cpu_groups, form_of, gpu_rows, step_costs, with_model)
from .threeterm import (  # noqa: F401 (the package's names)
    Calibration, calibrate)
from .perclass import (  # noqa: F401 (the package's names)
    COMPUTE_CLASSES, CPU_NOMINAL, CUPTI_FIXED, CUPTI_SLOWDOWN, EFFICIENCY, Fit, LAUNCH_COST, PARAMETERS,
    PRIOR_WEIGHT, class_times, cupti_attached, fit, step_time)
from .intervals import (  # noqa: F401 (the package's names)
    ALPHA, conformal_q, held_out, scores)
from .predict import (  # noqa: F401 (the package's names)
    Prediction, Predictor, ordered_step_s, predict, predict_counted, predict_step, predictor, public_precision, public_rows,
    reference_gpu_rows, reference_rows, shipped)
from .validate import (  # noqa: F401 (the package's names)
    MEMORY_COUNTED, NEUSIGHT_COUNTED, NEUSIGHT_LABELS, TARGETS, count_ratio, host_launch_us, memory, neusight, op_study,
    render_memory, render_neusight, render_op_study, render_validation, targets, validate)
from .bounds import (  # noqa: F401 (the package's names)
    bound_table, bounds, render, render_bounds)
