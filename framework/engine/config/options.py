"""Option files of the trainers srgrad users come from: which one a parsed file is, and its
translation into an srgrad config. The translators are one file each and know nothing of each other:

    basicsr_options.py       BasicSR / Real-ESRGAN training files (options/train/*.yml)
    basicsr_test_options.py  BasicSR test files (options/test/*.yml)
    redux_options.py         traiNNer-redux training and test files (options/_templates/...)

A file is traiNNer-redux's by redux_options.is_redux_options (its documented rule), else BasicSR's.
"""
from __future__ import annotations

from .basicsr_options import is_test_options, translate_basicsr
from .basicsr_test_options import translate_basicsr_test
from .redux_options import is_redux_options, translate_redux, translate_redux_test

__all__ = ["options_kind", "translate_options", "translate_test_options", "translate_any"]


def options_kind(data) -> str:
    """"traiNNer-redux" or "BasicSR": whose option file parsed YAML is (for messages)."""
    return "traiNNer-redux" if is_redux_options(data) else "BasicSR"


def translate_options(options: dict, source: str = "<options>"):
    """(srgrad config dict, notes) of a training option file, by the translator its kind needs.
    Pure; the config still needs schema.validate. ConfigError lists every key that cannot be
    translated."""
    if is_redux_options(options):
        return translate_redux(options, source)
    return translate_basicsr(options, source)


def translate_test_options(options: dict, source: str = "<options>"):
    """(srgrad test config dict, notes) of a test option file (testconfig.validate_test_config
    checks it)."""
    if is_redux_options(options):
        return translate_redux_test(options, source)
    return translate_basicsr_test(options, source)


def translate_any(options: dict, source: str = "<options>"):
    """(srgrad config dict, notes, "test" | "train"): a test file to a test config, a training file
    to a training config."""
    if is_test_options(options):
        return (*translate_test_options(options, source), "test")
    return (*translate_options(options, source), "train")
