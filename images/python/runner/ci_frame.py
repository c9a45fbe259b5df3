"""Framing for the runner protocol (docs/protocol.md), shared by the
supervisor, the kernel and the test harness.  Stdlib only.

A frame is  u32 BE hlen | u32 BE blen | header (JSON object, UTF-8) | body.
"""

import json
import socket
import struct
import time

VERSION = 1
MAX_HEADER = 1 << 20          # 1 MiB
MAX_BODY = 1 << 20            # 1 MiB
RETRY_S = 0.1                 # reconnect interval

_HDR = struct.Struct(">II")
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                           check_circular=False).encode
_decode = json.JSONDecoder().decode


class ProtocolError(Exception):
    """The peer broke the framing rules; the connection must be closed."""


def encode_header(header):
    s = _encode(header)
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:          # lone surrogates (odd file names, evalues)
        return s.encode("utf-8", "replace")


def pack(header, body=b""):
    """One frame as bytes: header and body joined, for a single sendall()."""
    h = encode_header(header)
    if len(h) > MAX_HEADER:
        raise ValueError("frame header of %d bytes exceeds 1 MiB" % len(h))
    if len(body) > MAX_BODY:
        raise ValueError("frame body of %d bytes exceeds 1 MiB" % len(body))
    return b"".join((_HDR.pack(len(h), len(body)), h, body))


class Decoder:
    """Incremental frame decoder: feed() bytes, then next() until None."""

    __slots__ = ("buf",)

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        self.buf += data

    def next(self):
        buf = self.buf
        if len(buf) < 8:
            return None
        hlen, blen = _HDR.unpack_from(buf)
        if hlen < 2 or hlen > MAX_HEADER:
            raise ProtocolError("bad header length %d" % hlen)
        if blen > MAX_BODY:
            raise ProtocolError("bad body length %d" % blen)
        end = 8 + hlen + blen
        if len(buf) < end:
            return None
        try:
            header = _decode(buf[8:8 + hlen].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ProtocolError("bad header: %s" % e) from None
        if not isinstance(header, dict) or not isinstance(header.get("t"), str):
            raise ProtocolError("header is not an object with a string 't'")
        body = bytes(buf[8 + hlen:end])
        del buf[:end]
        return header, body


def hello(role, pid):
    return pack({"t": "hello", "role": role, "version": VERSION, "pid": pid})


def try_connect(path):
    """One non-blocking connection attempt; returns a blocking socket or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
    except OSError:
        s.close()
        return None
    s.setblocking(True)
    return s


def connect_forever(path):
    """Connect, retrying every 100 ms forever."""
    while True:
        s = try_connect(path)
        if s is not None:
            return s
        time.sleep(RETRY_S)
