// The CUDA engine (in the CUDA backend; a CPU-only binary links runtime/engine/cuda_engine_absent.cpp instead):
// GpuResNet (bf16 with fp32 master weights, or the fp32 mode) + the bucketed NCCL reducer + the
// multi-tensor optimizer on the GPU, on the GPU this rank pinned.
//
// A step, as the device sees it: the batch is copied from pinned host memory to the device on a copy
// stream while the previous step still computes; the compute stream waits for that copy (an event), casts
// the images to bf16, runs forward, loss and backward; each gradient bucket's allreduce starts on the
// communication stream as soon as backward has written its last gradient; the compute stream waits for
// the reductions (an event, not the host) and runs the optimizer. The loss and the top-1 hits stay on the
// device until the trainer reads them at a log line. The host waits, bounded, only for the copy of the
// batch (so the batch can be refilled) and for results it asks for.
//
// Determinism: cuDNN algorithms are chosen among the deterministic ones, reductions have a fixed order and
// no float atomics, so the same job gives the same bytes every run on the same GPU model and software.
#pragma once

#include "job/rank_environment.h"
#include "runtime/engine/engine.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>
#include <memory>

namespace train {

// settings.precision picks bf16 or the fp32 mode. Throws std::runtime_error (kernels/cuda/cuda_check.h)
// when a CUDA call fails, GpuError (runtime/comm/nccl_check.h) when an NCCL call fails, CollectiveTimeout
// when a wait exceeds `timeout` (a rank that is gone).
std::unique_ptr<Engine> make_cuda_engine(const TrainingSettings& settings, int classes, const RankIdentity& identity,
                                         MPI_Comm comm, std::chrono::milliseconds timeout);

}  // namespace train
