"""The safetensors format with numpy, for tests that hand tensors to train's tools and read them back:
u64 little-endian header length, a JSON header padded with spaces to 8 bytes, then the raw data."""
import json
import struct

import numpy as np

_TO_NAME = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64"}
_TO_NUMPY = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}


def write_safetensors(path, tensors):
    """`tensors`: {name: array}, written in order. Scalars stay scalars (shape [])."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.array(array, order="C")  # (np.ascontiguousarray would turn a scalar into shape [1])
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _TO_NAME[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """{name: read-only array} of an F32/F64/I64 file; the metadata is skipped."""
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    data = raw[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype=_TO_NUMPY[entry["dtype"]]).reshape(entry["shape"])
    return tensors
