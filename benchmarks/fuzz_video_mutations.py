"""Structure-aware damage to video files: the element trees of ISO BMFF (MP4, MOV, M4A), EBML (Matroska,
WebM) and RIFF (AVI), and mutations that follow them.

``elements(data, kind)`` lists a file's elements (offset, header and payload extent, where the size field
sits, the type or id); ``damage(data, kind, rng)`` returns one damaged copy and the name of what was done:

* ``size``: an element's size field set to 0, 1, one less or more, doubled, all ones or random;
* ``type``: an element's type (box type, EBML id, chunk fourcc) swapped for another known one or garbage;
* ``codec``: the codec id (an MP4 sample entry, Matroska's CodecID, AVI's fccHandler and biCompression)
  swapped for another codec's or garbage;
* ``timestamp``: a time field (mvhd/mdhd/tkhd durations and timescales, stts/ctts/elst entries; a
  Cluster timestamp, a block's relative time, TimestampScale, Duration; AVI's rate, scale, start,
  microseconds per frame) set to 0, 1, all ones, the sign bit, or random;
* ``truncate``: cut at an element boundary (its start, the end of its header, its end) or one byte off;
* ``bytes``: random bytes (bit flips, overwritten runs, inserted and deleted bytes);
* ``stacked``: two or three of the above.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

MP4_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"dinf", b"edts", b"udta", b"mvex", b"moof", b"traf",
                  b"mfra", b"meta"}
MP4_ENTRY_CHILDREN = {b"avc1": 78, b"hvc1": 78, b"hev1": 78, b"mp4v": 78, b"jpeg": 78, b"mjpa": 78, b"vp09": 78,
                      b"mp4a": 28}  # sample entries: their child boxes start after these fixed fields
MP4_TIMES = {b"mvhd": (12, 16), b"mdhd": (12, 16), b"tkhd": (20,), b"stts": None, b"ctts": None, b"elst": None}
MP4_CODECS = [b"avc1", b"hvc1", b"hev1", b"mp4v", b"jpeg", b"vp09", b"mp4a", b"av01", b"\x00\x00\x00\x00", b"zzzz"]
EBML_MASTERS = {0x1A45DFA3, 0x18538067, 0x114D9B74, 0x4DBB, 0x1549A966, 0x1654AE6B, 0xAE, 0xE0, 0xE1, 0x1F43B675,
                0xA0, 0x1C53BB6B, 0xBB, 0xB7, 0x1254C367, 0x7373, 0x63C0, 0x67C8, 0x6D80, 0x6240, 0x5035}
EBML_TIMES = {0xE7, 0x2AD7B1, 0x4489, 0xB3, 0x23E383, 0xA3, 0xA1, 0xF1}  # incl. blocks' relative time
EBML_CODEC_IDS = [b"V_VP9", b"V_VP8", b"V_MPEGH/ISO/HEVC", b"V_MPEG4/ISO/AVC", b"V_MJPEG", b"A_OPUS", b"V_AV1",
                  b"", b"V_\xff\xfe", b"S_TEXT/UTF8", b"V_MS/VFW/FOURCC"]
RIFF_LISTS = {b"RIFF", b"LIST"}
AVI_CODECS = [b"FMP4", b"XVID", b"DIVX", b"H264", b"MJPG", b"HEVC", b"\x00\x00\x00\x00", b"zzzz"]
EXTREME_32 = [0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 2, 1000]


@dataclass(frozen=True)
class Element:
    start: int  # offset of the element's first byte
    header: int  # bytes of its header (id/type and size)
    end: int  # offset past its payload (as its size field says, clipped to the file)
    size_at: int  # offset of the size field
    size_len: int  # bytes of the size field (EBML: its varint length)
    kind: bytes  # box type / chunk fourcc / EBML id as bytes


def elements(data: bytes, kind: str) -> list[Element]:
    """The element tree of ``data`` (``kind``: mp4, ebml or riff), flattened in file order."""
    out: list[Element] = []
    {"mp4": _mp4, "ebml": _ebml, "riff": _riff}[kind](data, 0, len(data), out, 0)
    return out


def _mp4(d: bytes, pos: int, end: int, out: list[Element], depth: int) -> None:
    while pos + 8 <= end and depth < 12:
        size, typ = struct.unpack(">I4s", d[pos: pos + 8])
        header = 8
        if size == 1 and pos + 16 <= end:
            size, header = struct.unpack(">Q", d[pos + 8: pos + 16])[0], 16
        elif size == 0:
            size = end - pos
        if size < header:
            return
        stop = min(end, pos + size)
        out.append(Element(pos, header, stop, pos, 4, typ))
        if typ in MP4_CONTAINERS:
            _mp4(d, pos + header + (4 if typ == b"meta" else 0), stop, out, depth + 1)
        elif typ == b"stsd":
            _mp4(d, pos + header + 8, stop, out, depth + 1)
        elif typ in MP4_ENTRY_CHILDREN:
            _mp4(d, pos + header + MP4_ENTRY_CHILDREN[typ], stop, out, depth + 1)
        pos = stop


def _vint(d: bytes, pos: int, keep_marker: bool) -> tuple[int, int] | None:
    if pos >= len(d) or d[pos] == 0:
        return None
    n = 8 - d[pos].bit_length() + 1
    if pos + n > len(d):
        return None
    v = int.from_bytes(d[pos: pos + n], "big")
    return (v if keep_marker else v & ((1 << (7 * n)) - 1)), n


def _ebml(d: bytes, pos: int, end: int, out: list[Element], depth: int) -> None:
    while pos < end and depth < 12:
        i = _vint(d, pos, True)
        s = _vint(d, pos + i[1], False) if i else None
        if i is None or s is None or i[1] > 4:
            return
        header = i[1] + s[1]
        unknown = s[0] == (1 << (7 * s[1])) - 1
        stop = end if unknown else min(end, pos + header + s[0])
        out.append(Element(pos, header, stop, pos + i[1], s[1], d[pos: pos + i[1]]))
        if i[0] in EBML_MASTERS:
            _ebml(d, pos + header, stop, out, depth + 1)
        pos = stop


def _riff(d: bytes, pos: int, end: int, out: list[Element], depth: int) -> None:
    while pos + 8 <= end and depth < 12:
        typ, size = struct.unpack("<4sI", d[pos: pos + 8])
        stop = min(end, pos + 8 + size)
        out.append(Element(pos, 8, stop, pos + 4, 4, typ))
        if typ in RIFF_LISTS:
            _riff(d, pos + 12, stop, out, depth + 1)
        pos = stop + (size & 1)


def damage(data: bytes, kind: str, rng: random.Random) -> tuple[bytes, str]:
    """One damaged copy of ``data`` and the name of what was done (see the module's doc)."""
    els = elements(data, kind)
    how = rng.choice(["size", "size", "type", "codec", "timestamp", "timestamp", "truncate", "bytes", "bytes",
                      "stacked"])
    if how == "stacked":
        out, names = data, []
        for _ in range(rng.randint(2, 3)):
            out, name = _one(out, kind, elements(out, kind), rng, rng.choice(
                ["size", "type", "codec", "timestamp", "truncate", "bytes"]))
            names.append(name)
        return out, "stacked:" + "+".join(names)
    return _one(data, kind, els, rng, how)


def _one(data: bytes, kind: str, els: list[Element], rng: random.Random, how: str) -> tuple[bytes, str]:
    b = bytearray(data)
    if not els or how == "bytes":
        return _bytes(b, rng), "bytes"
    if how == "truncate":
        e = rng.choice(els)
        cut = rng.choice([e.start, e.start + e.header, e.end, e.start + e.header // 2]) + rng.choice([0, 0, -1, 1])
        return bytes(b[: max(0, min(len(b), cut))]), "truncate"
    if how == "size":
        e = rng.choice(els)
        _set_size(b, e, kind, rng)
        return bytes(b), "size"
    if how == "type":
        e, other = rng.choice(els), rng.choice(els)
        idlen = len(e.kind)
        at = e.start + 4 if kind == "mp4" else e.start  # MP4: size then type; RIFF: fourcc then size; EBML: id first
        new = other.kind[:idlen].ljust(idlen, b"\x00") if rng.random() < 0.6 else rng.randbytes(idlen)
        b[at: at + idlen] = new
        return bytes(b), "type"
    if how == "codec":
        return _codec(b, kind, els, rng), "codec"
    return _timestamp(b, kind, els, rng), "timestamp"


def _bytes(b: bytearray, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        i = rng.randrange(max(1, len(b)))
        if op < 0.4 and b:
            b[i] ^= 1 << rng.randrange(8)
        elif op < 0.7:
            run = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            b[i: i + len(run)] = run
        elif op < 0.85:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
        else:
            del b[i: i + rng.randint(1, 64)]
    return bytes(b)


def _set_size(b: bytearray, e: Element, kind: str, rng: random.Random) -> None:
    true = max(0, e.end - e.start - (e.header if kind != "mp4" else 0))
    if kind == "ebml":
        n = e.size_len
        top = (1 << (7 * n)) - 1
        v = rng.choice([0, 1, max(0, true - 1), true + 1, true * 2, top, top - 1, rng.randrange(top + 1)])
        b[e.size_at: e.size_at + n] = ((1 << (7 * n)) | min(v, top)).to_bytes(n, "big")
        return
    v = rng.choice([0, 1, max(0, true - 1), true + 1, true * 2, 0xFFFFFFFF, 0x7FFFFFFF, rng.randrange(1 << 32)])
    b[e.size_at: e.size_at + 4] = struct.pack(">I" if kind == "mp4" else "<I", v & 0xFFFFFFFF)


def _codec(b: bytearray, kind: str, els: list[Element], rng: random.Random) -> bytes:
    if kind == "mp4":
        entries = [e for e in els if e.kind in MP4_ENTRY_CHILDREN]
        if entries:
            e = rng.choice(entries)
            b[e.start + 4: e.start + 8] = rng.choice(MP4_CODECS)
            return bytes(b)
    elif kind == "ebml":
        ids = [e for e in els if e.kind == b"\x86"]
        if ids:
            e = rng.choice(ids)
            new = rng.choice(EBML_CODEC_IDS)
            size = (0x80 | len(new)).to_bytes(1, "big") if len(new) < 127 else b"\x81"
            return bytes(b[: e.start + 1] + size + new + b[e.end:])
    else:
        for e in els:
            if e.kind in (b"strh", b"strf") and rng.random() < 0.7:
                at = e.start + 8 + (4 if e.kind == b"strh" else 16)
                b[at: at + 4] = rng.choice(AVI_CODECS)
        return bytes(b)
    return _bytes(b, rng)


def _timestamp(b: bytearray, kind: str, els: list[Element], rng: random.Random) -> bytes:
    if kind == "mp4":
        boxes = [e for e in els if e.kind in MP4_TIMES]
        if boxes:
            e = rng.choice(boxes)
            fields = MP4_TIMES[e.kind]
            p = e.start + e.header
            if fields is None:  # a table: (count, value) pairs after version/flags and the entry count
                n = max(1, (e.end - p - 8) // 4)
                at = p + 8 + 4 * rng.randrange(n)
            else:
                at = p + rng.choice(fields)
            b[at: at + 4] = struct.pack(">I", rng.choice(EXTREME_32 + [rng.randrange(1 << 32)]))
            return bytes(b)
    elif kind == "ebml":
        times = [e for e in els if int.from_bytes(e.kind, "big") in EBML_TIMES]
        if times:
            e = rng.choice(times)
            p = e.start + e.header
            if e.kind in (b"\xa3", b"\xa1") and e.end - p >= 3:  # a block: track varint, then int16 time
                at = p + 1
                b[at: at + 2] = rng.choice([b"\x7f\xff", b"\x80\x00", b"\x00\x00", b"\xff\xff", rng.randbytes(2)])
            elif e.end > p:
                n = e.end - p
                b[p: e.end] = rng.choice([b"\xff" * n, b"\x00" * n, b"\x7f" + b"\xff" * (n - 1), rng.randbytes(n)])[:n]
            else:  # an element cut inside its header: nothing to set
                return _bytes(b, rng)
            return bytes(b)
    else:
        for e in els:
            if e.kind in (b"avih", b"strh") and rng.random() < 0.7:
                at = e.start + 8 + (0 if e.kind == b"avih" else rng.choice([20, 24, 28, 32]))
                b[at: at + 4] = struct.pack("<I", rng.choice(EXTREME_32 + [rng.randrange(1 << 32)]))
        return bytes(b)
    return _bytes(b, rng)
