"""Option syntax shared by the sweep's options and the studies': argparse `type=` converters.

A malformed value is rejected before anything is loaded. Whether a layer or head
exists depends on the model and is checked when the sweep is planned.
"""
import argparse

from minbert import UserError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose bad flag is bad input like any other: one line, exit status 2 (argparse would
    print usage)."""

    def error(self, message):
        raise UserError(message)


def items(text: str) -> list:
    """The comma-separated items, blanks dropped and each kept once, in order."""
    out = [t.strip() for t in text.split(",") if t.strip()]
    if not out:
        raise argparse.ArgumentTypeError("empty list")
    return list(dict.fromkeys(out))


def integer(text: str, minimum: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} must be >= {minimum}")
    return value


def positive(text: str) -> int:
    return integer(text, minimum=1)


def positive_or_all(text: str):
    """A count >= 1, or 'all' (None): no limit."""
    return None if text.strip() == "all" else positive(text)


def positive_or_auto(text: str):
    """A count >= 1, or 'auto' (None): the caller's default."""
    return None if text.strip() == "auto" else positive(text)


def int_list(text: str) -> list:
    return list(dict.fromkeys(integer(t) for t in items(text)))


def number(text: str, valid=lambda value: True, requirement: str = "") -> float:
    """A float that passes `valid`; `requirement` says what a rejected value should have been."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not valid(value):
        raise argparse.ArgumentTypeError(f"{text} {requirement}")
    return value


def number_list(text: str, valid=lambda value: True, requirement: str = "") -> list:
    """Comma-separated `number`s, each once: "0.1,0.10" is one value, not two runs of each trial."""
    return list(dict.fromkeys(number(t, valid, requirement) for t in items(text)))


def non_negative(text: str) -> float:
    return number(text, lambda value: value >= 0 and value != float("inf"), "must be >= 0")


def share(text: str) -> float:
    return number(text, lambda value: 0 < value < 1, "is not in (0, 1)")


def fraction_list(text: str) -> list:
    return number_list(text, lambda value: 0 < value <= 1, "is not in (0, 1]")


def shard(text: str):
    """I/N: shard I (1-based) of N, as (I, N); 1/1 is the whole sweep (None)."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 1 <= I <= N (e.g. 2/4: the second of four "
                                         f"shards)")
    return None if n == 1 else (i, n)
