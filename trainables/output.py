"""What a trial prints, kept in its folder up to OUTPUT_MAX_BYTES: without it, a Ray worker's stdout and stderr go
to its session's logs under /tmp (logs/worker-*.out), which nothing caps: a job that printed 5 MB a step wrote
105 MB there.

    with capped(Path(tune.get_context().get_trial_dir()) / OUTPUT):   # trainables/trainable.py
        ...
    keep(process.stdout, log)   # sweeps/plan.py: the planning process's output into its log, capped the same

This module imports the standard library alone: `capped` runs this file as the process that keeps the output.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

OUTPUT_MAX_BYTES = 2**20  # of a process's output kept; the rest is read, counted and not kept
OUTPUT = "output.log"  # a trial's output, in its trial folder (beside exits.py's LAST_WORDS)


def keep(stream, log, limit: int = OUTPUT_MAX_BYTES) -> None:
    """`stream`'s bytes into `log` (both binary), its first `limit`; the rest read (whoever writes never blocks on
    a full pipe) and counted at the end."""
    kept = dropped = 0
    with log:
        for chunk in iter(lambda: stream.read1(65536), b""):
            room = max(limit - kept, 0)
            log.write(chunk[:room])
            log.flush()  # what a worker killed mid-trial printed last is in the file
            kept, dropped = kept + min(len(chunk), room), dropped + max(len(chunk) - room, 0)
        if dropped:
            log.write(f"\n[crossover: {dropped:,} more bytes of output not kept]\n".encode())


@contextlib.contextmanager
def capped(path: Path, limit: int = OUTPUT_MAX_BYTES):
    """This process's stdout and stderr (file descriptors 1 and 2: Python's prints, C and C++ code's, the child
    processes it starts) into `path` while the code under it runs, its first `limit` bytes kept (`keep`).

    The pipe is drained by a process of its own, not a thread: a C extension that writes while it holds the GIL
    would wait on a full pipe for a thread that waits on the GIL."""
    sys.stdout.flush()
    sys.stderr.flush()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as log:
        keeper = subprocess.Popen([sys.executable, "-I", __file__, str(limit)], stdin=subprocess.PIPE, stdout=log,
                                  stderr=subprocess.STDOUT)
    pipe = keeper.stdin
    assert pipe is not None, "stdin=PIPE: Popen opened it"
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(pipe.fileno(), 1)
        os.dup2(pipe.fileno(), 2)
        yield path
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        pipe.close()
        try:
            keeper.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass  # a process the trial started still holds the pipe: the keeper ends with it, unwaited


if __name__ == "__main__":  # `capped`'s keeper: its stdin into its stdout
    keep(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[1]))
