// What the trainer (runtime/trainer.h) drives: a model, its optimizer and its gradient reduction on one
// backend. The CPU engine is CpuResNet (with the CPU optimizer and its momentum) + the MPI bucket reducer
// (runtime/engine/cpu_engine.h); the CUDA engine is GpuResNet (with the multi-tensor optimizer on the GPU
// and its momentum) + the NCCL bucket reducer (runtime/engine/cuda_engine.h). Both report their steps to
// one StepObserver (runtime/engine/step_observer.h): the log lines' sums and the timeline's marks. Read
// CpuEngine::run_step (runtime/engine/cpu_engine.cpp) first: one training step, each phase one call. The trainer
// and its observers own everything else: data, epochs, learning rate, metrics, validation, checkpoints, stop
// requests, the model file.
//
// Waiting. Each call says what it may wait for. "Enqueues" means: on the CPU the work is done when the call
// returns; on the GPU the step's work is queued on the device's streams and the call returns without
// waiting for the compute, only for the upload of the batch (on a copy stream, overlapping the previous
// step's compute, after the step's kernels are already queued), so the GPU never waits for the host and
// the host runs at most a step or two ahead. Calls that hand results to the host ("waits") synchronise
// with everything queued before them.
// Collectives: run_step reduces gradients across every rank of the job, so every rank calls it the same
// number of times; no other call communicates.
#pragma once

#include "job/rank_environment.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/engine/step_observer.h"
#include "runtime/model/model_state.h"
#include "runtime/model/resnet_plan.h"
#include "runtime/model/resnet_spec.h"
#include "runtime/model_io/tensor.h"
#include "runtime/timeline/step_recorder.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace train {

// The network an engine's model (CpuResNet, GpuResNet) runs, as the settings ask: planned for this rank's
// batch and images. Its gradient buckets are the reducer's to plan (from plan.parameter_counts()).
inline model::ResNetPlan plan_network(const TrainingSettings& settings, int classes) {
  return model::plan_resnet(model::build_resnet_spec(settings.depth, classes), settings.batch_per_rank,
                            settings.height, settings.width, settings.gradient_memory());
}

class Engine {
 public:
  virtual ~Engine() = default;

  // The device and precision, for the rank's log: "cpu (2 threads), float32".
  virtual std::string describe() const = 0;
  virtual const model::ResNetPlan& plan() const = 0;
  virtual size_t gradient_buckets() const = 0;

  // ---- state (each waits for queued work) --------------------------------------------------------------
  // torchvision's default initialisation from `seed`; momentum zero.
  virtual void initialize(uint64_t seed) = 0;
  // Torchvision-named tensors in (a weights channel, a checkpoint); what `tensors` lacks keeps its value.
  // Throws std::invalid_argument on a shape mismatch.
  virtual void import_model(const std::vector<model_io::Tensor>& tensors) = 0;
  virtual void import_momentum(const std::vector<model_io::Tensor>& tensors) = 0;
  // The fp32 model state (master weights, BN buffers and counters) and the momentum, torchvision's names.
  virtual model::ExportedTensors export_model() = 0;
  virtual model::ExportedTensors export_momentum() = 0;
  // Every fp32 parameter in the plan's layout (for the check that all ranks agree).
  virtual std::vector<float> parameters() = 0;

  // ---- training (enqueues) -----------------------------------------------------------------------------
  // One training step on `batch`: forward, loss, backward with the gradient buckets reduced (averaged over
  // ranks) while backward goes on, then the optimizer at `learning_rate`. When it returns the engine no
  // longer reads the batch's memory: the trainer may refill it.
  virtual void run_step(const data::Batch& batch, double learning_rate) = 0;
  // Marks the end of a stretch of steps: their sums are taken later by take_totals(). On the GPU this
  // enqueues their copy to the host behind the steps already queued (enqueues), so that asking for the
  // figures of a log line never leaves the GPU idle. At most a few requests may be outstanding.
  void request_totals() { step_reports().request_totals(); }
  // The sums of the oldest stretch requested and not yet taken (waits for its steps); with none requested,
  // requests one first: the sums of every step since the last request.
  RankStepSums take_totals() { return step_reports().take_totals(); }

  // ---- the timeline (runtime/timeline/) -------------------------------------------------------------------
  // What the timeline asks to mark the next steps and to take their marks (the engine's step observer). On
  // the GPU at most as many steps as settings.timeline asked for when the engine was made.
  timeline::StepRecorder& step_recorder() { return step_reports(); }

  // The engine's step observer (runtime/engine/step_observer.h), which keeps the sums and the marks above.
  virtual StepReports& step_reports() = 0;

  // ---- inference (waits) ---------------------------------------------------------------------------------
  // Logits [batch.size][classes] of the model in inference mode (running statistics), into host memory.
  virtual void infer(const data::Batch& batch, float* logits) = 0;
};

// Makes the engine the settings ask for (settings.device, settings.precision) for `classes` classes
// (runtime/engine/make_engine.cpp). Throws ConfigError when this build cannot (a CUDA engine in a CPU-only build).
std::unique_ptr<Engine> make_engine(const TrainingSettings& settings, int classes, const RankIdentity& identity,
                                    MPI_Comm comm, std::chrono::milliseconds timeout);

}  // namespace train
