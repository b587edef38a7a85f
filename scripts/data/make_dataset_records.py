#!/usr/bin/env python3
"""Converts Fashion-MNIST (Debian's dataset-fashion-mnist package) into the record formats train reads.

    scripts/data/make_dataset_records.py OUT [--limit N] [--source DIR] [--shards K] [--gzip]

writes, for the splits train (60,000 images) and validation (the 10,000 test images):
    OUT/tfrecord/<split>/<split>-00000-of-0000K[.gz]   TFRecord shards of tf.train.Example (image/encoded: a PNG,
                                                      image/class/label: 1-based, as the ImageNet scripts write it;
                                                      also image/format, image/height, image/width,
                                                      image/class/text); --gzip compresses every other shard
    OUT/recordio/<split>/data.rec and data.idx        MXNet RecordIO image records (0-based float labels), the .idx
                                                      as MXIndexedRecordIO writes it ("key<TAB>offset")
    OUT/image_list/<split>/<class>/<nnnnn>.png and    the built-in algorithm's image-list layout: point the `train`
    OUT/image_list/<split>_lst/<split>.lst            channel at the first, `train_lst` at the second
Images are 28x28 8-bit grayscale PNGs. Records are written class by class (label, then image number): the
order scripts/data/make_fashion_mnist_folder.py --numbered gives an image folder, so every format holds the
same samples in the same order and the same seed gives the same batches from each. --limit N takes only
the first N images of each split. Standard library only.
"""

import argparse
import gzip
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fashion_mnist_folder import CLASSES, DEFAULT_SOURCE, SPLITS, png_gray8, read_idx  # noqa: E402

RECORDIO_MAGIC = 0xCED7230A


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    table = CRC32C_TABLE
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    """TFRecord's masked CRC-32C: rotate right by 15, add 0xa282ead8."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(number, body):
    return varint(number << 3 | 2) + varint(len(body)) + body


def bytes_feature(value):
    return length_delimited(1, length_delimited(1, value))  # Feature.bytes_list.value


def int64_feature(value, packed=True):
    """Feature.int64_list.value: packed (as TensorFlow writes it), or as one varint field (also valid protobuf)."""
    return length_delimited(3, length_delimited(1, varint(value)) if packed else varint(1 << 3) + varint(value))


def example(features):
    """A tf.train.Example of {key: serialized Feature}."""
    entries = b"".join(length_delimited(1, length_delimited(1, key.encode()) + length_delimited(2, feature))
                       for key, feature in features.items())
    return length_delimited(1, entries)


def tfrecord(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def recordio(data):
    """One record as dmlc-core writes it: cut at every 4-byte-aligned copy of the magic, which is dropped."""
    magic = struct.pack("<I", RECORDIO_MAGIC)
    out = bytearray()

    def part(flag, chunk):
        out.extend(struct.pack("<II", RECORDIO_MAGIC, flag << 29 | len(chunk)))
        out.extend(chunk)
        out.extend(b"\0" * (-len(chunk) % 4))

    start = 0
    i = data.find(magic)  # bytes.find rather than a loop over every 4 bytes: make_imagenet_sized writes millions
    while i != -1:
        if i % 4 == 0:
            part(1 if start == 0 else 2, data[start:i])
            start = i + 4
            i = data.find(magic, start)
        else:
            i = data.find(magic, i + 1)
    part(0 if start == 0 else 3, data[start:])
    return bytes(out)


def image_record(label, image_id, image, labels=()):
    """MXNet's IRHeader (flag, float label, id, id2) followed by the encoded image. With `labels`, flag is their
    count and they follow the header as floats (the label field is then unused, 0)."""
    header = struct.pack("<IfQQ", len(labels), 0.0 if labels else float(label), image_id, 0)
    return header + b"".join(struct.pack("<f", x) for x in labels) + image


def write_atomically(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write tfrecord/, recordio/ and image_list/ into")
    parser.add_argument("--limit", type=int, default=None, help="only the first N images of each split")
    parser.add_argument("--source", default=DEFAULT_SOURCE, help=f"folder of the IDX files (default {DEFAULT_SOURCE})")
    parser.add_argument("--shards", type=int, default=4, help="TFRecord shards per split (default 4)")
    parser.add_argument("--gzip", action="store_true", help="gzip-compress every other TFRecord shard")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.shards < 1:
        parser.error("--shards must be at least 1")

    for split, stem in SPLITS.items():
        (count, height, width), pixels = read_idx(args.source, f"{stem}-images-idx3-ubyte", 0x803, args.limit)
        (label_count,), labels = read_idx(args.source, f"{stem}-labels-idx1-ubyte", 0x801, args.limit)
        if label_count != count:
            sys.exit(f"make_dataset_records: {split}: {count} images but {label_count} labels")
        for i in range(count):
            if labels[i] >= len(CLASSES):
                sys.exit(f"make_dataset_records: {split}: image {i} has label {labels[i]}, expected 0-9")
        order = sorted(range(count), key=lambda i: (labels[i], i))
        size = width * height

        shards = [bytearray() for _ in range(args.shards)]
        rec, idx, lst = bytearray(), [], []
        for position, i in enumerate(order):
            label = labels[i]
            png = png_gray8(width, height, pixels[i * size:(i + 1) * size])
            shard = position * args.shards // len(order)  # contiguous slices keep the order across shards
            shards[shard] += tfrecord(example({
                "image/encoded": bytes_feature(png),
                "image/format": bytes_feature(b"PNG"),
                "image/class/label": int64_feature(label + 1),
                "image/class/text": bytes_feature(CLASSES[label].encode()),
                "image/height": int64_feature(height),
                "image/width": int64_feature(width),
            }))
            idx.append(f"{position}\t{len(rec)}\n")
            rec += recordio(image_record(label, i, png))
            relative = f"{label}_{CLASSES[label]}/{i:05d}.png"
            lst.append(f"{position}\t{label}\t{relative}\n")
            write_atomically(os.path.join(args.out, "image_list", split, relative), png)

        for s, data in enumerate(shards):
            name = f"{split}-{s:05d}-of-{args.shards:05d}"
            if args.gzip and s % 2 == 1:
                write_atomically(os.path.join(args.out, "tfrecord", split, name + ".gz"), gzip.compress(bytes(data)))
            else:
                write_atomically(os.path.join(args.out, "tfrecord", split, name), bytes(data))
        write_atomically(os.path.join(args.out, "recordio", split, "data.rec"), bytes(rec))
        write_atomically(os.path.join(args.out, "recordio", split, "data.idx"), "".join(idx).encode())
        write_atomically(os.path.join(args.out, "image_list", split + "_lst", split + ".lst"), "".join(lst).encode())
        print(f"{split}: {count} images of {width}x{height} as TFRecord ({args.shards} shards), RecordIO and an "
              f"image list under {args.out}")


if __name__ == "__main__":
    main()
