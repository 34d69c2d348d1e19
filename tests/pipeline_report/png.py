"""A PNG read into its pixels, to count a screenshot's colours (no imaging library is installed).

Only what Chromium writes: 8 bits per channel, RGB or RGBA, not interlaced; the
five row filters of the PNG standard undone row by row.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]

    def colours(self) -> set[bytes]:
        """Every distinct colour (RGB, without alpha)."""
        step = self.channels
        found: set[bytes] = set()
        for row in self.rows:
            found.update(row[i : i + 3] for i in range(0, len(row), step))
        return found


def read_png(data: bytes) -> Image:
    """``data`` decoded; ValueError for anything but 8-bit RGB(A) without interlacing."""
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG")
    pos, compressed, header = len(SIGNATURE), bytearray(), None
    while pos < len(data):
        (length, kind) = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("a PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(bytes(compressed))
    stride = width * channels
    rows: list[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        rows.append(bytes(line))
        previous = rows[-1]
    return Image(width, height, channels, rows)


def _unfilter(kind: int, line: bytearray, up: bytes, bpp: int) -> None:
    n = len(line)
    if kind == 0:
        return
    if kind == 1:
        for i in range(bpp, n):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:
        for i in range(n):
            line[i] = (line[i] + up[i]) & 0xFF
    elif kind == 3:
        for i in range(n):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + up[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            a = line[i - bpp] if i >= bpp else 0
            b = up[i]
            c = up[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    else:
        raise ValueError(f"unknown PNG row filter {kind}")
