"""`bench gpu`'s trainer stage: the trainer's own steps on one model, in each precision asked for.

    python -m bench gpu-trainer [--precisions bf16,fp16] [--steps 200] [--warmup 20] [--sync-steps 10]
                                -- TRAIN_OPTIONS

One process per model: the run `train_multitask.py TRAIN_OPTIONS` builds, its data prepared once, then per
precision `tasks.training.fit` runs `--steps` optimizer steps and its final dev evaluation, no run folder.
A callback splits the steps into three windows: the first `--warmup` (start-up, timed apart); the timed ones
(steps/s, examples/s); the last `--sync-steps`, whose host syncs are counted apart, as counting costs time:
CUDA's sync debug mode's warnings from the Python thread ("syncs_per_step") and torch.profiler's blocking
CUDA runtime calls from every thread ("sync_calls_per_step"); on a CPU, the host's reads of tensor values.
Peak memory is over the whole fit. One row per precision as soon as measured (bench/gpu_report.py).
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import dataclasses
import math
import time
import warnings

from bench.common import arguments, parse, report_result, trainer_run
from bench.gpu_report import Failed, Skipped, TrainerSteps
from tasks.training import Callback

HOST_READS = ("item", "__bool__", "__float__", "__int__", "tolist")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def parse_args(argv=None):
    p = arguments("gpu-trainer", __doc__, "train-options")
    p.add_argument("--precisions", default="bf16,fp16", help="comma-separated")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps per precision")
    p.add_argument("--warmup", type=int, default=20, help="first steps, not timed")
    p.add_argument("--sync-steps", type=int, default=10, help="last steps, their host syncs counted")
    p.add_argument("--setting", default="default", help="the rows' name for the train options")
    args = parse(p, argv)
    if args.warmup < 1 or args.sync_steps < 1 or args.steps - args.warmup - args.sync_steps < 1:
        p.error("--steps must leave at least one timed step after --warmup and before --sync-steps (each >= 1)")
    return args


def note(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


class SyncCounter:
    """Counts host syncs while on: CUDA's sync debug mode's warnings and, as a second opinion, the profiler's
    synchronising runtime calls (`calls`: None without CUPTI); on a CPU the host reads of tensors."""

    def __init__(self, cuda: bool):
        import torch
        self.torch, self.cuda, self.count, self.calls = torch, cuda, 0, None
        self._stops = []

    def start(self) -> None:
        for begin in ((self._profile, self._debug_mode) if self.cuda else (self._host_reads,)):
            self._stops.append(begin())

    def stop(self) -> None:
        while self._stops:
            self._stops.pop()()

    def _debug_mode(self):
        caught = warnings.catch_warnings(record=True)
        log = caught.__enter__()
        warnings.simplefilter("always")
        self.torch.cuda.set_sync_debug_mode("warn")

        def stop():
            self.torch.cuda.set_sync_debug_mode("default")
            self.count += sum("synchroniz" in str(w.message) for w in log)
            caught.__exit__(None, None, None)
        return stop

    def _host_reads(self):
        saved = {name: getattr(self.torch.Tensor, name) for name in HOST_READS}
        for name, real in saved.items():
            setattr(self.torch.Tensor, name, self._counting(real))

        def stop():
            for name, real in saved.items():
                setattr(self.torch.Tensor, name, real)
        return stop

    def _counting(self, real):
        def read(tensor, *args, **kwargs):
            self.count += 1
            return real(tensor, *args, **kwargs)
        return read

    def _profile(self):
        try:  # the CUDA runtime's calls only, no CPU operator events
            profiler = self.torch.profiler.profile(activities=[self.torch.profiler.ProfilerActivity.CUDA])
            profiler.__enter__()
        except Exception as e:  # noqa: BLE001 (any failure of the profiler only loses its figure)
            print(f"bench.gpu_trainer: no profiler count ({note(e)})", flush=True)
            return lambda: None

        def stop():
            try:
                profiler.__exit__(None, None, None)
                names = [event.name for event in profiler.events()]
            except Exception as e:  # noqa: BLE001
                print(f"bench.gpu_trainer: no profiler count ({note(e)})", flush=True)
                return
            if any("LaunchKernel" in name for name in names):  # else the runtime's calls were not recorded
                self.calls = sum(name in SYNC_CALLS for name in names)
        return stop


class Meter(Callback):
    """Times the run's windows of steps (see the module's docstring) and reads its peak memory."""

    def __init__(self, torch, device, warmup: int, sync_steps: int):
        self.torch, self.device, self.warmup, self.sync_steps = torch, device, warmup, sync_steps
        self.cuda = device.type == "cuda"
        self.syncs = SyncCounter(self.cuda)
        self.figures, self.examples = {"peak_mib": None}, 0

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def on_begin(self, run, resumed):
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats(self.device)
        self.begun = self.sync()

    def on_step(self, run, info):
        step, timed_end = run.state.global_step, run.total_steps - self.sync_steps
        if step == self.warmup:
            self.started = self.sync()
            self.figures["warmup_s"] = self.started - self.begun
        elif self.warmup < step <= timed_end:
            self.examples += info.examples
        if step == timed_end:
            self.end_timed(timed_end - self.warmup)
        elif step == run.total_steps:
            self.close()

    def end_timed(self, steps: int) -> None:
        seconds = self.sync() - self.started
        self.figures.update(timed_steps=steps, steps_per_s=steps / seconds, examples_per_s=self.examples / seconds)
        self.syncs.start()

    def close(self) -> None:
        self.syncs.stop()
        self.figures.update(syncs_per_step=self.syncs.count / self.sync_steps, sync_calls_per_step=None
                            if self.syncs.calls is None else self.syncs.calls / self.sync_steps)

    def on_close(self, run):
        self.syncs.stop()  # a run that failed inside the counted window

    def on_finish(self, run, result):
        if self.cuda:
            self.figures["peak_mib"] = self.torch.cuda.max_memory_allocated(self.device) / 2**20
        self.figures.update(steps=result["steps"], nonfinite_skipped=run.state.nonfinite_skipped,
                            scaler_skipped=run.state.scaler_skipped if run.scaler.is_enabled() else None,
                            dev={k: v for k, v in result["final"].items() if v is None or math.isfinite(v)})


def measure_one(config, inputs, precision: str, meter, where: dict) -> TrainerSteps:
    from tasks.training import InMemory, fit
    inputs.precision = inputs.precision_requested = precision
    started = time.perf_counter()
    fit(dataclasses.replace(config, precision=precision), inputs, InMemory(final_weights=True), callbacks=[meter])
    return TrainerSteps(**where, **meter.figures, wall_s=time.perf_counter() - started,
                        implementation=inputs.encoder.config.implementation, tf32=inputs.tf32)


def main(argv=None) -> int:
    import torch

    import minbert
    args, started = parse_args(argv), time.perf_counter()
    config, inputs, _ = trainer_run([*args.train_options, "--max-steps", str(args.steps)], build=False)
    prepared_s = time.perf_counter() - started
    for precision in (p for p in args.precisions.split(",") if p):
        where = dict(model=config.model, setting=args.setting, precision=precision)
        meter = Meter(torch, inputs.device, args.warmup, args.sync_steps)
        meter.figures["prepare_s"] = prepared_s
        if not minbert.native(precision, inputs.device):
            row = Skipped(**where, why=f"{precision} is not native on {inputs.device}")
        else:
            try:
                row = measure_one(config, inputs, precision, meter, where)
            except Exception as e:  # noqa: BLE001 (one precision's failure is a row too; the next one still runs)
                row = Failed(**where, error=note(e))
        report_result(row.to_json())  # at once: a worker cut at its time cap keeps what it measured
        if inputs.device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.gpu_trainer")
