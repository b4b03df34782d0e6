#!/usr/bin/env python3
"""Derives the wire bytes in golden.rs from the hand-written postcard payloads,
independently of the Rust code under test: Python's binascii.crc_hqx is
CRC-CCITT (poly 0x1021), and with init 0xFFFF gives CRC-16/CCITT-FALSE; the
COBS encoder below is a separate implementation of the same algorithm.

Run: python3 golden_wire.py   (prints one line per payload)
"""
import binascii
import sys


def cobs(data: bytes) -> bytes:
    out, run = bytearray(), bytearray()
    for b in data:
        if b == 0:
            out += bytes([len(run) + 1]) + run
            run = bytearray()
        else:
            run.append(b)
            if len(run) == 254:
                out += b"\xff" + run
                run = bytearray()
    out += bytes([len(run) + 1]) + run
    return bytes(out)


def wire(payload: bytes) -> bytes:
    crc = binascii.crc_hqx(payload, 0xFFFF)
    return cobs(payload + crc.to_bytes(2, "little")) + b"\x00"


PAYLOADS = sys.argv[1:] or [
    "01 00 80 02 1F 0C 04 6B 6E 6F 62",
    "02 01 EF FD B6 F5 0D",
    "00 01 00",
    "AC 02 02 05",
    "03 03 07 00",
    "04 03 B4 24 02",
    "05 04 00 00 E8 07",
    "06 04 01 01 F0 A2 04",
    "07 05 01 05",
    "08 05 00 D8 04",
    "06 06 01",
    "09 06 00",
    "0A 07 2A",
    "0B 08 64",
    "0C 09 00",
    "0D 09 01 FF 00 00 80",
    "0E 09 02 00 00 FF FF F4 03",
    "0F 09 03 00 80 FF C8 DC 0B",
    "10 09 04 10 20 30 40 00",
]

for p in PAYLOADS:
    w = wire(bytes.fromhex(p))
    print(p, "=>", ", ".join(f"0x{b:02X}" for b in w))
