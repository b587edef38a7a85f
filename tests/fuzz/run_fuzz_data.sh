#!/usr/bin/env bash
# Builds the data-format fuzz targets (fuzz_tfrecord, fuzz_tf_example, fuzz_recordio) with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, writes seed corpora of valid records, and fuzzes each
# for a bounded time. Exits non-zero on any crash, sanitizer report or unexpected exception (libFuzzer
# leaves the input as BUILD_DIR/<target>-crash-*).
#
#   tests/fuzz/run_fuzz_data.sh BUILD_DIR    FUZZ_SECONDS (default 20) bounds each target; FUZZ_CXX defaults to clang++
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/fuzz_common.sh" 20 "$@"

library=()
for name in crc32c byte_stream protobuf_reader tf_example tfrecord record_index recordio record_stream; do
  library+=("$root/runtime/data/records/$name.cpp")
done
# common/ as the build has it, in an archive from which the linker takes what the readers need (regular
# files, a full TMPDIR as the machine's fault, the inflated shards' owned folder, ...).
mapfile -t common < <(library_sources common)
[[ ${#common[@]} -gt 5 ]] || { echo "run_fuzz_data.sh: FAILED: found only ${#common[@]} sources in common/" >&2; exit 1; }
targets=(fuzz_tfrecord fuzz_tf_example fuzz_recordio fuzz_record_stream)

# An object newer than its source, every common and data header, the fuzz headers and the scripts is reused.
newest_header="$(ls -t "$root"/common/*.h "$root"/runtime/data/*.h "$root"/runtime/data/records/*.h "$here"/*.h "$0" \
                       "$here/fuzz_common.sh" | head -n 1 || true)"
target_sources=()
for target in "${targets[@]}"; do target_sources+=("$here/$target.cpp"); done
compile_objects data_ "$newest_header" "${library[@]}" "${common[@]}" "${target_sources[@]}"
library_objects=("${objects[@]:0:${#library[@]}}")
common_archive="$build/obj/libdata_common.a"
rm -f "$common_archive"
ar rcs "$common_archive" "${objects[@]:${#library[@]}:${#common[@]}}"
for target in "${targets[@]}"; do
  "$cxx" -fsanitize=fuzzer,address,undefined -o "$build/$target" "$build/obj/data_$target.o" "${library_objects[@]}" \
    "$common_archive" -lz
done

# Seeds: valid records of each format (TFRecord plain and gzip, Examples with packed and unpacked labels,
# RecordIO with a label array and a record split at an embedded magic number).
seeds="$build/seeds"
python3 - "$seeds" "$root/scripts/data" <<'PY'
import gzip, os, struct, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
# The record writers of the dataset converter: one CRC-32C, varint and framing for every test.
from make_dataset_records import (RECORDIO_MAGIC, bytes_feature, example, image_record, int64_feature,  # noqa: E402
                                  recordio, tfrecord)
for d in ("tfrecord", "tf_example", "recordio", "record_stream"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
def image_example(image, label, packed):
    return example({"image/encoded": bytes_feature(image), "image/class/label": int64_feature(label, packed),
                    "image/format": bytes_feature(b"jpeg")})
jpeg = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffd9")
e1, e2 = image_example(jpeg, 1, True), image_example(b"\x89PNG\r\n\x1a\n", 1000, False)
open(os.path.join(out, "tf_example", "packed"), "wb").write(e1)
open(os.path.join(out, "tf_example", "unpacked"), "wb").write(e2)
stream = tfrecord(e1) + tfrecord(e2)
open(os.path.join(out, "tfrecord", "two"), "wb").write(stream)
open(os.path.join(out, "tfrecord", "two.gz"), "wb").write(gzip.compress(stream))
magic = struct.pack("<I", RECORDIO_MAGIC)
r1 = recordio(image_record(3, 7, jpeg))
# A label array, and the magic number twice in the data: three parts (the record head, wxyz, the jpeg).
r2 = recordio(image_record(2, 7, b"abcd", labels=(2.0, 5.0)) + magic + b"wxyz" + magic + jpeg)
open(os.path.join(out, "recordio", "records"), "wb").write(r1 + r2 + r1)
# Pipe-mode streams: a control byte (1: unwrap RecordIO, 2: skip corrupt, 4: num_classes 1000, 8: label
# offset 0), then the stream: TFRecord, gzip TFRecord, RecordIO, and TFRecord wrapped in RecordIO.
tfrecords = tfrecord(e1) + tfrecord(e2)
for name, control, stream in (("tfrecord", 4, tfrecords), ("gzip", 6, gzip.compress(tfrecords)),
                              ("recordio", 2, r1 + r2), ("wrapped", 5, recordio(tfrecords))):
    open(os.path.join(out, "record_stream", name), "wb").write(bytes([control]) + stream)
PY

# The targets run side by side (each bounded by its own -max_total_time), each into its own log, printed
# in turn afterwards: the suite's wall time is one target's, not three.
status=0
fuzz_pids=()
for target in "${targets[@]}"; do
  name="${target#fuzz_}"
  mkdir -p "$build/corpus/$name"
  echo "run_fuzz_data.sh: fuzzing $target for ${seconds}s"
  (cd "$build" && exec "./$target" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$build/$target-" "$build/corpus/$name" "$seeds/$name") \
      >"$build/$target.log" 2>&1 &
  fuzz_pids+=($!)
done
for i in "${!targets[@]}"; do
  wait "${fuzz_pids[$i]}" || status=1
  echo "--- ${targets[$i]}:"
  tail -n 30 "$build/${targets[$i]}.log"
done
if [[ $status -ne 0 ]]; then
  echo "run_fuzz_data.sh: FAILED: a fuzz target found a bug (see its output above and $build/*-crash-*)" >&2
  exit 1
fi
echo "run_fuzz_data.sh: no crash"
