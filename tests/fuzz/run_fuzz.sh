#!/usr/bin/env bash
# Builds tests/fuzz/fuzz_job_config.cpp with libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, writes
# a seed corpus of valid job description files, and fuzzes for a bounded time. Exits non-zero on any crash,
# sanitizer report or unexpected exception (libFuzzer leaves the input as BUILD_DIR/crash-*).
#
#   tests/fuzz/run_fuzz.sh BUILD_DIR        FUZZ_SECONDS (default 30) bounds the run; FUZZ_CXX defaults to clang++
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/fuzz_common.sh" 30 "$@"

mkdir -p "$build/corpus/job_config"
# The target links common/ and job/ as the build has them: every source of their CMake libraries, compiled
# here with the fuzzer's instrumentation into one archive, from which the linker takes what the parsers
# need.
mapfile -t library < <(library_sources common; library_sources job)
[[ ${#library[@]} -gt 10 ]] || { echo "run_fuzz.sh: FAILED: found only ${#library[@]} sources in common/ and job/" >&2; exit 1; }

# An object newer than its source, every common/ and job/ header and the scripts is reused.
newest_header="$(ls -t "$root"/common/*.h "$root"/job/*.h "$0" "$here/fuzz_common.sh" | head -n 1 || true)"
compile_objects "" "$newest_header" "$here/fuzz_job_config.cpp" "${library[@]}"
archive="$build/obj/libjob_common.a"
rm -f "$archive"
ar rcs "$archive" "${objects[@]:1}"
binary="$build/fuzz_job_config"
"$cxx" -fsanitize=fuzzer,address,undefined -o "$binary" "${objects[0]}" "$archive"

# Seeds: one valid example of each file, in the shapes SageMaker and the SDK write.
seeds="$build/seeds/job_config"
mkdir -p "$seeds"
cat >"$seeds/resourceconfig_local.json" <<'JSON'
{"current_host": "algo-1-x7k2p", "hosts": ["algo-1-x7k2p", "algo-2-x7k2p"], "network_interface_name": "eth0", "current_instance_type": "local"}
JSON
cat >"$seeds/resourceconfig_full.json" <<'JSON'
{"current_host": "algo-2", "current_instance_type": "ml.p4d.24xlarge", "current_group_name": "homogeneousCluster",
 "hosts": ["algo-1", "algo-10", "algo-2"],
 "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.p4d.24xlarge",
                      "hosts": ["algo-10", "algo-2", "algo-1"]}],
 "network_interface_name": "eth0", "topology": null}
JSON
cat >"$seeds/hyperparameters_sdk.json" <<'JSON'
{"epochs": "10", "learning_rate": "0.05", "optimizer": "\"nag\"", "shuffle": "true", "lr_scheduler_step": "\"10,20\"",
 "image_shape": "\"3,224,224\"", "sagemaker_program": "\"train.py\"", "sagemaker_mpi_num_of_processes_per_host": "8",
 "sagemaker_mpi_custom_mpi_options": "\"-x NCCL_DEBUG=INFO --mca btl_tcp_if_include 'eth0'\""}
JSON
cat >"$seeds/hyperparameters_tuning.json" <<'JSON'
{"_tuning_objective_metric": "\"validation:top1\"", "learning_rate": "0.0731", "sagemaker_estimator_class_name": "\"Estimator\"",
 "sagemaker_mpi_num_processes": "16", "sagemaker_distribution_instance_groups": "[\"gpu\"]",
 "custom_mpi_options": "\"--NCCL_DEBUG=WARN -x A=1\"", "batch-size": "64"}
JSON
cat >"$seeds/hyperparameters_raw.json" <<'JSON'
{"optimizer": "sgd", "learning_rate": "0.1", "mini_batch_size": "256", "momentum": "0.9", "weight_decay": "1e-4",
 "lr_scheduler": "step", "lr_scheduler_factor": "0.1", "warmup_epochs": "5", "label_smoothing": "0.1",
 "augmentation_type": "crop", "precision_dtype": "bfloat16", "seed": "42", "max_steps": "0", "num_classes": "1000",
 "num_layers": "50", "checkpoint_frequency": "1", "fusion_threshold_mb": "25", "device": "auto",
 "processes_per_host": "8", "custom_mpi_options": "-x FOO=\"a b\""}
JSON
cat >"$seeds/inputdataconfig.json" <<'JSON'
{"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key", "RecordWrapperType": "None"},
 "validation": {"TrainingInputMode": "Pipe", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "RecordIO",
                "ContentType": "application/x-recordio"},
 "model": {"TrainingInputMode": "FastFile"}}
JSON

# Words of the formats, so mutations reach past the first checks.
dictionary="$build/job_config.dict"
{
  for word in current_host hosts network_interface_name current_instance_type current_group_name instance_groups \
              instance_group_name instance_type topology algo-1 algo-2 eth0 TrainingInputMode S3DistributionType \
              RecordWrapperType ContentType File Pipe FastFile FullyReplicated ShardedByS3Key None RecordIO \
              sagemaker_ sagemaker_mpi_num_of_processes_per_host sagemaker_mpi_custom_mpi_options \
              sagemaker_mpi_num_processes sagemaker_distribution_instance_groups sagemaker_program \
              sagemaker_submit_directory sagemaker_container_log_level _tuning_objective_metric --NCCL_DEBUG; do
    printf '"\\"%s\\""\n' "$word"
  done
  for word in num_layers image_shape num_classes mini_batch_size epochs learning_rate lr_scheduler lr_scheduler_step \
              lr_scheduler_factor warmup_epochs optimizer momentum weight_decay label_smoothing augmentation_type \
              precision_dtype shuffle seed max_steps checkpoint_frequency fusion_threshold_mb device \
              processes_per_host custom_mpi_options; do
    printf '"\\"%s\\""\n' "$word"
  done
  printf '"%s"\n' 'true' 'null' '1e400' '-0' '\\u0000' '\\ud83d\\ude00' '../' '\\\"' "'"
} >"$dictionary"

echo "run_fuzz.sh: fuzzing the job config parsers for ${seconds}s"
cd "$build"
"$binary" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=4096 -timeout=10 -print_final_stats=1 \
  -dict="$dictionary" -artifact_prefix="$build/" "$build/corpus/job_config" "$seeds"
echo "run_fuzz.sh: no crash"
