"""`bench.gpu`'s trainer worker: the trainer's own steps on one model, in each precision asked for.

    python -m bench gpu-trainer --model PATH [--precisions bf16,fp16] [--steps 200] [--warmup 20]
                               [--sync-steps 10] [--device cuda] [--data-dir DIR] [-- train options]

One process per model: the model and the three tasks are loaded and tokenised once (`tasks.inputs.prepare`),
then for each precision `tasks.training.fit` runs `--steps` optimizer steps of the default run (batch 32, the
proportional sampler's SST, Quora and STS batches, fused AdamW; `train options` added) and its final dev
evaluation, with no run folder. A callback splits the steps into three windows:

- the first `--warmup` steps: start-up (CUDA's kernels chosen, a --compile's compile), timed apart;
- the timed steps: steps/s and examples/s, `torch.cuda.synchronize()` at both ends;
- the last `--sync-steps` steps: host syncs, counted apart because counting costs time, two ways:
  `torch.cuda.set_sync_debug_mode("warn")` warns at every operation of the Python thread that makes the host
  wait for the GPU (`.item()`, `bool()` of a CUDA tensor, a copy to the CPU, `nonzero`...): "syncs_per_step";
  and torch.profiler's CUDA runtime events that block the host (cudaStreamSynchronize, cudaDeviceSynchronize,
  cudaEventSynchronize), from every thread, autograd's included: "sync_calls_per_step". On a CPU (a dry
  run) the window counts the host reads of tensor values (`item`, `bool`, `float`, `int`, `tolist`).

Peak memory is `torch.cuda.max_memory_allocated` over the whole fit (steps and evaluation). Reports one JSON
line (bench.common.report_result) per precision as soon as it is measured, for bench.gpu.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import math
import time
import warnings

from bench.common import report_result, trainer_run
from bench.gpu_report import Row

HOST_READS = ("item", "__bool__", "__float__", "__int__", "tolist")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench gpu-trainer", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint name or folder")
    p.add_argument("--precisions", default="bf16,fp16", help="comma-separated (default: %(default)s)")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps per precision (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=20, help="first steps, not timed (default: %(default)s)")
    p.add_argument("--sync-steps", type=int, default=10,
                   help="last steps, their host syncs counted (default: %(default)s)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--data-dir", default=None)
    p.add_argument("train_options", nargs=argparse.REMAINDER, help="after --: more train_multitask.py options")
    args = p.parse_args(argv)
    if args.warmup < 1 or args.sync_steps < 1 or args.steps - args.warmup - args.sync_steps < 1:
        p.error("--steps must leave at least one timed step after --warmup and before --sync-steps (each >= 1)")
    args.train_options = [a for a in args.train_options if a != "--"]
    return args


class SyncCounter:
    """Counts host syncs while on: CUDA's sync debug mode's warnings, or on a CPU the host reads of tensors."""

    def __init__(self, cuda: bool):
        import torch
        self.torch, self.cuda, self.count, self.calls = torch, cuda, 0, None
        self._warnings = self._saved = self._profiler = None

    def start(self) -> None:
        if self.cuda:
            self._start_profiler()
            self._warnings = warnings.catch_warnings(record=True)
            self._log = self._warnings.__enter__()
            warnings.simplefilter("always")
            self.torch.cuda.set_sync_debug_mode("warn")
            return
        self._saved = {name: getattr(self.torch.Tensor, name) for name in HOST_READS}
        for name, real in self._saved.items():
            setattr(self.torch.Tensor, name, self._counting(real))

    def _counting(self, real):
        def read(tensor, *args, **kwargs):
            self.count += 1
            return real(tensor, *args, **kwargs)
        return read

    def _start_profiler(self) -> None:
        """The profiler's count is a second opinion: without CUPTI on the machine it is left out (None)."""
        activities = [self.torch.profiler.ProfilerActivity.CUDA]  # its runtime calls; no CPU operator events
        try:
            self._profiler = self.torch.profiler.profile(activities=activities)
            self._profiler.__enter__()
        except Exception as e:  # noqa: BLE001 (any failure of the profiler only loses its figure)
            print(f"bench.gpu_trainer: no profiler count ({type(e).__name__}: {e})", flush=True)
            self._profiler = None

    def _stop_profiler(self) -> None:
        try:
            self._profiler.__exit__(None, None, None)
            names = [event.name for event in self._profiler.events()]
            if any("LaunchKernel" in name for name in names):  # else the runtime's calls were not recorded
                self.calls = sum(name in SYNC_CALLS for name in names)
            else:
                print("bench.gpu_trainer: no profiler count (no CUDA runtime calls recorded)", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"bench.gpu_trainer: no profiler count ({type(e).__name__}: {e})", flush=True)
        self._profiler = None

    def stop(self) -> None:
        if self._profiler is not None:
            self._stop_profiler()
        if self._warnings is not None:
            self.torch.cuda.set_sync_debug_mode("default")
            self.count += sum("synchroniz" in str(w.message) for w in self._log)
            self._warnings.__exit__(None, None, None)
            self._warnings = None
        if self._saved is not None:
            for name, real in self._saved.items():
                setattr(self.torch.Tensor, name, real)
            self._saved = None


def meter_class():
    """The callback, made once tasks.training is imported (after tasks.openmp)."""
    from tasks.training import Callback

    class Meter(Callback):
        """Times the run's windows of steps (see the module's docstring) and reads its peak memory."""

        def __init__(self, torch, device, warmup: int, sync_steps: int):
            self.torch, self.device, self.warmup, self.sync_steps = torch, device, warmup, sync_steps
            self.cuda = device.type == "cuda"
            self.syncs = SyncCounter(self.cuda)
            self.figures, self.examples = {}, 0

        def sync(self):
            if self.cuda:
                self.torch.cuda.synchronize(self.device)
            return time.perf_counter()

        def on_begin(self, run, resumed):
            if self.cuda:
                self.torch.cuda.reset_peak_memory_stats(self.device)
            self.begun = self.sync()

        def on_step(self, run, info):
            step, total = run.state.global_step, run.total_steps
            timed_end = total - self.sync_steps
            if step == self.warmup:
                self.started = self.sync()
                self.figures["warmup_s"] = self.started - self.begun
            elif self.warmup < step <= timed_end:
                self.examples += info.examples
            if step == timed_end:
                seconds = self.sync() - self.started
                steps = timed_end - self.warmup
                self.figures.update(timed_steps=steps, steps_per_s=steps / seconds,
                                    examples_per_s=self.examples / seconds)
                self.syncs.start()
            elif step == total:
                self.syncs.stop()
                self.figures["syncs_per_step"] = self.syncs.count / self.sync_steps
                if self.syncs.calls is not None:
                    self.figures["sync_calls_per_step"] = self.syncs.calls / self.sync_steps

        def on_close(self, run):
            self.syncs.stop()  # a run that failed inside the counted window

        def on_finish(self, run, result):
            if self.cuda:
                self.figures["peak_mib"] = self.torch.cuda.max_memory_allocated(self.device) / 2**20

    return Meter


def measure(args) -> list:
    import torch

    import minbert
    from tasks.training import InMemory, fit

    started = time.perf_counter()
    config, inputs, _ = trainer_run(["--model", args.model, "--device", args.device, "--max-steps", str(args.steps),
                                     *args.train_options], args.data_dir, build=False)
    prepared_s = time.perf_counter() - started
    Meter = meter_class()
    rows = []
    for precision in (p for p in args.precisions.split(",") if p):
        where = dict(model=args.model, precision=precision, setting=" ".join(args.train_options) or "default")
        if not minbert.native(precision, inputs.device):
            rows.append(Row.skipped(f"{precision} is not native on {inputs.device}", **where))
            report_result({"rows": [rows[-1].to_json()]})
            continue
        inputs.precision = inputs.precision_requested = precision
        meter = Meter(torch, inputs.device, args.warmup, args.sync_steps)
        started = time.perf_counter()
        try:
            result = fit(dataclasses.replace(config, precision=precision), inputs, InMemory(final_weights=True),
                         callbacks=[meter])
        except Exception as e:  # noqa: BLE001 (one precision's failure is a figure too; the next one still runs)
            row = Row.failed(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", **where,
                             figures=meter.figures)
        else:
            row = Row.measured(**where, figures=dict(
                meter.figures, prepare_s=prepared_s, wall_s=time.perf_counter() - started, steps=result["steps"],
                scaler_skipped=result.get("scaler_skipped"), nonfinite_skipped=result["nonfinite_skipped"],
                dev={k: v for k, v in result["final"].items() if v is None or math.isfinite(v)},
                implementation=inputs.encoder.config.implementation, tf32=inputs.tf32))
            del result
        report_result({"rows": [row.to_json()]})  # at once: a worker cut at its time cap keeps what it measured
        rows.append(row)
        if inputs.device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    measure(parse_args(argv))
    return 0
