"""The user's cache folder: a job's counted step read back gives the figures a count gives, at any dataset size, and
at another batch size by arithmetic (the same FLOPs a count there gives); editing the job file or a module beside it,
or another precision, is another entry; the shipped fit read back predicts what the fit does, to the bit; an entry
that cannot be read is no entry."""

import dataclasses
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from test_predict import job

from crossover.analysis import cache, model
from crossover.step import Step
from crossover.sweeps.counting import finish, start
from crossover.analysis.model.predict import Predictor, shipped_key
from crossover.sweeps import count_cache


def counted(step: Step) -> tuple[dict, dict]:
    """`step` counted by the counting process, as `crossover predict` counts it: the configuration's columns and the
    count at step.precision."""
    return finish(start(step), step, time.monotonic())


def count(step: Step) -> dict:
    """`step`'s count at its batch and dataset size, as a row's columns."""
    config, found = counted(step)
    return config | found[step.precision].at(step.batch_size or config["batch_size"],
                                             step.dataset_size or config["dataset_size"])


def test_a_kept_count_gives_what_a_count_gives_at_another_dataset_size_and_epochs(tmp_path):
    step = Step(job(tmp_path, "cache_job"), 3, 64, 4096, (("width", 128),), (("n_features", 16),))
    assert count_cache.read(step) is None
    first = count_cache.keep(step, *counted(step))
    assert count_cache.read(step) == first == count(step)
    (entry,) = (cache.folder() / count_cache.KIND).glob(f"{count_cache.key(step)}.json")
    assert entry.is_relative_to(Path(os.environ["XDG_CACHE_HOME"])) and not entry.is_relative_to(tmp_path)
    other = dataclasses.replace(step, dataset_size=1000, epochs=7)
    kept = count_cache.read(other)
    assert kept == count(other)  # 16 steps of 64 and a last of 40: arithmetic, every count the same
    assert (kept["dataset_size"], kept["steps_per_epoch"]) == (1000, 16)
    # where no dataset size is given, the workload's default, once a count has said it
    default = dataclasses.replace(step, dataset_size=None)
    assert count_cache.read(default) is None
    count_cache.keep(default, *counted(default))
    assert count_cache.read(dataclasses.replace(default, epochs=1))["dataset_size"] == 4096


def test_editing_the_job_file_or_a_module_beside_it_is_a_new_entry(tmp_path):
    step = Step(job(tmp_path, "cache_edit"), 1, 32, 512)
    count_cache.keep(step, *counted(step))
    assert count_cache.read(step) is not None
    path = tmp_path / "cache_edit.py"
    path.write_text(path.read_text().replace("nn.ReLU()", "nn.GELU()"))
    assert count_cache.read(step) is None
    before = count_cache.key(step)
    (tmp_path / "helpers.py").write_text("WIDTH = 3\n")  # a module the job may import
    assert count_cache.key(step) != before
    assert count_cache.key(Step("package.module:workload", 1)) is None  # its files are known only once imported


def test_an_example_job_by_name_is_kept_under_its_files_bytes():
    # `--workload zoo` is the package's module crossover.examples.zoo:workload: kept, where another module is not
    from crossover.trainables import fingerprint
    from crossover.trainables.job import example_file, named

    ref = named("zoo")
    assert ref == "crossover.examples.zoo:workload" and named("job.py:workload") == "job.py:workload"
    path = example_file("crossover.examples.zoo")
    assert path is not None and path.name == "zoo.py" and path.parent.name == "examples"
    assert count_cache.job_fingerprint(ref) == fingerprint.of(path.read_bytes(), "example")
    assert count_cache.job_fingerprint(named("realsize")) != count_cache.job_fingerprint(ref)
    step = Step(ref, 1, 32, 512, (), (("arch", "resnet18"),))
    assert count_cache.key(step) is not None
    assert count_cache.key(step) != count_cache.key(dataclasses.replace(step, params=(("arch", "resnet50"),)))


def test_another_precision_is_another_entry_and_another_batch_size_is_arithmetic(tmp_path):
    step = Step(job(tmp_path, "cache_keys"), 1, 32, 512)
    count_cache.keep(step, *counted(step))
    keys = {count_cache.key(r) for r in (step, dataclasses.replace(step, precision="bf16"),
                                         dataclasses.replace(step, axes=(("width", 8),)))}
    assert len(keys) == 3 and count_cache.key(dataclasses.replace(step, batch_size=96)) == count_cache.key(step)
    assert count_cache.read(dataclasses.replace(step, precision="bf16")) is None
    assert count_cache.read(dataclasses.replace(step, dataset_size=16)) is None  # batch 32 > 16: counted, refused
    # a batch neither count was taken at: on the line through the two, as a count there says
    larger = dataclasses.replace(step, batch_size=96)
    kept, there = count_cache.read(larger), count(larger)
    assert kept["batch_size"] == 96 and kept["steps_per_epoch"] == there["steps_per_epoch"] == 6
    for column in ("flops_per_step", "matmul_flops_per_step", "launches_per_step", "forward_ops_per_step"):
        assert kept[column] == there[column], column
    for column in ("bytes_per_step", "peak_memory_bytes"):
        assert kept[column] == pytest.approx(there[column], rel=0.02), column
    def by_kind(listed):  # an op's FLOPs and times dispatched, summed per kind (its bytes are near a line, not on it)
        sums: dict = {}
        for kind, _, flops, _, _, times in json.loads(listed):
            sums[kind] = np.add(sums.get(kind, (0, 0)), (flops * times, times))
        return {k: tuple(v) for k, v in sums.items()}
    assert by_kind(kept["ops_per_step"]) == by_kind(there["ops_per_step"])


def test_one_process_counts_every_precision_asked_and_keeps_each(tmp_path):
    step = Step(job(tmp_path, "cache_precisions"), 1, 32, 512, precision="bf16")
    default = dataclasses.replace(step, precision="default")
    kept, counting = count_cache.begin([step, default])
    assert kept == {} and len(counting) == 1  # one process, both precisions
    counts = count_cache.end(counting, time.monotonic())
    assert counts[step]["precision"] == "bf16" and counts[default]["precision"] == "default"
    again, none = count_cache.begin([dataclasses.replace(step, batch_size=8), default])
    assert none == [] and again[default] == counts[default]
    assert again[dataclasses.replace(step, batch_size=8)]["batch_size"] == 8


def test_the_shipped_fit_read_back_predicts_what_the_fit_predicts():
    fitted = model.shipped(model.PER_CLASS)
    kept = Predictor.from_json(cache.read("fit", shipped_key(model.PER_CLASS)))
    assert kept.to_json() == json.loads(json.dumps(fitted.to_json()))
    devices = model.load_devices()
    rows = model.reference_gpu_rows(devices).head(40)
    assert np.array_equal(kept.fit.step_s(rows, devices), fitted.fit.step_s(rows, devices))
    assert kept.interval("an unseen job") == fitted.interval("an unseen job")


def test_an_entry_that_cannot_be_read_is_none_and_a_write_leaves_no_temporary_file():
    cache.write("test", "k", {"a": 1.5})
    assert cache.read("test", "k") == {"a": 1.5}
    (cache.folder() / "test" / "k.json").write_text('{"a": 1.')  # cut short
    assert cache.read("test", "k") is None and cache.read("test", "absent") is None
    assert [p.name for p in (cache.folder() / "test").iterdir()] == ["k.json"]
