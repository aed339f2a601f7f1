"""pretrain.py's command, as a library: parse (or read a run's recorded arguments for --resume), build the model
and the corpus, and hand the masked-language-model job to the training loop (`tasks.training.fit`)."""
from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path

import minbert
from minbert import UserError
from minbert.errors import read_json

from ..cli import interrupted_resumable, run_command
from ..config import TrainConfig, parse_tasks
from ..data import resolve_data_dir
from ..distributed import SINGLE, barrier, broadcast_from_main, init_world, shutdown
from ..inputs import RunInputs, precision_note, warn_of_implementation, where_it_computes
from ..saved.checkpoint_files import CHECKPOINT, no_checkpoint_error
from ..task_file import declare_tasks
from ..training import Console, Interrupted, TensorBoard, fit, recorded_arguments
from .job import MaskedLMJob, steps_for_tokens, training_sampler
from .masking import Masking
from .models import draw_start, lineage, load_start
from .options import check, pretrain_parser
from .outputs import MODEL_DIR, Ladder, PretrainFolder, TokenRate
from .prepared import PreparedCorpus, corpus_changed, prepare_corpus, read_sources
from .tokenised import default_cache_dir

LR_FROM_SCRATCH, LR_CONTINUED = 5e-4, 1e-4


def parse_pretrain_command(argv) -> argparse.Namespace:
    """The arguments `argv` asks for; with --resume, those the run was started with (read from its config.json)."""
    parser = pretrain_parser()
    args = parser.parse_args(argv)
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / CHECKPOINT).exists():
            raise no_checkpoint_error(run_dir / CHECKPOINT)
        args, _ = recorded_arguments(parser, run_dir / "config.json", resume=args.resume, out=str(run_dir))
    elif args.out is not None and (Path(args.out) / "config.json").exists():
        raise UserError(f"--out {args.out} already holds a run: continue it with --resume {args.out} "
                        f"or choose another folder")
    else:
        absolute_paths(args)
    check(args)
    if args.tasks:  # an unknown task is a mistake in the command line, said before any work
        declare_tasks(args.task_file)
        parse_tasks(args.tasks)
    if args.lr is None:
        args.lr = LR_FROM_SCRATCH if args.init_config else LR_CONTINUED
    if args.out is None:
        args.out = str(Path("runs") / time.strftime("pretrain-%Y%m%d-%H%M%S"))
    return args


def absolute_paths(args) -> None:
    """Files and folders as absolute paths, so that --resume from another folder reads the same ones (a model
    or vocabulary named rather than a folder stays a name)."""
    def absolute(path):
        return str(Path(path).expanduser().resolve())
    args.corpus = [absolute(p) for p in args.corpus]
    if args.tasks:  # $MINBERT_DATA_DIR as it is now, recorded
        args.data_dir = str(resolve_data_dir(args.data_dir))
    for name in ("task_file", "data_dir", "cache_dir"):
        if getattr(args, name):
            setattr(args, name, absolute(getattr(args, name)))
    for name in ("from_model", "vocab", "init_config"):
        value = getattr(args, name)
        if value and Path(value).expanduser().exists():
            setattr(args, name, absolute(value))


def pretrain_command(argv=None, callbacks=()) -> int:
    """pretrain.py: parse, pretrain, print the outcome; the exit status (tasks.cli.run_command). `callbacks` take
    part in the run (tasks.training.Callback): a test's probe, a benchmark's timer."""
    return run_command(argv, parse_pretrain_command, lambda args: pretrain(args, callbacks), stops=(Interrupted,),
                       interrupted=lambda args: interrupted_resumable(args.out if args else None, CHECKPOINT))


def pretrain(args: argparse.Namespace, callbacks=()) -> int:
    """Pretrain in every process of the group (one without torchrun)."""
    world = SINGLE
    try:
        world = init_world(args.device)
        args.out = broadcast_from_main(args.out, world)  # a clock-named folder: rank 0's name
        barrier(world)
        device, precision, tf32 = where_it_computes(args.device, args.precision, args.no_tf32, world)
        implementation = minbert.resolve_implementation(args.implementation, device)
        warn_of_implementation(device, implementation, world)
        say = print if world.main else (lambda *a, **k: None)
        sources = read_corpus(args)  # a bad file fails before the model is loaded or drawn
        model, tokenizer_folder, model_record = start_model(args, implementation, device)
        positions = model.config.max_position_embeddings
        if args.max_length > positions:
            raise UserError(f"--max-length {args.max_length}: the model has {positions} positions")
        tokenizer = minbert.Tokenizer.from_folder(tokenizer_folder, max_length=positions)
        cache = None if args.no_cache else Path(args.cache_dir) if args.cache_dir else default_cache_dir()
        corpus = prepare_corpus(sources, tokenizer, args.max_length, args.held_out, args.seed, cache, say)
        config = loop_config(args, corpus)
        inputs = RunInputs(model, tokenizer, {}, corpus.describe(), device, world=world, precision=precision,
                           precision_requested=args.precision, tf32=tf32)
        masking = Masking.for_tokenizer(tokenizer, seed=args.seed, probability=args.mask_rate,
                                        whole_word=args.whole_word)
        record = {"model": model_record, "corpus": corpus.describe(), "masking": masking.describe(),
                  "budget": {"tokens": args.tokens, "max_steps": args.max_steps, "save_at": args.save_at},
                  "lineage": lineage(model.source if args.from_model else None, args.init_config, sources)}
        job = MaskedLMJob(model, corpus, masking, tokenizer.pad_id,
                          outputs=lambda folder, options: folder_callbacks(folder, options, record, args,
                                                                           tokenizer_folder))
        say(f"model: {describe_model(args, model)}; device {device}; {precision_note(inputs)}; "
            f"run folder {args.out}", flush=True)
        result = fit(config, inputs, args.out, resume=bool(args.resume), callbacks=callbacks,
                     command_options=vars(args), job=job)
        say(f"held-out masked-token accuracy {result['final']['masked_accuracy']:.4f}, loss "
            f"{result['final']['masked_loss']:.4f} after {result['steps']} steps; the model is in "
            f"{Path(args.out) / MODEL_DIR}")
        barrier(world)
        return 0
    except Interrupted:
        barrier(world)
        raise
    finally:
        shutdown(world)


def start_model(args, implementation: str, device) -> tuple:
    if args.from_model:
        return load_start(args.from_model, implementation, device)
    return draw_start(args.init_config, args.vocab, implementation, device, args.seed)


def describe_model(args, model) -> str:
    shape = f"{model.config.num_hidden_layers} layers x {model.config.hidden_size}"
    return f"{args.from_model} ({shape})" if args.from_model else f"new {args.init_config} ({shape}, drawn)"


def read_corpus(args) -> list:
    """The sources, checked against a resumed run's record (a resumed run must read the same text)."""
    sources = read_sources(args.corpus, args.tasks, args.data_dir, args.task_file)
    if args.resume:
        recorded = read_json(Path(args.resume) / "config.json", UserError, "run record")
        changed = corpus_changed(recorded.get("corpus", {}).get("sources", []), sources)
        if changed:
            raise UserError(f"--resume {args.resume}: {changed}; a resumed run must read the same corpus")
    return sources


def loop_config(args, corpus: PreparedCorpus) -> TrainConfig:
    """The training loop's options: the flags it shares with fine-tuning, the budget as steps and passes."""
    sampler = training_sampler(corpus, args.batch_size, args.seed, 1)
    per_pass = sampler.steps_per_epoch()
    if args.max_steps is not None:
        total = args.max_steps
    elif args.tokens is not None:
        total = steps_for_tokens(args.tokens, sampler, corpus.train.lengths)
    else:
        total = per_pass
    if args.save_at and args.tokens is None:
        reachable = math.floor(total / per_pass * corpus.train.tokens)
        if max(args.save_at) > reachable:
            raise UserError(f"--save-at {max(args.save_at):,} is beyond the run's budget (about {reachable:,} "
                            f"tokens in {total} steps)")
    shared = ("lr", "warmup", "lr_schedule", "weight_decay", "batch_size", "seed", "optimizer", "max_grad_norm",
              "precision", "device", "implementation", "dropout", "skip_nonfinite", "out", "checkpoint_every",
              "eval_every", "eval_batch_size", "max_length", "data_dir", "task_file", "no_tf32", "log_every")
    return dataclasses.replace(TrainConfig(), **{k: getattr(args, k) for k in shared}, tasks="mlm",
                               model=args.from_model or f"init-config {args.init_config}", predictions_dir="",
                               epochs=math.ceil(total / per_pass), max_steps=total)


def folder_callbacks(folder, options, record, args, tokenizer_folder) -> list:
    """The run folder's callbacks: curves, files, the ladder, the token rate, the console."""
    folder = Path(folder)
    return [TensorBoard(folder / "tensorboard"), PretrainFolder(record, tokenizer_folder, options),
            Ladder(args.save_at, tokenizer_folder, record["lineage"]), TokenRate(), Console()]
