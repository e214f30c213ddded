"""One side of the A/B speed gate: a process that times one checkout's kernel cases on request.

Run by the gate (`lenbench.benchmark.speed_gate`) as ``PYTHON ab_worker.py TREE SUITE`` with the
interpreter of that checkout's environment. The script is the gate's own file (so both sides speak
the gate's protocol) but imports ``lenbench`` from TREE, so what it times is that checkout's code:
its `lenbench.benchmark.cases` (the same cases as `bench/test_kernels.py`), kernels and torch.

Protocol: one JSON object per line on stdin, one answer per line on stdout (every other output goes
to stderr). The first line out is ``{"cases": [[encoding, impl, T, dtype], …], "lenbench": path,
"torch": version}`` or ``{"fatal": reason}``. Requests:

    {"op": "prepare", "case": [...]}   build the case and make its untimed calls (compilation,
                                       warm-up): {"once": seconds of a warm call} | {"skip": reason}
                                       | {"error": one line}
    {"op": "time", "calls": n}         n calls of the prepared case, each timed alone by the CPU time
                                       of this thread: {"seconds": the fastest}
    {"op": "release"}                  drop the prepared case and hand its memory back: {}
    {"op": "quit"}

One case is alive at a time, so the memory is one case's (a T = 4096 mask is 512 MiB).
"""

from __future__ import annotations

import json
import os
import sys
import time

#: Intra-op threads of a worker: one, as cells train (`lenbench.run.cell.default_threads`), so every
#: operation runs on the calling thread and its CPU time (`time.thread_time`) is the kernel's: time
#: the machine spends on other jobs is not counted. With several threads the slowest one delays
#: every call (measured on a loaded 2-core machine, wall time: unchanged-code intervals of
#: head ÷ base up to [0.83, 1.04] with two threads, within [0.95, 1.02] with one).
THREADS = 1


def _answer(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(tree: str, suite: str) -> int:
    sys.path[0] = tree  # the checkout, not this file's directory, is where `lenbench` comes from
    if not os.path.isfile(os.path.join(tree, "lenbench", "benchmark", "cases.py")):
        # checked as a file: an editable install elsewhere would otherwise supply the submodule
        _answer({"fatal": f"{tree}: no lenbench.benchmark.cases to time; a lenbench older than the A/B speed gate "
                          "cannot be timed by it"})
        return 3
    try:
        import torch

        from lenbench.benchmark import cases as C
        from lenbench.benchmark import plans as P
        from lenbench.device import keep_freed_memory
    except ImportError as err:
        _answer({"fatal": f"{tree}: no lenbench.benchmark.cases to time ({err}); a lenbench older than the A/B "
                          "speed gate cannot be timed by it"})
        return 3
    device = torch.device("cpu")
    keep_freed_memory()  # as the kernel benchmarks: large freed blocks stay in the heap, calls do not page-fault
    torch.set_num_threads(THREADS)
    spec = P.kernel_settings(suite)
    _answer({"cases": [list(c) for c in C.kernel_cases(spec)], "lenbench": C.__file__,
             "torch": torch.__version__})
    fn = None
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "quit":
            break
        if op == "prepare":
            fn = None
            try:
                with torch.no_grad():
                    _, _, built = C.ready(tuple(req["case"]), device, spec)
                    call = built.fn

                    def fn(call=call):
                        with torch.no_grad():
                            return call()

                    fn()  # compiles here
                    fn()
                    start = time.thread_time()
                    fn()
                    once = time.thread_time() - start
                _answer({"once": once})
            except C.CaseSkipped as why:
                _answer({"skip": str(why)})
            except Exception as err:  # noqa: BLE001 - one case's failure is recorded for that case
                fn = None
                _answer({"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"})
        elif op == "time":
            times = []
            for _ in range(int(req["calls"])):
                start = time.thread_time()
                fn()
                times.append(time.thread_time() - start)
            _answer({"seconds": min(times)})
        elif op == "release":
            fn = None
            P.release_freed_memory()
            _answer({})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
