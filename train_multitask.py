"""Fine-tune one shared minBERT encoder on SST, Quora and STS at once.

    python train_multitask.py --data-dir ../shared/data/cs224n
    python train_multitask.py --freeze-until 9 --surgery pcgrad --smart
    python train_multitask.py --resume runs/NAME
    torchrun --nproc_per_node 2 train_multitask.py ...   (DistributedDataParallel)

A run folder receives config.json, TensorBoard events (tensorboard/),
checkpoint.pt (latest) and best.pt (best overall dev score), metrics.json,
the course's prediction files (predictions/) and, once finished, model/: the
best model in Hugging Face format with its task heads (predict.py uses a run).
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import sys

from tasks.training import train_command, train_parser


def main(argv=None) -> int:
    """The command (tasks/training/command.py); its exit status."""
    return train_command(argv, parser=train_parser(__doc__))


if __name__ == "__main__":
    sys.exit(main())
