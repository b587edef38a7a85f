#!/usr/bin/env python3
"""Decode and augmentation throughput per core of train's data pipeline against libjpeg-turbo's bare decode
and Pillow/torchvision, on the same JPEGs. Prints figures only (it asserts nothing about speed).

    /usr/bin/python3 scripts/bench/decode_bench.py [--bench build/scripts/bench/data_bench] [--folder DIR]
                                             [--images 1000] [--rounds 3] [--augmentations none,crop,crop_color]

It builds nothing: build data_bench first (`cmake --build build --target data_bench`). Without --folder it
writes 64 photo-like 500x375 JPEGs (4:2:0, quality 90, about ImageNet's average size) with
`data_bench --make-jpegs` into a folder under the system's temporary directory, reused by later runs.
Needs Debian's python3-torch, python3-torchvision and python3-pil (run with /usr/bin/python3).

Every figure is images per CPU-second of one thread: data_bench's own thread's CPU time, and this
process's CPU time (time.process_time) with torch.set_num_threads(1) for Pillow, so other work on the
machine distorts them little. Each side runs --rounds times, alternating, and the best round counts.
  ours:   data_bench's sample path (read, decode the crop's region, resample, jitter, normalise to float32)
  bare:   libjpeg-turbo decoding whole images to RGB, file reading included (data_bench)
  Pillow: torchvision's ImageFolder loader (PIL open, convert("RGB")) then, for crop,
          RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip, for crop_color
          also ColorJitter(0.4, 0.4, 0.4), for none Resize(224) + CenterCrop(224); then ToTensor + Normalize
The targets (the data issue): ours at least 0.8x the bare decode and 2x Pillow.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TARGET_VS_BARE = 0.8
TARGET_VS_PILLOW = 2.0
IMAGE_COUNT, IMAGE_WIDTH, IMAGE_HEIGHT = 64, 500, 375


def image_files(folder):
    """The folder's images as data_bench's image-folder scan finds them: DIR/CLASS/*.jpg|jpeg|png."""
    files = []
    if not os.path.isdir(folder):
        return files
    for entry in sorted(os.listdir(folder)):
        class_dir = os.path.join(folder, entry)
        if os.path.isdir(class_dir):
            files += [os.path.join(class_dir, name) for name in sorted(os.listdir(class_dir))
                      if name.lower().endswith((".jpg", ".jpeg", ".png"))]
    return files


def generated_folder(bench):
    """Photo-like JPEGs written by data_bench, reused when a previous run left them complete."""
    folder = os.path.join(tempfile.gettempdir(), f"train-bench-decode-{IMAGE_WIDTH}x{IMAGE_HEIGHT}")
    if len(image_files(folder)) != IMAGE_COUNT:
        subprocess.run([bench, "--make-jpegs", folder, "--count", str(IMAGE_COUNT), "--width", str(IMAGE_WIDTH),
                        "--height", str(IMAGE_HEIGHT)], check=True, stdout=subprocess.DEVNULL)
    return folder


def run_data_bench(bench, folder, augmentation, images, size):
    output = subprocess.run([bench, "--folder", folder, "--augmentation", augmentation, "--images", str(images),
                             "--size", str(size), "--rounds", "1", "--threads", "1", "--json"],
                            check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def pillow_transform(augmentation, size):
    from torchvision import transforms
    normalise = [transforms.ToTensor(), transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
    if augmentation == "none":
        return transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size)] + normalise)
    steps = [transforms.RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)),
             transforms.RandomHorizontalFlip()]
    if augmentation == "crop_color":
        steps.append(transforms.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4))
    return transforms.Compose(steps + normalise)


def pillow_rate(files, augmentation, images, size):
    """Images per CPU-second of torchvision's loader and transform on one thread."""
    from PIL import Image
    transform = pillow_transform(augmentation, size)

    def load(path):
        with open(path, "rb") as file:  # as torchvision.datasets.folder.pil_loader
            image = Image.open(file)
            return transform(image.convert("RGB"))

    load(files[0])  # warm-up
    start = time.process_time()
    for i in range(images):
        load(files[i % len(files)])
    return images / (time.process_time() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", default=os.path.join("build", "scripts", "bench", "data_bench"),
                        help="the data_bench binary (default: %(default)s)")
    parser.add_argument("--folder", help="an image folder (DIR/CLASS/*.jpg) instead of the generated JPEGs")
    parser.add_argument("--images", type=int, default=1000, help="images per round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--augmentations", default="none,crop,crop_color")
    args = parser.parse_args()
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"decode_bench: no data_bench at {args.bench}: build it with "
                 f"`cmake --build build --target data_bench` (or give --bench PATH)")

    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    folder = args.folder or generated_folder(args.bench)
    files = image_files(folder)
    if not files:
        sys.exit(f"decode_bench: no JPEG or PNG files in the class subfolders of {folder}")
    print(f"{len(files)} images in {folder}; output {args.size}x{args.size}; 1 thread; "
          f"best of {args.rounds} rounds of {args.images} images; images per CPU-second", flush=True)

    results = []
    bare = 0.0
    for augmentation in args.augmentations.split(","):
        ours = pillow = 0.0
        for _ in range(args.rounds):  # alternating, so both sides see the same background load
            measured = run_data_bench(args.bench, folder, augmentation, args.images, args.size)
            ours = max(ours, measured["sample_images_per_cpu_second"])
            bare = max(bare, measured["bare_images_per_cpu_second"])
            pillow = max(pillow, pillow_rate(files, augmentation, args.images, args.size))
        results.append((augmentation, ours, pillow))

    header = (f"{'augmentation':<14}{'ours':>8}{'bare decode':>13}{'Pillow':>9}"
              f"{'ours/bare (>=' + str(TARGET_VS_BARE) + ')':>20}{'ours/Pillow (>=' + str(TARGET_VS_PILLOW) + ')':>22}")
    print(header)
    for augmentation, ours, pillow in results:
        vs_bare, vs_pillow = ours / bare, ours / pillow
        print(f"{augmentation:<14}{ours:>8.0f}{bare:>13.0f}{pillow:>9.0f}"
              f"{vs_bare:>15.2f} {'ok ' if vs_bare >= TARGET_VS_BARE else 'LOW'}"
              f"{vs_pillow:>17.2f} {'ok ' if vs_pillow >= TARGET_VS_PILLOW else 'LOW'}")
    print("bare decode: the best round over all runs (it does not depend on the augmentation). The targets are\n"
          "the training path's (crop); none decodes and resizes the whole image, more than the bare decode does.")


if __name__ == "__main__":
    main()
