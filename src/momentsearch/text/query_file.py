"""Query files: one query per line (``momentsearch search --queries-file``), read as UTF-8."""

from __future__ import annotations

from pathlib import Path

from momentsearch.errors import QueryError
from momentsearch.readers import decode_text, read_bytes

MAX_QUERY_CHARS = 1000  # one query; the service refuses longer ones too
MAX_QUERIES_BYTES = 100_000_000


def read_query_file(path: str | Path) -> list[str]:
    """The non-blank lines of ``path``, stripped. Invalid UTF-8, a NUL character or a line longer than
    :data:`MAX_QUERY_CHARS` is a :class:`QueryError` naming the file and the line."""
    p = Path(path)
    if p.is_file() and p.stat().st_size > MAX_QUERIES_BYTES:
        raise QueryError(f"{p}: larger than {MAX_QUERIES_BYTES // 1_000_000} MB: not a query file")
    text = decode_text(p, read_bytes(p, QueryError, "query file"), QueryError)
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        q = line.strip()
        if not q:
            continue
        if "\x00" in q:
            raise QueryError(f"{p}:{lineno}: a NUL character in the query: not a text file?")
        if len(q) > MAX_QUERY_CHARS:
            raise QueryError(f"{p}:{lineno}: a query of {len(q):,} characters; at most {MAX_QUERY_CHARS:,}")
        out.append(q)
    if not out:
        raise QueryError(f"{p}: no queries (one per line)")
    return out
