"""What a ``.cu`` kernel file includes from beside it, made part of its source (docs/kernel-files.md#kernel-files).

NVRTC compiles a kernel from its text alone, with no folder of its own to search, and the compile cache keys a cubin
by that text. So each ``#include "name"`` that names a file found relative to the including file's folder is
replaced by that file's text, between ``#line`` directives that keep the compiler's messages naming the right file and
line; each file at most once (as ``#pragma once`` or an include guard would have it: a header meant to be included
twice, such as an X-macro list, is not). A header that changes then
changes the source, and the cache compiles again. ``#include <...>`` (CUDA's and the C++ library's headers, searched
by NVRTC itself) and a name found nowhere are left as written, so that NVRTC names the one it cannot open.

Pure: files read, nothing compiled.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import KernelFileError
from .source import decode_cu, read_kernel_bytes

__all__ = ["MAX_INCLUDED", "with_local_includes"]

#: how many files one kernel file may include from beside it (with what they include)
MAX_INCLUDED = 256
_QUOTED = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[^\n]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once\b[^\n]*$", re.MULTILINE)


def with_local_includes(path: Path, text: str, shown: str) -> str:
    """``text`` (the file at ``path``, shown as ``shown``) with its local includes written in, recursively."""
    seen: set[Path] = set()
    return _expand(path.parent, text, shown, seen)


def _expand(folder: Path, text: str, shown: str, seen: set[Path]) -> str:
    pieces, at = [], 0
    for match in _QUOTED.finditer(text):
        found = (folder / match.group(1)).resolve()
        if not found.is_file():
            continue  # NVRTC says it cannot open it
        pieces.append(text[at : match.start()])
        at = match.end()
        if found in seen:
            continue  # written in once already: the directive's line left empty
        if len(seen) >= MAX_INCLUDED:
            raise KernelFileError(shown, f"includes more than {MAX_INCLUDED} files from beside it, with theirs")
        seen.add(found)
        name = f"{Path(shown).parent / match.group(1)}"
        included = _PRAGMA_ONCE.sub("", decode_cu(name, read_kernel_bytes(found, name), strict=False))
        after = text.count("\n", 0, match.start()) + 2  # the number of the directive's next line
        pieces.append(f'#line 1 "{name}"\n{_expand(found.parent, included, name, seen)}\n#line {after} "{shown}"')
    pieces.append(text[at:])
    return "".join(pieces)
