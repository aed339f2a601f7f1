"""Masked-language-model pretraining of a BERT, continued (--from) or from scratch (--init-config).

    python pretrain.py --from minilm --tasks sst,quora,sts --tokens 5M --out runs/tapt
    python pretrain.py --init-config mini --corpus books.txt wiki.txt --tokens 100M --save-at 10M 30M
    python pretrain.py --resume runs/tapt
    torchrun --nproc_per_node 2 pretrain.py ...   (DistributedDataParallel)

The run folder receives config.json (with the corpus files' SHA-256), TensorBoard events, checkpoint.pt,
metrics.json and, once finished, model/: a Hugging Face BertForMaskedLM folder that transformers' fill-mask
and every command's --model load (train_multitask.py --model RUN/model). docs/pretraining.md says more.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import sys

from tasks.pretraining import pretrain_command


def main(argv=None) -> int:
    """The command (tasks/pretraining/command.py); its exit status."""
    return pretrain_command(argv)


if __name__ == "__main__":
    sys.exit(main())
