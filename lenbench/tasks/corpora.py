"""The long-range corpus of the `lm` task: whole documents of three kinds of text, built from files
every lenbench installation has, held out by document.

Perplexity past the training length rewards using the longer context only where the text has
structure longer than the training window. Byte-level text with such structure that ships with
lenbench's own dependencies, so nothing is downloaded at run time:

- **code**: whole modules of the Python standard library (definitions used far below them), in
  name order up to `CODE_BYTES`;
- **prose**: the Python reference's topic texts (`pydoc_data.topics`, one document per topic) and
  IDLE's change logs and help (``idlelib/NEWS.txt`` …, `PROSE_FILES`);
- **data**: matplotlib's Adobe font metrics (``mpl-data/fonts/**.afm``): tables of character
  metrics and kerning pairs that name glyphs defined earlier in the file (matplotlib comes with
  seaborn).

Each document goes to the held-out split when the first byte of the sha256 of its name is below
``256 * HELD_OUT`` (a fixed, content-independent choice; at least one per kind). The bytes differ
between Python and matplotlib versions, so `lenbench.tasks.lm.ByteLMTask.fingerprint` records the
corpus's sha256 (every cell id and cache check holds it), like the default corpus's.

This follows the long-context evaluations that score held-out documents of several domains (PG-19
for books, Rae et al. 2020; the code and arXiv subsets of the Pile used by the length-extrapolation
papers, e.g. Press et al. 2022, Chen et al. 2023).
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

#: The kinds of text, in the order evaluation samples cycle through them.
KINDS = ("code", "prose", "data")
#: Bytes of standard-library modules taken (whole files in name order until this is reached).
CODE_BYTES = 2_500_000
#: Prose files of the standard library (relative to its directory), beside `pydoc_data.topics`.
PROSE_FILES = ("LICENSE.txt", "idlelib/NEWS.txt", "idlelib/NEWS2x.txt", "idlelib/HISTORY.txt",
               "idlelib/README.txt", "idlelib/TODO.txt", "idlelib/help.html")
#: Share of documents held out for evaluation (by the hash of their name).
HELD_OUT = 0.1


@dataclass(frozen=True)
class Document:
    """One document of the corpus: its kind (`KINDS`), a name unique in the corpus, and its bytes."""

    kind: str
    name: str
    data: bytes

    @property
    def held_out(self) -> bool:
        return hashlib.sha256(self.name.encode()).digest()[0] < 256 * HELD_OUT


def _code() -> list[Document]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    docs, total = [], 0
    for path in sorted(stdlib.glob("*.py")):
        if total >= CODE_BYTES:
            break
        data = path.read_bytes()
        docs.append(Document("code", f"code/{path.name}", data))
        total += len(data)
    return docs


def _prose() -> list[Document]:
    from pydoc_data.topics import topics

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    docs = [Document("prose", f"prose/topics/{key}", topics[key].encode()) for key in sorted(topics)]
    docs += [Document("prose", f"prose/{name}", (stdlib / name).read_bytes()) for name in PROSE_FILES
             if (stdlib / name).is_file()]
    return docs


def _data() -> list[Document]:
    import matplotlib

    fonts = Path(matplotlib.get_data_path()) / "fonts"
    return [Document("data", f"data/{p.relative_to(fonts).as_posix()}", p.read_bytes())
            for p in sorted(fonts.rglob("*.afm"))]


def long_range_documents() -> list[Document]:
    """Every document of the long-range corpus, kinds in `KINDS` order, each kind in name order.

    Raises:
        ValueError: one line naming a kind without documents, or without a held-out one.
    """
    docs = [*_code(), *_prose(), *_data()]
    for kind in KINDS:
        own = [d for d in docs if d.kind == kind]
        if not own:
            raise ValueError(f"task 'lm': the long-range corpus found no {kind} documents on this installation "
                             "(see lenbench/tasks/corpora.py); pass corpus: stdlib or path= to a text file")
        if not any(d.held_out for d in own):
            raise ValueError(f"task 'lm': the long-range corpus holds out no {kind} document on this installation; "
                             "pass corpus: stdlib or path= to a text file")
    return docs
