#!/usr/bin/env bash
# Converts the first images of Fashion-MNIST with both scripts (an image folder, and TFRecord with gzip
# shards, RecordIO with .idx and an image list) and checks that every format gives the image folder's
# batches bit for bit. Fails when Debian's dataset-fashion-mnist is not installed (scripts/setup.sh
# installs it): a test that cannot run must not pass.
#
#   tests/data/run_data_formats.sh DATA_FORMAT_CHECK WORK_DIR
set -euo pipefail
check="$1"
work="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ ! -d /usr/share/datasets/fashion-mnist ]]; then
  echo "FAILED: /usr/share/datasets/fashion-mnist is missing (run scripts/setup.sh, or apt-get install dataset-fashion-mnist)" >&2
  exit 1
fi
rm -rf "$work"
python3 "$root/scripts/data/make_fashion_mnist_folder.py" "$work/folder" --numbered --limit 150
python3 "$root/scripts/data/make_dataset_records.py" "$work/records" --limit 150 --shards 3 --gzip
# Without its .idx, the RecordIO file is indexed by a scan.
mkdir -p "$work/records/recordio_bare"
cp "$work/records/recordio/train/data.rec" "$work/records/recordio_bare/"
"$check" "$work/folder/train" "$work/records/tfrecord/train" "$work/records/recordio/train" \
  "$work/records/recordio_bare" "$work/records/image_list/train:$work/records/image_list/train_lst"
# Pipe mode streams whole objects back to back: plain TFRecord shards (a stream mixing gzip and plain
# objects cannot be read) and the RecordIO file.
python3 "$root/scripts/data/make_dataset_records.py" "$work/plain" --limit 150 --shards 3
"$check" "$work/folder/train" --pipe "$work/plain/tfrecord/train" "$work/records/recordio_bare"
"$check" "$work/folder/validation" "$work/records/tfrecord/validation" "$work/records/recordio/validation" \
  "$work/records/image_list/validation:$work/records/image_list/validation_lst"
