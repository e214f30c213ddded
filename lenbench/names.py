"""The one rule for names that become file and directory names.

A suite's name is the directory ``runs/<name>``; an encoding's name or label is the file stem of its
position-pattern figure (``encodings/<name>.png``); task, encoding and variant names are the labels
of every results file. They come from suite files and plugins that anyone can write, so each is
checked against `SAFE_NAME` where it enters: a suite's ``name`` and its task, encoding and variant
labels when the suite is loaded (`lenbench.config.parse`), every name a registry is given when it
is registered (`lenbench.registry.Registry.register`: built-ins and plugins alike). A name that
fails is refused there in one line that states `RULE`, so no name can reach a path outside the
directory written (``../../x``), a nested one (``a/b``) or a hidden file (``.x``).

Task labels follow the rule and one more (no ``-``, which separates a cell title's parts:
`lenbench.config.parse.TASK_LABEL`).
"""

from __future__ import annotations

import re

#: Longest name, in characters: far below any file system's limit, with room for a suffix.
MAX_LENGTH = 128
#: A safe name: letters, digits and ``._+@-``, starting with a letter, a digit or ``_``.
SAFE_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._+@-]{{0,{MAX_LENGTH - 1}}}")
#: `SAFE_NAME` in words, as every refusal states it.
RULE = f"letters, digits and . _ + @ -, starting with a letter, a digit or _, at most {MAX_LENGTH} characters"


def is_safe_name(name: object) -> bool:
    """Whether `name` is a string that follows `SAFE_NAME`."""
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None


def safe_name(text: str) -> str:
    """A name that follows the rule, made from `text` (a file's stem, a refused name): each other
    character becomes ``_``, a first character that may not start a name gets a ``_`` before
    it, and the result is cut to `MAX_LENGTH`.

    Example: ``safe_name("my suite")`` is ``"my_suite"``, ``safe_name(".hidden")`` is ``"_.hidden"``.
    """
    name = re.sub(r"[^A-Za-z0-9._+@-]", "_", text)
    name = name if name[:1].isalnum() or name[:1] == "_" else "_" + name
    return name[:MAX_LENGTH]
