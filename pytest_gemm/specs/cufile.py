"""``.cu`` kernel files: each ``/* pytest-gemm`` header's TOML, read with the schema into a kernel spec."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .errors import KernelFileError
from .header import spec_from_mapping
from .kinds import KernelKind
from .source import HEADER, decode_cu, read_kernel_bytes, unix_line_ends
from .spec import KernelSpec, distinct_names

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["parse_cu_file", "parse_cu_source"]

_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)")


def _toml_error(path: str | Path, exc: Exception, first_line: int, header: str) -> KernelFileError:
    """TOML's error at the line of the file it is on (tomllib counts from the header's first line); a key that is
    not ASCII is said to be the cause, as tomllib does not say it."""
    message = str(exc)
    where = _TOML_WHERE.search(message)
    if where is None:  # "at end of document" and the like: the header's last line is as near as it gets
        return KernelFileError(path, f"the pytest-gemm header is not valid TOML: {message}", line=first_line)
    line = first_line + int(where.group(1)) - 1
    text = f"{message[: where.start()]} (column {where.group(2)})"
    lines = header.splitlines()
    at = int(where.group(1)) - 1
    if "key" in message and 0 <= at < len(lines) and not lines[at].isascii():
        text += (
            "; TOML's bare keys are ASCII letters, digits, _ and -, and the names a header gives are ASCII identifiers"
        )
    return KernelFileError(path, f"the pytest-gemm header is not valid TOML: {text}", line=line)


def parse_cu_source(path: str | Path, text: str, source: str | None = None) -> list[KernelSpec]:
    """All kernels declared in one ``.cu`` file's text; an empty list when it has no header. ``source``: what the
    kernels are compiled from, where it is more than the text (its local includes written in, :mod:`.includes`)."""
    text = unix_line_ends(text)  # as decode_cu gives it, whatever the caller read
    source = text if source is None else unix_line_ends(source)
    specs = []
    for match in HEADER.finditer(text):
        line = text.count("\n", 0, match.start(1)) + 1
        try:
            data = tomllib.loads(match.group(1))
        except tomllib.TOMLDecodeError as exc:
            raise _toml_error(path, exc, line, match.group(1)) from None
        specs.append(spec_from_mapping(data, path=path, line=line, kind=KernelKind.CU, source=source))
    return distinct_names(path, specs)


def parse_cu_file(path: str | Path) -> list[KernelSpec]:
    return parse_cu_source(path, decode_cu(path, read_kernel_bytes(Path(path), str(path))))
