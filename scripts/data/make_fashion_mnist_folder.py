#!/usr/bin/env python3
"""Converts Fashion-MNIST (Debian's dataset-fashion-mnist package) into an image folder.

    scripts/data/make_fashion_mnist_folder.py OUT [--limit N] [--source DIR] [--numbered]

writes OUT/train/<class>/<nnnnn>.png (60,000 images) and OUT/validation/<class>/<nnnnn>.png (the 10,000
test images), 28x28 8-bit grayscale PNGs, one subfolder per class. Labels of an image folder are its
subfolder names in sorted order, so the default names (Ankle_boot, Bag, Coat, ...) number the classes
alphabetically; --numbered prefixes the Fashion-MNIST label (0_T-shirt_top, 1_Trouser, ...) so that
the sorted order is the dataset's own numbering. --limit N takes only the first N images of each split.
Standard library only: the IDX files are read with gzip, the PNGs written with zlib.
"""

import argparse
import gzip
import os
import struct
import sys
import zlib

DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
SPLITS = {"train": "train", "validation": "t10k"}


def open_idx(source, stem):
    """Opens SOURCE/STEM or SOURCE/STEM.gz."""
    for name, opener in ((stem + ".gz", gzip.open), (stem, open)):
        path = os.path.join(source, name)
        if os.path.exists(path):
            return path, opener(path, "rb")
    sys.exit(f"make_fashion_mnist_folder: {os.path.join(source, stem)}[.gz] not found; install dataset-fashion-mnist "
             f"(apt-get install dataset-fashion-mnist) or pass --source")


def read_idx(source, stem, expected_magic, limit):
    """Returns (dimensions, data bytes) of at most `limit` items of an IDX file of unsigned bytes."""
    path, stream = open_idx(source, stem)
    with stream:
        header = stream.read(4)
        if len(header) != 4 or struct.unpack(">I", header)[0] != expected_magic:
            sys.exit(f"make_fashion_mnist_folder: {path}: not an IDX file of the expected kind "
                     f"(magic {header.hex()}, expected {expected_magic:08x})")
        dimensions = list(struct.unpack(">" + "I" * (expected_magic & 0xFF), stream.read(4 * (expected_magic & 0xFF))))
        if limit is not None:
            dimensions[0] = min(dimensions[0], limit)
        item = 1
        for d in dimensions[1:]:
            item *= d
        data = stream.read(dimensions[0] * item)
        if len(data) != dimensions[0] * item:
            sys.exit(f"make_fashion_mnist_folder: {path}: truncated ({len(data)} bytes of {dimensions[0] * item})")
    return dimensions, data


def png_gray8(width, height, pixels):
    """An 8-bit grayscale PNG of `pixels` (height rows of width bytes)."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))  # filter type 0 per row
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write train/ and validation/ into")
    parser.add_argument("--limit", type=int, default=None, help="only the first N images of each split")
    parser.add_argument("--source", default=DEFAULT_SOURCE, help=f"folder of the IDX files (default {DEFAULT_SOURCE})")
    parser.add_argument("--numbered", action="store_true",
                        help="prefix class folders with the Fashion-MNIST label (0_T-shirt_top, ...)")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")

    names = [f"{i}_{c}" if args.numbered else c for i, c in enumerate(CLASSES)]
    for split, stem in SPLITS.items():
        (count, height, width), pixels = read_idx(args.source, f"{stem}-images-idx3-ubyte", 0x803, args.limit)
        (label_count,), labels = read_idx(args.source, f"{stem}-labels-idx1-ubyte", 0x801, args.limit)
        if label_count != count:
            sys.exit(f"make_fashion_mnist_folder: {split}: {count} images but {label_count} labels")
        for name in names:
            os.makedirs(os.path.join(args.out, split, name), exist_ok=True)
        per_class = [0] * len(CLASSES)
        size = width * height
        for i in range(count):
            label = labels[i]
            if label >= len(CLASSES):
                sys.exit(f"make_fashion_mnist_folder: {split}: image {i} has label {label}, expected 0-9")
            per_class[label] += 1
            path = os.path.join(args.out, split, names[label], f"{i:05d}.png")
            with open(path + ".tmp", "wb") as f:
                f.write(png_gray8(width, height, pixels[i * size:(i + 1) * size]))
            os.replace(path + ".tmp", path)
        empty = [names[c] for c in range(len(CLASSES)) if per_class[c] == 0]
        print(f"{split}: {count} images of {width}x{height} into {os.path.join(args.out, split)}"
              + (f" (no images for {', '.join(empty)}: their folders are empty)" if empty else ""))


if __name__ == "__main__":
    main()
