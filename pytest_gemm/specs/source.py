"""Reading a kernel file's bytes and text: regular files only, a bounded number of bytes, any line ends.

Every reader of a kernel file (collection, the hints, the GPU worker) goes through :func:`read_kernel_bytes`,
so a FIFO never blocks a run and a link to ``/dev/zero`` never fills its memory; a regular file too large to read
whole is only searched, a piece at a time (:func:`holds`), for what would make it a kernel file.
:func:`decode_cu` and :func:`decode_py` give the text that is parsed, compiled by NVRTC and read again by
the worker: byte order marks decoded, every line end (``\\r\\n``, ``\\r``) made ``\\n``.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
import tokenize
from pathlib import Path

from ..fileio import RefusedFile, not_regular, os_reason, read_regular
from .errors import KernelFileError

__all__ = [
    "HEADER",
    "HEADER_START",
    "HEADER_WORD",
    "MAX_KERNEL_FILE_BYTES",
    "decode_cu",
    "decode_py",
    "file_problem",
    "has_header",
    "holds",
    "is_oversize",
    "read_kernel_bytes",
    "unix_line_ends",
]

#: The word that opens a ``.cu`` file's header comment (text that can hold no header lacks it).
HEADER_WORD = "pytest-gemm"
#: Where a ``.cu`` file's pytest-gemm header begins: ``/* pytest-gemm`` and the end of its line.
HEADER_START = re.compile(rf"/\*\s*{HEADER_WORD}[ \t]*\r?\n")
#: A ``.cu`` file's pytest-gemm header: a ``/* pytest-gemm`` block comment (in text whose line ends are ``\n``).
HEADER = re.compile(HEADER_START.pattern + r"(.*?)\*/", re.DOTALL)

#: The largest kernel file read. The bundled kernels are at most 28 KB; a generated kernel of a few MB fits
#: many times over, while a log, a core dump or a device named like a kernel file is refused before it is read.
MAX_KERNEL_FILE_BYTES = 16_000_000

# UTF-32's marks first: UTF-32-LE's begins with UTF-16-LE's
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
)


def file_problem(path: Path) -> str | None:
    """Why ``path`` (its symlinks followed) cannot be read as a kernel file, in the words reading it says
    (:func:`read_kernel_bytes`), without reading its bytes (a file too large is refused on its size once open);
    None if it can.

    A missing file (a dangling symlink, say) is no problem here: reading it says so.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    kind = not_regular(st.st_mode, path)
    if kind is not None or st.st_size <= MAX_KERNEL_FILE_BYTES:
        return kind
    try:
        read_kernel_bytes(path, str(path))
    except KernelFileError as exc:
        return exc.message
    return None  # it shrank meanwhile, and was read


def is_oversize(path: Path) -> bool:
    """Whether ``path`` (its symlinks followed) is a regular file larger than a kernel file may be."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > MAX_KERNEL_FILE_BYTES


#: how much of a file :func:`holds` reads at a time, and how much of each piece it looks at again with the next
_CHUNK = 1 << 20
_OVERLAP = 4096


def holds(path: Path, pattern: re.Pattern[str], needle: str) -> bool:
    """Whether a regular file, too large to read whole, holds text that ``pattern`` matches, each of whose matches
    holds ``needle`` (a piece without it is not searched: the regex is slow on MBs of anything): read a MB at a time,
    as far as its size when opened (a file that grows is not followed), decoded as :func:`decode_cu` decodes (UTF-8,
    or UTF-16/32 by its byte order mark; bytes that do not decode are replaced). False when it cannot be read or
    is not a regular file; a match longer than 4096 characters across two pieces is not seen."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        left, decoder, tail = st.st_size, None, ""
        while left > 0:
            data = os.read(fd, min(_CHUNK, left))
            if not data:
                return False
            if decoder is None:
                codec = (_bom(data) or ("utf-8", ""))[0]
                decoder = codecs.getincrementaldecoder(codec)(errors="replace")
            left -= len(data)
            text = tail + decoder.decode(data, final=left <= 0)
            if needle in text and pattern.search(text) is not None:
                return True
            tail = text[-_OVERLAP:]
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


def read_kernel_bytes(path: Path, shown: str) -> bytes:
    """The file's bytes; :class:`KernelFileError` naming ``shown`` for a file that is not regular, too large or
    unreadable (read by :func:`~pytest_gemm.fileio.read_regular`, so nothing swapped in between is read)."""
    try:
        return read_regular(path, MAX_KERNEL_FILE_BYTES, "a kernel file")
    except RefusedFile as exc:
        raise KernelFileError(shown, str(exc)) from None
    except OSError as exc:
        raise KernelFileError(shown, f"cannot read the file: {os_reason(exc, path)}") from None


def has_header(text: str) -> bool:
    """Whether a ``.cu`` file's text (as :func:`decode_cu` gives it) declares a kernel."""
    return HEADER.search(text) is not None


def unix_line_ends(text: str) -> str:
    """``text`` with every line end (``\\r\\n``, ``\\r``) made ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _where(data: bytes, pos: int) -> tuple[int, int]:
    """Line and column (from 1) of byte ``pos``, counting ``\\r\\n``, ``\\r`` and ``\\n`` as line ends."""
    before = data[:pos].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return before.count(b"\n") + 1, len(before) - (before.rfind(b"\n") + 1) + 1


def _bom(data: bytes) -> tuple[str, str] | None:
    return next(((codec, name) for bom, codec, name in _BOMS if data.startswith(bom)), None)


def decode_cu(path: str | Path, data: bytes, *, strict: bool = True) -> str:
    """A ``.cu`` file's text: UTF-8, or UTF-16/32 with a byte order mark; line ends made ``\\n``.

    ``strict``: a file whose bytes do not decode raises :class:`KernelFileError` if it has a header (a file
    without one is a helper, whose bytes are the compiler's business); otherwise they are replaced.
    """
    codec, name = _bom(data) or ("utf-8", "UTF-8")
    try:
        return unix_line_ends(data.decode(codec))
    except UnicodeDecodeError as exc:
        text = unix_line_ends(data.decode(codec, errors="replace"))
        if not strict or not has_header(text):
            return text
        if codec.startswith("utf-8"):
            line, column = _where(data, exc.start)
            message = f"byte 0x{data[exc.start]:02x} at column {column} is not UTF-8; a kernel file must be UTF-8"
            raise KernelFileError(path, message, line=line) from None
        raise KernelFileError(path, f"starts with a {name} byte order mark but is not valid {name}: {exc}") from None


def decode_py(path: str | Path, data: bytes) -> str:
    """A Python kernel file's text, as Python itself would read it (UTF-8, or its ``coding:`` line); a file
    Python cannot import (UTF-16, say) raises :class:`KernelFileError` saying so."""
    found = _bom(data)
    if found is not None and found[1] != "UTF-8":
        raise KernelFileError(
            path,
            f"is saved as {found[1]} (it starts with a {found[1]} byte order mark); Python reads source "
            "files as UTF-8 only, so it cannot be imported: save it as UTF-8",
        )
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return unix_line_ends(data.decode(encoding))
    except (SyntaxError, LookupError) as exc:
        raise KernelFileError(path, f"cannot be read as Python source: {exc}") from None
    except UnicodeDecodeError as exc:
        line, column = _where(data, exc.start)
        message = f"byte 0x{data[exc.start]:02x} at column {column} is not {exc.encoding}; Python cannot read it"
        raise KernelFileError(path, message, line=line) from None
