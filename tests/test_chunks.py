"""Blocks of whole lines as sources.iter_chunks cuts a stream: every byte once, in order, each block
but the last ending at a newline, whatever the block size, the head already read and the lines'
lengths (lines longer than a block included)."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from dupfind.sources import iter_chunks


@given(st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")), st.integers(1, 40), st.integers(0, 40))
def test_blocks_are_the_stream_cut_after_newlines(data, size, head_size):
    stream = io.BytesIO(data)
    head = stream.read(min(head_size, size))
    blocks = list(iter_chunks(stream, size, head))
    assert b"".join(blocks) == data
    assert all(block for block in blocks)
    assert all(block.endswith(b"\n") for block in blocks[:-1])
    assert all(type(block) is bytes for block in blocks)


def test_a_line_longer_than_a_block_is_one_block():
    data = b"short\n" + b"x" * 50 + b"\nend"
    assert list(iter_chunks(io.BytesIO(data), 8)) == [b"short\n", b"x" * 50 + b"\n", b"end"]
