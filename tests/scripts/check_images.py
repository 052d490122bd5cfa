#!/usr/bin/env python3
"""Checks that report figures are real images, by decoding them.

usage: check_images.py [--size WxH] DIR NAME...

For each NAME: DIR/NAME.png must be a valid PNG (signature, every chunk's
CRC, IHDR, the IDAT stream inflated with zlib and unfiltered row by row to
exactly width x height pixels) of 900 x 600 pixels (the sweep report's;
--size: another, e.g. cloze-train plot's 1000x1000) with non-trivial content:
several distinct colours, and between 0.5% and 60% of the pixels differing
from the background. DIR/NAME.svg must parse as XML with an <svg> root of the
same size, drawn paths and text. Exits 1 naming the first problem."""
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

SIZE = (900, 600)


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG signature")
    pos, idat, ihdr, chunks = 8, b"", None, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            fail(f"{path}: bad CRC in chunk {kind!r}")
        chunks.append(kind)
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if chunks[0] != b"IHDR" or chunks[-1] != b"IEND":
        fail(f"{path}: chunks {chunks[:3]}...{chunks[-1:]}")
    width, height, depth, color, _, _, interlace = ihdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace != 0:
        fail(f"{path}: unsupported PNG (depth {depth}, colour type {color}, interlace {interlace})")
    raw = zlib.decompress(idat)
    stride = width * channels
    if len(raw) != height * (stride + 1):
        fail(f"{path}: {len(raw)} inflated bytes for {width}x{height}x{channels}")
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif f == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif f == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                up_left = prev[i - channels] if i >= channels else 0
                line[i] = (line[i] + paeth(left, prev[i], up_left)) & 0xFF
        elif f != 0:
            fail(f"{path}: row {y} has filter type {f}")
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def check_png(path):
    width, height, channels, rows = decode_png(path)
    if (width, height) != SIZE:
        fail(f"{path}: {width}x{height}, expected {SIZE[0]}x{SIZE[1]}")
    px = [row[i:i + channels] for row in rows[::3] for i in range(0, len(row), 3 * channels)]
    background = max(set(px), key=px.count)
    other = sum(p != background for p in px) / len(px)
    colours = len(set(px))
    if not (0.005 <= other <= 0.6) or colours < 4:
        fail(f"{path}: {100 * other:.2f}% non-background pixels, {colours} colours: no plot drawn?")
    return f"{width}x{height}, {colours} colours, {100 * other:.1f}% drawn"


def check_svg(path):
    root = ET.parse(path).getroot()
    if not root.tag.endswith("svg"):
        fail(f"{path}: root element {root.tag}")
    if (root.get("width"), root.get("height")) != tuple(str(x) for x in SIZE):
        fail(f"{path}: size {root.get('width')}x{root.get('height')}")
    ns = root.tag[:-3]
    paths = root.iter(ns + "path")
    n_paths = sum(1 for p in paths if len(p.get("d", "")) > 20)
    texts = " ".join("".join(t.itertext()) for t in root.iter(ns + "text"))
    if n_paths < 5 or len(texts) < 20:
        fail(f"{path}: {n_paths} paths, text {texts[:60]!r}: no plot drawn?")
    return f"{n_paths} paths, {len(texts)} characters of text"


def main(argv):
    global SIZE
    if argv[1].startswith("--size="):
        SIZE = tuple(int(x) for x in argv[1][7:].split("x"))
        argv = argv[1:]
    d = argv[1]
    for name in argv[2:]:
        print(f"{name}.png: {check_png(f'{d}/{name}.png')}; {name}.svg: {check_svg(f'{d}/{name}.svg')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
