"""The texts of a few lines of files, read again by number: for rejected lines the read kept no text of."""

from __future__ import annotations

import polars as pl

from dupfind.errors import DupfindError
from dupfind.line_split import lines_payload, split_lines
from dupfind.sources import CHUNK_BYTES, Source, iter_chunks, open_source

# The rejects a read of a file's JSON lines leaves without their text (ingest._Block.lines_in_file):
# normalisation rejects them, long after the block that held their text was released.
TEXTLESS_REASONS = ("bad_timestamp", "no_timestamp")


def _chunk_lines(chunk: bytes, first_line: int) -> pl.Series:
    """A chunk's lines as the read gives them: a file's BOM dropped, a line's CR before its newline too."""
    payload = lines_payload(chunk, first_line)
    texts = split_lines(payload)
    if texts is None:
        lines = payload.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        texts = pl.Series("text", [line.decode("utf-8", errors="backslashreplace") for line in lines], dtype=pl.String)
    return texts.str.strip_suffix("\r")


def line_texts(source: Source, lines: pl.Series, chunk_bytes: int = CHUNK_BYTES) -> pl.DataFrame:
    """(line, text) of these line numbers of a file (sorted, distinct), read again; a line the file
    no longer has (rotated, truncated) is left out. Only the chunks that hold one are split."""
    found = []
    wanted = lines.cast(pl.Int64)
    opened = open_source(source)
    try:
        first = 1
        for chunk in iter_chunks(opened.stream, chunk_bytes):
            count = chunk.count(b"\n") + (not chunk.endswith(b"\n"))
            here = wanted.filter((wanted >= first) & (wanted < first + count))
            if here.len():
                texts = _chunk_lines(chunk, first)
                here = here.filter(here - first < texts.len())
                found.append(pl.DataFrame({"line": here, "text": texts.gather(here - first)}))
            first += count
            if first > wanted[-1]:
                break
    finally:
        opened.stream.close()
    return pl.concat(found) if found else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})


def with_line_texts(rejects: pl.DataFrame, sources: list[Source]) -> pl.DataFrame:
    """`rejects` (source, line, reason, text) with the text of those the read kept none of, read
    again from their files."""
    textless = rejects["text"].is_null() & rejects["reason"].is_in(TEXTLESS_REASONS)
    if not textless.any():
        return rejects
    files = {s.path: s for s in sources if s.rereadable}
    wanted = rejects.filter(textless).group_by("source", maintain_order=True).agg(pl.col("line").unique().sort())
    found = []
    for path, numbers in wanted.iter_rows():
        if path in files:
            try:
                texts = line_texts(files[path], pl.Series(numbers, dtype=pl.Int64))
            except (OSError, DupfindError):  # gone since it was read: the lines stay counted, without their text
                continue
            found.append(texts.with_columns(source=pl.lit(path, dtype=rejects.schema["source"])))
    if not found:
        return rejects
    texts = pl.concat(found).select("source", pl.col("line").cast(rejects.schema["line"]), pl.col("text").alias("__found"))
    return (
        rejects.join(texts, on=["source", "line"], how="left", maintain_order="left")
        .with_columns(text=pl.coalesce("text", "__found")).drop("__found")
    )
