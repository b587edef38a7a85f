#!/usr/bin/env python3
"""Writes a data set of ImageNet's training-set size from a handful of tiny JPEGs, to time indexing at scale.

    build-python/bin/python scripts/data/make_imagenet_sized.py OUT [--images 1281167] [--classes 1000]
        [--formats folder,tfrecord,recordio] [--shards 1024] [--size 16] [--processes 4]

writes (each format only when asked for, and only when not already complete: OUT/<format>/.complete)
    OUT/folder/n00000000/n00000000_0000.JPEG ...   an image folder: --classes class folders, the images spread
                                                   evenly (1281 or 1282 per class for ImageNet's 1,281,167)
    OUT/tfrecord/train-00000-of-01024 ...          the same samples in the same order as --shards TFRecord shards of
                                                   tf.train.Example (image/encoded, image/class/label 1-based)
    OUT/recordio/data.rec and data.idx             the same as one MXNet RecordIO file (0-based labels) and its .idx
    OUT/recordio_noidx/data.rec                    a hard link to that .rec with no .idx beside it
The pixels are not ImageNet's: --size x --size RGB JPEGs, a few distinct ones (encoded once with Pillow, so run
it with build-python's interpreter) whose bytes are written again and again. Real per-class counts are not
needed: what indexing costs depends on the number of files and folders, not on their pictures. The records are
framed by make_dataset_records.py's writers. A tiny file still takes a 4 KiB block: the folder needs ~5.3 GB
and 1.28 M inodes; the records ~0.6 GB each.
"""

import argparse
import io
import os
import sys
from multiprocessing import Pool

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_dataset_records import (bytes_feature, example, image_record, int64_feature, recordio,  # noqa: E402
                                  tfrecord, write_atomically)

DISTINCT_IMAGES = 16


def tiny_jpegs(size):
    """DISTINCT_IMAGES small RGB JPEGs: gradients and stripes, so each decodes to other pixels."""
    from PIL import Image  # build-python has Pillow; only this needs it
    images = []
    for k in range(DISTINCT_IMAGES):
        picture = Image.new("RGB", (size, size))
        picture.putdata([((x * 16 + k * 37) % 256, (y * 16 + k * 91) % 256, ((x + y) * 8 + k * 53) % 256)
                         for y in range(size) for x in range(size)])
        encoded = io.BytesIO()
        picture.save(encoded, "JPEG", quality=90)
        images.append(encoded.getvalue())
    return images


def class_name(label):
    return f"n{label:08d}"


def class_counts(images, classes):
    """Images per class, spread evenly: the first images % classes classes hold one more."""
    return [images // classes + (1 if c < images % classes else 0) for c in range(classes)]


def samples(images, classes, first, end):
    """(position, label, image variant) of the samples [first, end) in dataset order (class by class)."""
    position = 0
    for label, count in enumerate(class_counts(images, classes)):
        if position + count <= first:
            position += count
            continue
        for i in range(max(0, first - position), count):
            if position + i >= end:
                return
            yield position + i, label, (label * 7 + i) % DISTINCT_IMAGES
        position += count


def write_class(task):
    out, label, count, jpegs = task
    folder = os.path.join(out, class_name(label))
    os.makedirs(folder, exist_ok=True)
    for i in range(count):
        # Written in place: the folder is marked complete only after every class is written.
        with open(os.path.join(folder, f"{class_name(label)}_{i:04d}.JPEG"), "wb") as f:
            f.write(jpegs[(label * 7 + i) % DISTINCT_IMAGES])
    return count


def write_folder(out, images, classes, jpegs, processes):
    counts = class_counts(images, classes)
    with Pool(processes) as pool:
        written = sum(pool.imap_unordered(write_class, [(out, c, counts[c], jpegs) for c in range(classes)],
                                          chunksize=8))
    assert written == images


def tfrecord_shard(task):
    """One shard's bytes: the samples [first, end) of the data set."""
    path, first, end, images, classes, jpegs = task
    cache = {}  # (variant, label) -> the framed record: only a few thousand distinct ones
    data = bytearray()
    for position, label, variant in samples(images, classes, first, end):
        record = cache.get((variant, label))
        if record is None:
            record = cache[(variant, label)] = tfrecord(example({
                "image/encoded": bytes_feature(jpegs[variant]),
                "image/format": bytes_feature(b"JPEG"),
                "image/class/label": int64_feature(label + 1),
                "image/class/text": bytes_feature(class_name(label).encode()),
            }))
        data += record
    write_atomically(path, bytes(data))
    return end - first


def write_tfrecord(out, images, classes, shards, jpegs, processes):
    tasks = [(os.path.join(out, f"train-{s:05d}-of-{shards:05d}"), s * images // shards, (s + 1) * images // shards,
              images, classes, jpegs) for s in range(shards)]
    with Pool(processes) as pool:
        assert sum(pool.imap_unordered(tfrecord_shard, tasks)) == images


def recordio_slice(task):
    """The RecordIO bytes of the samples [first, end) and each one's length."""
    first, end, images, classes, jpegs = task
    data, lengths = bytearray(), []
    for position, label, variant in samples(images, classes, first, end):
        record = recordio(image_record(label, position, jpegs[variant]))
        data += record
        lengths.append(len(record))
    return bytes(data), lengths


def write_recordio(out, images, classes, jpegs, processes):
    slices = max(1, processes * 8)
    tasks = [(s * images // slices, (s + 1) * images // slices, images, classes, jpegs) for s in range(slices)]
    os.makedirs(out, exist_ok=True)
    rec_path, idx_path = os.path.join(out, "data.rec"), os.path.join(out, "data.idx")
    offset, position = 0, 0
    with open(rec_path + ".tmp", "wb") as rec, open(idx_path + ".tmp", "w") as idx, Pool(processes) as pool:
        for data, lengths in pool.imap(recordio_slice, tasks):  # in order: offsets follow each other
            rec.write(data)
            for length in lengths:
                idx.write(f"{position}\t{offset}\n")
                offset += length
                position += 1
    assert position == images
    os.replace(rec_path + ".tmp", rec_path)
    os.replace(idx_path + ".tmp", idx_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write folder/, tfrecord/, recordio/ and recordio_noidx/ into")
    parser.add_argument("--images", type=int, default=1281167, help="samples (default ImageNet's 1,281,167)")
    parser.add_argument("--classes", type=int, default=1000, help="class folders (default 1000)")
    parser.add_argument("--formats", default="folder,tfrecord,recordio", help="comma-separated subset of the default")
    parser.add_argument("--shards", type=int, default=1024, help="TFRecord shards (default 1024)")
    parser.add_argument("--size", type=int, default=16, help="pixels per side of the JPEGs (default 16)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="writers (default: every core)")
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    unknown = set(formats) - {"folder", "tfrecord", "recordio"}
    if unknown:
        parser.error(f"--formats: unknown {', '.join(sorted(unknown))}; expected folder, tfrecord or recordio")
    if args.classes < 1 or args.images < args.classes:
        parser.error(f"--images ({args.images}) must be at least --classes ({args.classes}), which must be at least 1")
    if args.shards < 1 or args.size < 1 or args.processes < 1:
        parser.error("--shards, --size and --processes must be at least 1")

    jpegs = tiny_jpegs(args.size)
    for fmt in formats:
        target = os.path.join(args.out, fmt)
        done = os.path.join(target, ".complete")
        if os.path.exists(done):
            print(f"{target}: already complete")
            continue
        os.makedirs(target, exist_ok=True)
        if fmt == "folder":
            write_folder(target, args.images, args.classes, jpegs, args.processes)
        elif fmt == "tfrecord":
            write_tfrecord(target, args.images, args.classes, args.shards, jpegs, args.processes)
        else:
            write_recordio(target, args.images, args.classes, jpegs, args.processes)
            no_idx = os.path.join(args.out, "recordio_noidx")
            os.makedirs(no_idx, exist_ok=True)
            if os.path.exists(os.path.join(no_idx, "data.rec")):
                os.remove(os.path.join(no_idx, "data.rec"))
            os.link(os.path.join(target, "data.rec"), os.path.join(no_idx, "data.rec"))
        open(done, "w").close()
        print(f"{target}: {args.images} images in {args.classes} classes")


if __name__ == "__main__":
    main()
