"""A tiny training run built and started, for tests that drive its steps."""
from tasks import training
from tasks.inputs import prepare
from tasks.training.build import start

# .numpy() is left out: it only works on a tensor already on the host
READS = ("item", "tolist", "cpu", "__float__", "__int__", "__bool__", "__index__")


class NoSignal:
    signal = None


def build(tiny_model, small_data_dir, *extra):
    argv = ["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--device", "cpu", "--max-length", "16",
            "--batch-size", "4", "--tasks", "sst,sts", *extra]
    config = training.parse_train_command(argv).config
    run = training.build_run(config, prepare(config))
    start(run)
    return run
