"""Where the commands write, decided and checked before any work: never over an input (files,
folders, symlinks and case-insensitive file systems: the same file is the same inode), never over
any existing file without --overwrite, an output extension that can be written, a folder that can be
written to. `plan_outputs` for srgrad-infer's images, `check_output` for a command's one file
(srgrad-eval's CSV, srgrad-export's model, srgrad-convert's file).

One rule for every output path of every command: `refuse_input` compares it with the inputs as
spelled (normalised lexically) AND where the write lands (`landing`: resolved through the part
that exists), so `nosuch/../x.png` is x.png before `nosuch` exists; an existing output is found
the same way (`exists`)."""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from ..._check import name_problem
from ...io.image import WRITE_EXTENSIONS, has_alpha

__all__ = ["OutputError", "plan_outputs", "output_name", "check_output", "landing", "exists",
           "Inputs", "is_input", "refuse_input", "name_arg"]


class OutputError(ValueError):
    """An output that must not or cannot be written: the message names it and what to do."""


def output_name(src: Path, suffix: str, ext: str, scale: int) -> str:
    """`<stem><suffix>.<ext>` (suffix may hold {scale}; ext "auto" keeps the input's). A suffix that
    starts with a letter or digit is joined with "_", as Real-ESRGAN's --suffix: "out" gives
    0014_out.png; "_x{scale}" and "-sr" are kept as they are; "" keeps the name."""
    suffix = suffix.format(scale=scale)
    if suffix[:1].isalnum():
        suffix = "_" + suffix
    extension = src.suffix if ext == "auto" else "." + ext
    return f"{src.stem}{suffix}{extension}"


def name_arg(text: str) -> str:
    """argparse's type of an option whose value srgrad makes a file or folder of (-n NAME): one
    path component (framework._check.name_problem)."""
    import argparse
    problem = name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def landing(path) -> Path:
    """Where a write to `path` lands, known before anything is made: the deepest part that exists
    resolved by os.path.realpath (links, then `..`, as the kernel follows them), the rest
    normalised (the folders still to be made will be real ones: `nosuch/..` is where `nosuch`
    is); the last name is kept as it is (an atomic write replaces a link there, not its target)."""
    full = os.path.join(os.getcwd(), os.fspath(path))
    head, name = os.path.split(full)
    if name in ("", ".", ".."):  # a folder's spelling
        head, name = full, ""
    rest = []
    while not os.path.exists(head) and head != os.path.dirname(head):
        head, part = os.path.split(head)
        rest.append(part)
    return Path(os.path.normpath(os.path.join(os.path.realpath(head), *reversed(rest), name)))


def exists(path) -> bool:
    """Whether something (a file, folder or link) is where a write to `path` lands, or at `path`
    as spelled."""
    return any(os.path.lexists(p) for p in (landing(path), path))


def _lexical(path) -> str:
    return os.path.normpath(os.path.join(os.getcwd(), os.fspath(path)))


class Inputs:
    """What a command reads, (what, path) pairs (a None path is skipped), indexed once by name
    (normalised as spelled, and resolved) and by file identity (device, inode)."""

    def __init__(self, pairs):
        self.names, self.ids = {}, {}
        for what, src in pairs:
            if src is None:
                continue
            for name in (_lexical(src), os.path.realpath(src)):
                self.names.setdefault(os.path.normcase(name), (what, src))
            try:
                st = os.stat(src)
            except OSError:
                continue
            self.ids.setdefault((st.st_dev, st.st_ino), (what, src))

    def find(self, path):
        """The (what, input) that writing `path` could replace, or None: the same name, as spelled
        (normalised) or where the write lands, or the same file through any link (identity, so
        case-insensitive file systems too)."""
        spellings = (_lexical(path), os.fspath(landing(path)))
        for name in spellings:
            if os.path.normcase(name) in self.names:
                return self.names[os.path.normcase(name)]
        for name in (os.fspath(path), *spellings):
            try:
                st = os.stat(name)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in self.ids:
                return self.ids[(st.st_dev, st.st_ino)]
        return None


def is_input(path, src) -> bool:
    """Whether writing `path` could replace `src` (a file or folder): the rule of refuse_input."""
    return Inputs([("", src)]).find(path) is not None


def refuse_input(path, inputs, flag: str = "", advice: str = "choose another name") -> None:
    """OutputError when writing `path` could replace one of `inputs` (an Inputs, or (what, input
    path) pairs), by Inputs.find's rule. flag: the option that named the output, and advice, for
    the message."""
    clash = (inputs if isinstance(inputs, Inputs) else Inputs(inputs)).find(path)
    if clash is not None:
        raise OutputError(f"refusing to write {flag + ' ' if flag else ''}{path}: it is the "
                          f"{clash[0]} {clash[1]} (the same file); {advice}")


def _check_folder(folder: Path, what: str) -> None:
    """The folder exists or can be made, and a file can be created in it (tried, not guessed:
    os.access says yes to root on a read-only mount)."""
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{what} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".srgrad-write-test-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"{what} {folder} is not writable: {exc.strerror or exc}") from None


def check_output(path, flag: str, inputs, overwrite: bool) -> Path:
    """`path` checked as the one output file of a command, before any work, else OutputError.

    inputs: (what, path) pairs the command reads, e.g. ("--weights file", w), ("input image", f)
    (a None path is skipped): the output may be none of them (the same file, through any link),
    with or without `overwrite`. An existing file is replaced only with `overwrite`; a folder
    never; the output's folder must be writable. flag: the option that named it, for messages."""
    path = Path(path)
    refuse_input(path, inputs, flag)
    if path.is_dir() or landing(path).is_dir():
        raise OutputError(f"{flag} {path} is a folder; give a file name")
    if exists(path) and not overwrite:
        raise OutputError(f"{flag} {path} exists; pass --overwrite to replace it")
    _check_folder(path.parent if str(path.parent) else Path("."), f"the folder of {flag}")
    return path


def plan_outputs(inputs: list, output, folder_mode: bool, suffix: str, ext: str, overwrite: bool,
                 scale: int, say=None):
    """([(input, output)], [skipped (input, existing output)]) for srgrad-infer, or OutputError.

    Folder mode (`--input DIR`): each output is `output/<stem><suffix>.<ext>`; an existing output is
    skipped (a re-run continues a folder) unless `overwrite`. File mode: `output` is the file (or a
    folder to put `<stem><suffix>.<ext>` in); an existing one is an error unless `overwrite`. Either
    way an output that IS one of the inputs is refused, with or without --overwrite. In file mode
    an output without an extension that does not exist is a folder to make. A name made
    here (not given as --output FILE) for an image with alpha in a format that cannot store it
    (JPEG) becomes .png, said through `say` (default: stderr), as Real-ESRGAN writes RGBA as PNG."""
    say = say or (lambda msg: print(msg, file=sys.stderr))
    output = Path(output)
    problem = name_problem(suffix, part=True)
    try:
        problem = problem or name_problem(output_name(Path("x.png"), suffix, ext, scale), True)
    except (KeyError, IndexError, ValueError) as exc:  # str.format's: {x}, {0}, "{"
        problem = f"{suffix!r} is not a name with {{scale}} in it ({type(exc).__name__}: {exc})"
    if problem:
        raise OutputError(f"--suffix: {problem}")
    if ext != "auto" and "." + ext not in WRITE_EXTENSIONS:
        raise OutputError(f"--ext {ext}: cannot write that format (choose from auto, "
                          f"{', '.join(e[1:] for e in WRITE_EXTENSIONS)})")
    pairs = []
    # the output names are made here, not given: a folder, or a path without an extension (a
    # folder to make, as Real-ESRGAN's -o)
    named = folder_mode or output.is_dir() or (not output.suffix and not output.exists())
    if named:
        for src in inputs:
            pairs.append((src, output / output_name(src, suffix, ext, scale)))
    else:
        if output.suffix.lower() not in WRITE_EXTENSIONS:
            raise OutputError(f"--output {output}: extension {output.suffix or '(none)'!r} is not "
                              f"one srgrad writes ({', '.join(WRITE_EXTENSIONS)})")
        pairs.append((inputs[0], output))
    todo, skipped, seen = [], [], {}
    read = Inputs(("input", i) for i in inputs)
    for src, dst in pairs:
        if dst.suffix.lower() in (".jpg", ".jpeg") and has_alpha(src):
            if not named:
                raise OutputError(f"{src} has an alpha channel, which JPEG cannot store ({dst}); "
                                  f"pass --ext png or --ext webp")
            say(f"note: {src} has an alpha channel, which JPEG cannot store: writing "
                f"{dst.with_suffix('.png')}")
            dst = dst.with_suffix(".png")
        if dst.suffix.lower() not in WRITE_EXTENSIONS:
            raise OutputError(f"{src}: its output {dst} has extension {dst.suffix!r}, which srgrad "
                              f"cannot write; pass --ext png (or jpg, webp, tif)")
        refuse_input(dst, read, advice="choose another --output or --suffix")
        key = os.path.normcase(landing(dst)).casefold()
        if key in seen:
            raise OutputError(f"{src} and {seen[key]} would both be written to {dst}; pass --suffix "
                              f"or --ext to tell them apart")
        seen[key] = src
        if exists(dst) and not overwrite:
            if not folder_mode:
                raise OutputError(f"--output {dst} exists; pass --overwrite to replace it")
            skipped.append((src, dst))
            continue
        todo.append((src, dst))
    # made only once nothing is refused (a folder is made as spelled: the writes use that name)
    if named:
        _check_folder(output, "--output")
    else:
        _check_folder(output.parent if str(output.parent) else Path("."), "the folder of --output")
    return todo, skipped
