#!/usr/bin/python3
"""Reads a tapegrad snapshot with nothing but the safetensors layout: struct, json and numpy.

    /usr/bin/python3 tests/reference/read_snapshot.py FILE.safetensors

Prints one line per tensor, in the order of its bytes in the file,

    NAME DTYPE [SHAPE] SUM

(floats summed in float64 and printed with %.9g, integers summed exactly), then one line per
metadata entry, "meta KEY VALUE". It checks the layout as it goes (header starts with '{', data
buffer 8-byte aligned, tensors tile the data buffer exactly) and exits non-zero if not.

It is an independent reader, not part of `make test`: it proves a file tapegrad wrote can be
read by numpy. To get a file, run the snapshot tests with SNAPSHOT_TEST_OUT set:

    SNAPSHOT_TEST_OUT=/tmp/ref.safetensors build/tests/test_snapshot > /tmp/expected.txt
    /usr/bin/python3 tests/reference/read_snapshot.py /tmp/ref.safetensors > /tmp/numpy.txt
    grep '^[a-z]' /tmp/expected.txt | diff - /tmp/numpy.txt

The test prints the lines it expects in the same format.
"""
import json
import struct
import sys

import numpy as np

# safetensors dtype -> numpy dtype. numpy has no bfloat16: BF16 is read as uint16 and widened
# to float32 by putting its 16 bits on top, which is exactly what bfloat16 is.
DTYPES = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
}


def fail(path, message):
    sys.exit(f"{path}: {message}")


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail(path, "shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        fail(path, f"header length {n} but only {len(blob) - 8} bytes follow")
    header_bytes = blob[8:8 + n]
    if header_bytes[:1] != b"{":
        fail(path, "header does not start with '{'")
    if (8 + n) % 8:
        fail(path, f"data buffer starts at byte {8 + n}, not 8-byte aligned")
    header = json.loads(header_bytes.decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = []
    covered = 0
    for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        begin, end = info["data_offsets"]
        if begin != covered:
            fail(path, f"tensor {name!r} begins at {begin}, expected {covered}")
        covered = end
        raw = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]])
        if info["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        tensors.append((name, info["dtype"], raw.reshape(info["shape"])))
    if covered != len(data):
        fail(path, f"tensors cover {covered} of {len(data)} data bytes")
    return tensors, metadata


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tensors, metadata = load(sys.argv[1])
    for name, dtype, array in tensors:
        shape = ", ".join(str(d) for d in array.shape)
        if array.dtype.kind == "f":
            total = "%.9g" % float(np.sum(array, dtype=np.float64))
        else:
            total = str(sum(int(v) for v in array.ravel()))
        print(f"{name} {dtype} [{shape}] {total}")
    for key, value in metadata.items():
        print(f"meta {key} {value}")


if __name__ == "__main__":
    main()
