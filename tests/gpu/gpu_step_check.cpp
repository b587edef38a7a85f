// tests/gpu/gpu_step_check.cpp: one whole training step of GpuResNet against the CPU model (CpuResNet, the
// specification), on a GPU.
//
//   gpu_step_check [--seed N] [--case SUBSTRING] [--mode fp32|bf16] [--quiet]
//
// Cases: ResNet-50 (1000 classes) at batch 4 with 64x64 and with 224x224 images, ResNet-18 (10 classes)
// at batch 8 with 32x32 images; each in fp32 (GpuResNet<float>) and bf16 (GpuResNet<bf16>). Per case and
// mode, from CpuResNet::initialize(seed) weights and one random batch (bf16: weights and images first
// rounded to bf16 for every model, so all compute from the same values):
//   GPU:  forward_and_loss and backward (label smoothing 0.1, gradient_scale 0.5 as for two ranks) +
//         sgd_step (lr 0.1, momentum 0.9, weight decay 1e-4 on conv/fc weights);
//   CPU:  the same step in fp32 (CpuResNet<float>) and in fp64 (CpuResNet<double>, "exact").
// Compared: bucket plan and on_gradient order (identical to the CPU's), loss, top-1 hits, every gradient,
// BN running statistics and num_batches_tracked, the SGD step (GPU momentum and weights against
// kernels::sgd_step run on the GPU's own gradients), inference logits (the CPU model given the GPU's state by
// download_state), and model.safetensors written from the GPU model (equal to the CPU export of that state).
//
// Why an fp64 reference and tolerances that scale: ResNet-50 at initialisation amplifies rounding by
// ~10^4 (ReLUs whose input is within rounding of zero open on one side and not the other, and the
// network passes that on): CpuResNet<float> itself is off from CpuResNet<double> by 2-3% (rel L2) in its
// worst gradients, at 64x64 and 224x224, batch 4, 8 or 16 alike; ResNet-18/34 only by ~1e-5. A fixed
// fp32 tolerance on GPU-vs-CPU gradients would fail a correct GPU on ResNet-50 or pass anything. So each
// quantity's GPU error against fp64 is judged against the CPU fp32 error of the same quantity in the
// same run: at most 10x that, or 5x the CPU's error over the whole group (all gradients, all BN
// statistics; one tensor's CPU error is one noisy sample), never tighter than a floor. (cuDNN may round
// differently from OpenBLAS; a host emulation with a 1e-6 relative perturbation of every convolution
// output, likely more than cuDNN's fp32 differs by, stays within these bounds.) A bound above 0.5 could not
// tell a wrong value (rel L2 >= 1 for a missing, doubled or unrelated gradient) from rounding: such rows
// say INFO (printed, not judged).
//
// Metrics (in double): rel L2 = ||gpu - ref|| / ||ref||, max rel = max |gpu - ref| / max |ref|, cosine,
// norm ratio error = | ||gpu|| / ||ref|| - 1 |. A non-finite GPU value where the reference is finite fails.
//
// Tolerances:
//   fp32 loss, gradients (each, and all at once), BN running statistics:
//        rel L2 (loss: rel err) vs fp64 <= max(floor, 10 x CPU-fp32-vs-fp64 of the same quantity,
//        5 x CPU-fp32-vs-fp64 of its group); floors: loss 5e-5, gradients 1e-3, BN statistics 1e-4.
//        INFO where the bound is > 0.5.
//   fp32 top-1 hits: equal to the CPU fp32 model's.
//   fp32 inference logits (same weights): max rel 1e-4 against CPU fp32.
//   bf16: bf16 keeps 8 bits, and through the same amplification the per-tensor gradients of ResNet-50
//        come out nearly uncorrelated with fp64's (measured with a host emulation of these kernels'
//        roundings: cosine ~0.1 in layer1..3 at 64x64 and 224x224; ResNet-18 at 32x32: cosine >= 0.85).
//        So: loss rel err 2e-2; top-1 hits |diff| <= batch/4; fc.bias gradient cosine >= 0.999 and norm
//        ratio error <= 2e-2; fc.weight gradient cosine >= 0.8 and norm ratio error <= 0.1; all
//        gradients at once norm ratio error <= 0.2 (a lost or doubled 1/ranks gives 0.5 or 1); every
//        other gradient cosine >= 0.5 and norm ratio error <= 0.3 where the case is well-conditioned (CPU
//        fp32 vs fp64 of all gradients <= 1e-4), else INFO; BN running statistics cosine >= 0.95 and
//        norm ratio error <= 0.1; inference logits cosine >= 0.999 and norm ratio error <= 2e-2.
//   both: the SGD step max rel 1e-5 (the same fp32 arithmetic: expected bit-equal); bucket plan,
//        on_gradient order, num_batches_tracked and the model file exact.
//
// Exit status: 0 all passed, 1 some check failed, 2 no GPU visible (CI builds this but cannot run it),
// 64 usage.

#include "common/train_variables.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/ops.h"
#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/cpu_resnet.h"
#include "runtime/model/gpu_resnet.h"
#include "runtime/model/model_state.h"
#include "runtime/model/resnet_spec.h"
#include "runtime/training_settings.h"
#include "runtime/model_io/model_files.h"
#include "runtime/model_io/safetensors.h"
#include "tests/gpu/gpu_check_support.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using train::gpu_check::bf16;
using train::gpu_check::DeviceBuffer;
using train::gpu_check::Random;

constexpr size_t kBucketBytes = size_t{8} << 20;  // several buckets for ResNet-50, a first small one
constexpr float kLabelSmoothing = 0.1f;
constexpr float kGradientScale = 0.5f;  // as for two ranks with ncclSum

// fp32: GPU-vs-fp64 error <= max(floor, kNoiseFactor x CPU-fp32-vs-fp64 error); INFO above kUnjudged.
constexpr double kNoiseFactor = 10.0;
constexpr double kUnjudged = 0.5;
constexpr double kFloorLoss = 5e-5, kFloorGradient = 1e-3, kFloorStatistics = 1e-4;
// A tensor's bound is also at least kGroupFactor x the CPU fp32 error of its whole group (all gradients,
// all BN statistics): a single tensor's CPU error is one sample of a noisy quantity.
constexpr double kGroupFactor = 5.0;
// bf16: per-tensor gradients are judged only when CPU fp32 vs fp64 of all gradients is at most this.
constexpr double kBf16WellConditioned = 1e-4;

struct Case {
  std::string name;
  int depth, classes, batch, size;
};

// ---- metrics ------------------------------------------------------------------------------------------

struct Stats {
  double rel_l2 = 0, max_rel = 0, cosine = 1, norm_ratio_error = 0;
  bool finite = true;
};

template <typename A, typename R>
Stats compare(const A* values, const R* reference, size_t count) {
  Stats s;
  double diff2 = 0, value2 = 0, ref2 = 0, dot = 0, max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(values[i]), r = static_cast<double>(reference[i]);
    if (!std::isfinite(v) || !std::isfinite(r)) {
      if (std::isfinite(r) || !(v == r || (std::isnan(v) && std::isnan(r)))) s.finite = false;
      continue;
    }
    const double d = v - r;
    diff2 += d * d;
    value2 += v * v;
    ref2 += r * r;
    dot += v * r;
    max_diff = std::max(max_diff, std::fabs(d));
    max_ref = std::max(max_ref, std::fabs(r));
  }
  constexpr double tiny = 1e-300;
  s.rel_l2 = std::sqrt(diff2) / (std::sqrt(ref2) + tiny);
  s.max_rel = max_diff / (max_ref + tiny);
  s.cosine = (value2 == 0 && ref2 == 0) ? 1.0 : dot / (std::sqrt(value2) * std::sqrt(ref2) + tiny);
  s.norm_ratio_error = (value2 == 0 && ref2 == 0) ? 0.0 : std::fabs(std::sqrt(value2) / (std::sqrt(ref2) + tiny) - 1.0);
  if (!s.finite) {
    const double inf = std::numeric_limits<double>::infinity();
    s.rel_l2 = s.max_rel = s.norm_ratio_error = inf;
    s.cosine = -inf;
  }
  return s;
}

std::string format(const char* pattern, double a, double b = 0, double c = 0) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, a, b, c);
  return text;
}

// ---- the table ----------------------------------------------------------------------------------------

class Table {
 public:
  explicit Table(bool quiet) : quiet_(quiet) {}
  void header() const {
    std::printf("%-19s %-4s %-46s %-9s %10s %9s  %s\n", "case", "mode", "quantity", "metric", "value", "tol",
                "result  note");
    std::printf("%s\n", std::string(130, '-').c_str());
  }
  // A judged row; `detail` rows (one per tensor) are left out by --quiet when they pass.
  void row(const std::string& c, const std::string& mode, const std::string& quantity, const std::string& metric,
           double value, double tolerance, bool passed, const std::string& note = "", bool detail = false) {
    ++rows_;
    if (!passed) ++failures_;
    if (quiet_ && passed && detail) return;
    print(c, mode, quantity, metric, value, tolerance, passed ? "PASS" : "FAIL", note);
  }
  // Printed, not judged (the case cannot tell a wrong value from rounding there).
  void info(const std::string& c, const std::string& mode, const std::string& quantity, const std::string& metric,
            double value, const std::string& note, bool detail = true) {
    ++infos_;
    if (quiet_ && detail) return;
    print(c, mode, quantity, metric, value, NAN, "INFO", note);
  }
  void check(const std::string& c, const std::string& mode, const std::string& quantity, bool passed,
             const std::string& note) {
    ++rows_;
    if (!passed) ++failures_;
    std::printf("%-19s %-4s %-46s %-9s %10s %9s  %s%s%s\n", c.c_str(), mode.c_str(), quantity.c_str(), "exact", "-",
                "-", passed ? "PASS" : "FAIL", note.empty() ? "" : "  ", note.c_str());
    std::fflush(stdout);
  }
  int failures() const { return failures_; }
  int rows() const { return rows_; }
  int infos() const { return infos_; }

 private:
  void print(const std::string& c, const std::string& mode, const std::string& quantity, const std::string& metric,
             double value, double tolerance, const char* verdict, const std::string& note) const {
    char tol[16];
    if (std::isnan(tolerance)) {
      std::snprintf(tol, sizeof tol, "%9s", "-");
    } else {
      std::snprintf(tol, sizeof tol, "%9.1e", tolerance);
    }
    std::printf("%-19s %-4s %-46s %-9s %10.3e %s  %s%s%s\n", c.c_str(), mode.c_str(), quantity.c_str(),
                metric.c_str(), value, tol, verdict, note.empty() ? "" : "  ", note.c_str());
    std::fflush(stdout);
  }
  bool quiet_;
  int rows_ = 0, failures_ = 0, infos_ = 0;
};

// The worst of a group of judged comparisons, as one summary line.
struct Worst {
  std::string name, note;
  double value = 0, tolerance = 0, ratio = -1;
  int count = 0, failed = 0, unjudged = 0;
  void add(const std::string& tensor, double v, double tol, bool passed, const std::string& text) {
    ++count;
    if (!passed) ++failed;
    const double r = std::isfinite(v) ? v / tol : std::numeric_limits<double>::infinity();
    if (r > ratio) {
      ratio = r;
      name = tensor;
      value = v;
      tolerance = tol;
      note = text;
    }
  }
  void print(const std::string& c, const std::string& mode, const std::string& what, const std::string& metric) const {
    std::printf("%-19s %-4s %-46s %-9s %10.3e %9.1e  %s  worst %s (%s); %d judged, %d failed, %d INFO\n", c.c_str(),
                mode.c_str(), (what + " (summary)").c_str(), metric.c_str(), value, tolerance, "----", name.c_str(),
                note.c_str(), count, failed, unjudged);
    std::fflush(stdout);
  }
};

// ---- helpers ------------------------------------------------------------------------------------------

float round_to_bf16(float v) {
  return train::gpu_check::Element<bf16>::decode(train::gpu_check::Element<bf16>::encode(v));
}

bool same_plan(const train::comm::BucketPlan& a, const train::comm::BucketPlan& b, std::string& note) {
  if (a.total_elements != b.total_elements || a.offset_of_tensor != b.offset_of_tensor ||
      a.bucket_of_tensor != b.bucket_of_tensor || a.buckets.size() != b.buckets.size()) {
    note = "layouts differ";
    return false;
  }
  for (size_t i = 0; i < a.buckets.size(); ++i) {
    if (a.buckets[i].begin != b.buckets[i].begin || a.buckets[i].end != b.buckets[i].end ||
        a.buckets[i].tensors != b.buckets[i].tensors) {
      note = "bucket " + std::to_string(i) + " differs";
      return false;
    }
  }
  note = std::to_string(a.buckets.size()) + " buckets, " + std::to_string(a.total_elements) + " elements";
  return true;
}

// fp32 verdict of one tensor: GPU vs fp64 against 10x the CPU's own fp32 error (see the header).
struct NoiseJudgement {
  bool judged = false, passed = true;
  double value = 0, bound = 0;
  std::string note;
};
NoiseJudgement judge_fp32(const Stats& gpu, const Stats& cpu32, double floor, double group_noise = 0) {
  NoiseJudgement j;
  j.value = gpu.finite ? gpu.rel_l2 : INFINITY;
  j.bound = std::max({floor, kNoiseFactor * cpu32.rel_l2, kGroupFactor * group_noise});
  j.judged = !gpu.finite || j.bound <= kUnjudged;
  j.passed = gpu.finite && !(j.value > j.bound);
  j.note = format("cpu fp32 %.2e, cosine %.6f, max rel %.2e", cpu32.rel_l2, gpu.cosine, gpu.max_rel);
  return j;
}

// bf16 verdict by cosine and norm ratio.
bool cosine_passes(const Stats& s, double min_cosine, double max_norm_ratio_error) {
  return s.finite && s.cosine >= min_cosine && !(s.norm_ratio_error > max_norm_ratio_error);
}
std::string cosine_note(const Stats& s, double max_norm_ratio_error) {
  return format("norm ratio err %.2e (tol %.0e), rel L2 %.2e", s.norm_ratio_error, max_norm_ratio_error, s.rel_l2);
}

// ---- one case in one mode -------------------------------------------------------------------------------

template <typename T>
void run_case(const Case& c, std::uint64_t seed, train::kernels::cuda::Context& context, Table& table) {
  using train::model::CpuResNet;
  using train::model::GpuResNet;
  using train::model::TensorRole;
  constexpr bool is_bf16 = !std::is_same_v<T, float>;
  const std::string mode = is_bf16 ? "bf16" : "fp32";
  const auto started = std::chrono::steady_clock::now();

  const train::model::ResNetSpec spec = train::model::build_resnet_spec(c.depth, c.classes);
  // Each model gets a plan of its own and writes its gradients into a buffer of its own, laid out by buckets
  // made the way the engines' reducers make them.
  // TRAIN_SHARED_GRADIENT_BUFFERS=1 checks the plan (gradient buffers shared by lifetime) as train would use it.
  const train::model::GradientMemory memory =
      train::read_flag_variable(train::current_environment(), train::FlagVariable::shared_gradient_buffers)
          ? train::model::GradientMemory::shared_by_lifetime
          : train::model::GradientMemory::per_activation;
  auto plan_of = [&] { return train::model::plan_resnet(spec, c.batch, c.size, c.size, memory); };
  auto buckets_of = [&](const train::model::ResNetPlan& plan) {
    return train::comm::plan_gradient_buckets(plan.parameter_counts(), kBucketBytes);
  };
  const train::model::ResNetPlan cpu_plan = plan_of();
  train::comm::GradientBuffer<float> cpu_gradient_buffer(buckets_of(cpu_plan));
  CpuResNet<float> cpu(cpu_plan, cpu_gradient_buffer.views());
  cpu.initialize(seed);
  Random random(seed + 1);
  const size_t image_count = static_cast<size_t>(c.batch) * c.size * c.size * 3;
  std::vector<float> images = random.normal(image_count, 0.0f, 1.0f);
  const std::vector<std::int32_t> labels = random.labels(static_cast<size_t>(c.batch), c.classes);
  if (is_bf16) {
    for (float& v : images) v = round_to_bf16(v);
    for (float& v : cpu.all_values()) v = round_to_bf16(v);
  }

  const train::model::ResNetPlan gpu_plan = plan_of();
  const train::comm::BucketPlan gpu_buckets = buckets_of(gpu_plan);
  DeviceBuffer<float> gpu_reduced(gpu_buckets.total_elements);  // the NCCL reducer's buffer in the engine
  GpuResNet<T> gpu(gpu_plan, train::comm::GradientViews<float>{gpu_reduced.get(), &gpu_buckets}, context);
  gpu.upload_state(train::model::HostModelState{cpu.all_values(), cpu.all_buffers(), cpu.all_tracked()});
  DeviceBuffer<T> device_images(image_count, images);
  DeviceBuffer<std::int32_t> device_labels(labels.size(), std::vector<float>(labels.begin(), labels.end()));

  std::string note;
  const bool plan_ok = same_plan(cpu_gradient_buffer.plan(), gpu_buckets, note);
  table.check(c.name, mode, "bucket plan", plan_ok, note);

  // ---- the step: CPU fp32, CPU fp64 ("exact"), GPU ----
  std::vector<int> cpu_order, gpu_order;
  const auto cpu_result = cpu.forward_and_loss(images.data(), labels.data(), c.batch, kLabelSmoothing, kGradientScale);
  cpu.backward([&](int p) { cpu_order.push_back(p); }, {});
  const std::vector<float> cpu_gradients = cpu_gradient_buffer.values();

  train::comm::GradientBuffer<double> exact_gradient_buffer(buckets_of(cpu_plan));
  CpuResNet<double> exact(cpu_plan, exact_gradient_buffer.views());
  exact.initialize(seed);  // running statistics 0 and 1; the parameters are the fp32 model's start
  {
    std::vector<float> start = gpu.download_parameters();
    std::copy(start.begin(), start.end(), exact.all_values().begin());
  }
  const std::vector<double> images64(images.begin(), images.end());
  const auto exact_result =
      exact.forward_and_loss(images64.data(), labels.data(), c.batch, kLabelSmoothing, kGradientScale);
  exact.backward({}, {});
  const std::vector<double>& exact_gradients = exact_gradient_buffer.values();

  const std::vector<float> gpu_before = gpu.download_parameters();
  gpu.forward_and_loss(device_images.get(), device_labels.get(), c.batch, kLabelSmoothing, kGradientScale);
  gpu.backward([&](int p) { gpu_order.push_back(p); }, {});
  const auto gpu_result = gpu.read_step_result();
  const std::vector<float> gpu_gradients = gpu.download_gradients();
  // No reducer here: widen every gradient into the fp32 buffer the optimizer reads, as the engine's buckets
  // do one by one before their reductions; it must hold exactly the gradients backward wrote.
  gpu.widen_gradients(0, gpu_buckets.total_elements);
  const std::vector<float> gpu_widened = gpu.download_reduced_gradients();
  table.check(c.name, mode, "fp32 gradients the optimizer reads == backward's", gpu_widened == gpu_gradients,
              std::to_string(gpu_widened.size()) + " values");
  train::kernels::SgdOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  options.weight_decay = 1e-4;
  gpu.sgd_step(options);
  const std::vector<float> gpu_after = gpu.download_parameters();
  const std::vector<float> gpu_momentum = gpu.download_momentum();

  // ---- on_gradient order, loss, hits ----
  {
    std::vector<int> seen(static_cast<size_t>(gpu.parameter_tensors()), 0);
    bool once = gpu_order.size() == seen.size();
    for (int p : gpu_order) {
      if (p < 0 || p >= gpu.parameter_tensors() || ++seen[static_cast<size_t>(p)] > 1) once = false;
    }
    table.check(c.name, mode, "on_gradient: every parameter once, CPU order", once && gpu_order == cpu_order,
                std::to_string(gpu_order.size()) + " calls (CPU " + std::to_string(cpu_order.size()) + ")" +
                    (gpu_order == cpu_order ? "" : ", order differs"));
  }
  {
    const double error = std::fabs(gpu_result.loss - exact_result.loss) / std::fabs(exact_result.loss);
    const double cpu_error = std::fabs(cpu_result.loss - exact_result.loss) / std::fabs(exact_result.loss);
    const double tolerance = is_bf16 ? 2e-2 : std::max(kFloorLoss, kNoiseFactor * cpu_error);
    const std::string text = format("gpu %.7f, fp64 %.7f, cpu fp32 off by %.1e", gpu_result.loss, exact_result.loss,
                                    cpu_error);
    table.row(c.name, mode, "loss vs fp64", "rel err", std::isfinite(gpu_result.loss) ? error : INFINITY, tolerance,
              std::isfinite(gpu_result.loss) && !(error > tolerance), text);
  }
  {
    const int allowed = is_bf16 ? std::max(1, c.batch / 4) : 0;
    const int diff = std::abs(gpu_result.correct - cpu_result.correct);
    table.row(c.name, mode, "top-1 hits vs CPU fp32", "|diff|", diff, allowed, diff <= allowed,
              "gpu " + std::to_string(gpu_result.correct) + " cpu " + std::to_string(cpu_result.correct) + " of " +
                  std::to_string(c.batch));
  }

  // ---- gradients ----
  {
    const size_t total = std::min({gpu_gradients.size(), cpu_gradients.size(), exact_gradients.size()});
    const Stats gpu_all = compare(gpu_gradients.data(), exact_gradients.data(), total);
    const Stats cpu_all = compare(cpu_gradients.data(), exact_gradients.data(), total);
    const bool well_conditioned = cpu_all.rel_l2 <= kBf16WellConditioned;
    Worst worst;
    for (int p = 0; p < gpu.parameter_tensors(); ++p) {
      const auto& cp = cpu.parameters()[static_cast<size_t>(p)];
      const auto& gp = gpu.parameters()[static_cast<size_t>(p)];
      const std::string& name = spec.tensors[static_cast<size_t>(cp.spec_index)].name;
      const auto count = static_cast<size_t>(cp.count);
      const double* reference = exact_gradients.data() + cp.gradient_offset;
      const Stats g = compare(gpu_gradients.data() + gp.gradient_offset, reference, count);
      const Stats noise = compare(cpu_gradients.data() + cp.gradient_offset, reference, count);
      const std::string quantity = "grad " + name;
      if (!is_bf16) {
        const NoiseJudgement j = judge_fp32(g, noise, kFloorGradient, cpu_all.rel_l2);
        if (j.judged) {
          table.row(c.name, mode, quantity, "rel L2", j.value, j.bound, j.passed, j.note, /*detail=*/true);
          worst.add(name, j.value, j.bound, j.passed, j.note);
        } else {
          table.info(c.name, mode, quantity, "rel L2", j.value, j.note + "; bound " + format("%.1e", j.bound));
          ++worst.unjudged;
        }
        continue;
      }
      // bf16
      double min_cosine = 0.5, max_norm = 0.3;
      bool judged = well_conditioned;
      if (name == "fc.bias") {
        min_cosine = 0.999, max_norm = 2e-2, judged = true;
      } else if (name == "fc.weight") {
        min_cosine = 0.8, max_norm = 0.1, judged = true;
      }
      const std::string text = cosine_note(g, max_norm) + format("; cpu fp32 %.1e", noise.rel_l2);
      if (judged || !g.finite) {
        const bool passed = cosine_passes(g, min_cosine, max_norm);
        table.row(c.name, mode, quantity, "1-cosine", g.finite ? 1.0 - g.cosine : INFINITY, 1.0 - min_cosine, passed,
                  text, /*detail=*/true);
        worst.add(name, g.finite ? (1.0 - g.cosine) : INFINITY, 1.0 - min_cosine, passed, text);
      } else {
        table.info(c.name, mode, quantity, "1-cosine", 1.0 - g.cosine, text);
        ++worst.unjudged;
      }
    }
    worst.print(c.name, mode, "gradients", is_bf16 ? "1-cosine" : "rel L2");
    if (!is_bf16) {
      const NoiseJudgement j = judge_fp32(gpu_all, cpu_all, kFloorGradient);
      if (j.judged) {
        table.row(c.name, mode, "gradients, all at once, vs fp64", "rel L2", j.value, j.bound, j.passed, j.note);
      } else {
        table.info(c.name, mode, "gradients, all at once, vs fp64", "rel L2", j.value, j.note, /*detail=*/false);
      }
    } else {
      table.row(c.name, mode, "gradients, all at once, vs fp64", "norm err", gpu_all.norm_ratio_error, 0.2,
                gpu_all.finite && !(gpu_all.norm_ratio_error > 0.2),
                format("cosine %.4f, rel L2 %.2e; cpu fp32 %.1e", gpu_all.cosine, gpu_all.rel_l2, cpu_all.rel_l2));
    }
  }

  // ---- the optimizer: kernels::sgd_step (the CPU reference) on the GPU's own gradients and weights ----
  {
    std::vector<float> weights = gpu_before, momentum(gpu_before.size(), 0.0f);
    std::vector<train::kernels::SgdTensor<float>> tensors;
    for (int p = 0; p < gpu.parameter_tensors(); ++p) {
      const auto& gp = gpu.parameters()[static_cast<size_t>(p)];
      train::kernels::SgdTensor<float> tensor;
      tensor.param = weights.data() + gp.offset;
      tensor.grad = gpu_gradients.data() + gp.gradient_offset;
      tensor.momentum_buffer = momentum.data() + gp.offset;
      tensor.count = gp.count;
      tensor.weight_decay = spec.tensors[static_cast<size_t>(gp.spec_index)].decays();
      tensors.push_back(tensor);
    }
    train::kernels::sgd_step<float>(std::span<const train::kernels::SgdTensor<float>>(tensors), options);
    for (const bool of_momentum : {true, false}) {
      Worst worst;
      for (int p = 0; p < gpu.parameter_tensors(); ++p) {
        const auto& gp = gpu.parameters()[static_cast<size_t>(p)];
        const std::string& name = spec.tensors[static_cast<size_t>(gp.spec_index)].name;
        const Stats s = of_momentum ? compare(gpu_momentum.data() + gp.offset, momentum.data() + gp.offset,
                                              static_cast<size_t>(gp.count))
                                    : compare(gpu_after.data() + gp.offset, weights.data() + gp.offset,
                                              static_cast<size_t>(gp.count));
        const double value = s.finite ? s.max_rel : INFINITY;
        const bool passed = s.finite && !(value > 1e-5);
        worst.add(name, value, 1e-5, passed, format("rel L2 %.2e", s.rel_l2));
        if (!passed) {
          table.row(c.name, mode, std::string(of_momentum ? "SGD momentum " : "SGD weights ") + name, "max rel", value,
                    1e-5, false);
        }
      }
      table.row(c.name, mode,
                of_momentum ? "SGD momentum vs kernels::sgd_step (worst)" : "SGD weights vs kernels::sgd_step (worst)",
                "max rel", worst.value, 1e-5, worst.failed == 0,
                "worst " + worst.name + "; " + std::to_string(worst.count) + " tensors");
    }
  }

  // ---- BN buffers (forward quantities) ----
  {
    int tracked_mismatches = 0, tracked = 0;
    std::string tracked_note;
    Worst worst;
    double group_noise = 0;  // CPU fp32 vs fp64 over all running statistics (rel L2)
    {
      double diff2 = 0, ref2 = 0;
      for (size_t i = 0; i < spec.tensors.size(); ++i) {
        const auto& tensor = spec.tensors[i];
        if (tensor.role != TensorRole::bn_running_mean && tensor.role != TensorRole::bn_running_var) continue;
        const float* values = cpu.buffer_data(static_cast<int>(i));
        const double* reference = exact.buffer_data(static_cast<int>(i));
        for (int64_t k = 0; k < tensor.elements(); ++k) {
          diff2 += (values[k] - reference[k]) * (values[k] - reference[k]);
          ref2 += reference[k] * reference[k];
        }
      }
      group_noise = std::sqrt(diff2) / (std::sqrt(ref2) + 1e-300);
    }
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
      const auto& tensor = spec.tensors[i];
      const int index = static_cast<int>(i);
      if (tensor.role == TensorRole::bn_batches_tracked) {
        ++tracked;
        if (gpu.batches_tracked(index) != cpu.batches_tracked(index) && tracked_mismatches++ == 0) {
          tracked_note = tensor.name + ": gpu " + std::to_string(gpu.batches_tracked(index)) + " cpu " +
                         std::to_string(cpu.batches_tracked(index));
        }
        continue;
      }
      if (tensor.role != TensorRole::bn_running_mean && tensor.role != TensorRole::bn_running_var) continue;
      const std::vector<float> values = gpu.download_buffer(index);
      const Stats s = compare(values.data(), exact.buffer_data(index), values.size());
      const Stats noise = compare(cpu.buffer_data(index), exact.buffer_data(index), values.size());
      if (!is_bf16) {
        const NoiseJudgement j = judge_fp32(s, noise, kFloorStatistics, group_noise);
        if (j.judged) {
          table.row(c.name, mode, "BN " + tensor.name, "rel L2", j.value, j.bound, j.passed, j.note, /*detail=*/true);
          worst.add(tensor.name, j.value, j.bound, j.passed, j.note);
        } else {
          table.info(c.name, mode, "BN " + tensor.name, "rel L2", j.value, j.note);
          ++worst.unjudged;
        }
      } else {
        const bool passed = cosine_passes(s, 0.95, 0.1);
        const std::string text = cosine_note(s, 0.1);
        table.row(c.name, mode, "BN " + tensor.name, "1-cosine", s.finite ? 1.0 - s.cosine : INFINITY, 0.05, passed,
                  text, /*detail=*/true);
        worst.add(tensor.name, s.finite ? 1.0 - s.cosine : INFINITY, 0.05, passed, text);
      }
    }
    worst.print(c.name, mode, "BN running statistics vs fp64", is_bf16 ? "1-cosine" : "rel L2");
    table.check(c.name, mode, "BN num_batches_tracked", tracked_mismatches == 0,
                tracked_mismatches == 0 ? std::to_string(tracked) + " counters agree" : tracked_note);
  }

  // ---- from here on the CPU model holds the GPU model's state ----
  {
    train::model::HostModelState state = gpu.download_state();
    cpu.all_values() = std::move(state.parameters);
    cpu.all_buffers() = std::move(state.float_buffers);
    cpu.all_tracked() = std::move(state.tracked);
  }

  // ---- inference: both models on the same (updated) weights and running statistics ----
  {
    const size_t logit_count = static_cast<size_t>(c.batch) * c.classes;
    std::vector<float> cpu_logits(logit_count);
    cpu.infer(images.data(), c.batch, cpu_logits.data());
    DeviceBuffer<T> device_logits(logit_count);
    device_logits.poison();
    gpu.infer(device_images.get(), c.batch, device_logits.get());
    const std::vector<float> gpu_logits = device_logits.download();
    const Stats s = compare(gpu_logits.data(), cpu_logits.data(), logit_count);
    if (!is_bf16) {
      table.row(c.name, mode, "inference logits (same weights) vs CPU", "max rel", s.finite ? s.max_rel : INFINITY,
                1e-4, s.finite && !(s.max_rel > 1e-4), format("rel L2 %.2e", s.rel_l2));
    } else {
      table.row(c.name, mode, "inference logits (same weights) vs CPU", "1-cosine", s.finite ? 1.0 - s.cosine : INFINITY,
                1e-3, cosine_passes(s, 0.999, 2e-2), cosine_note(s, 2e-2));
    }
  }

  // ---- model.safetensors from the GPU model ----
  {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpu-step-check-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    const std::filesystem::path directory(pattern);
    std::string problem;
    try {
      train::model::ExportedTensors exported = gpu.export_state();
      train::model_io::ModelDescription description;
      description.num_layers = c.depth;
      description.num_classes = c.classes;
      description.input_shape = {3, c.size, c.size};
      description.version = "gpu_step_check";
      train::model_io::write_model_files(directory, exported.views(), description);
      const auto file = train::model_io::read_safetensors(
          (directory / std::string(train::model_io::model_weights_file_name)).string());
      if (!std::filesystem::exists(directory / std::string(train::model_io::model_description_file_name))) {
        problem = "model.json missing";
      }
      // The CPU model's export of the same state (model_state.cpp: the trainer's path to model files).
      train::model::ExportedTensors reference = cpu.export_state();
      if (problem.empty() && file.tensors.size() != reference.views().size()) {
        problem = std::to_string(file.tensors.size()) + " tensors in the file, the CPU export has " +
                  std::to_string(reference.views().size());
      }
      for (const auto& expected : reference.views()) {
        if (!problem.empty()) break;
        const auto* found = file.find(expected.name);
        if (found == nullptr) {
          problem = expected.name + " missing";
        } else if (found->dtype != expected.dtype || found->shape != expected.shape) {
          problem = expected.name + ": dtype or shape differs from the CPU export";
        } else if (found->data.size() != expected.byte_size() ||
                   std::memcmp(found->data.data(), expected.data, found->data.size()) != 0) {
          problem = expected.name + ": values differ from the CPU export of the same state";
        }
      }
    } catch (const std::exception& e) {
      problem = e.what();
    }
    std::error_code ignored;
    std::filesystem::remove_all(directory, ignored);
    table.check(c.name, mode, "model.safetensors = CPU export of the state", problem.empty(),
                problem.empty() ? std::to_string(spec.tensors.size()) + " tensors, names/shapes/dtypes/bytes equal"
                                : problem);
  }

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("%-19s %-4s   (GPU model: %.1f MiB of device memory; case took %.1f s)\n", c.name.c_str(), mode.c_str(),
              static_cast<double>(gpu.device_bytes()) / (1024.0 * 1024.0), seconds);
}

int usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--seed N] [--case SUBSTRING] [--mode fp32|bf16] [--quiet]\n", program);
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  // The fp32 mode must not see TF32 anywhere (set before any library initialises).
  setenv("NVIDIA_TF32_OVERRIDE", "0", 0);
  std::uint64_t seed = 20240611;
  std::string only_case, only_mode;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
      only_case = argv[++i];
    } else if (std::strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
      only_mode = argv[++i];
      if (only_mode != "fp32" && only_mode != "bf16") return usage(argv[0]);
    } else if (std::strcmp(argv[i], "--quiet") == 0) {
      quiet = true;
    } else {
      return usage(argv[0]);
    }
  }
  if (!train::gpu_check::gpu_visible("gpu_step_check")) return 2;

  const std::vector<Case> cases = {
      {"resnet50 b4 64x64", 50, 1000, 4, 64},
      {"resnet50 b4 224x224", 50, 1000, 4, 224},
      {"resnet18 b8 32x32", 18, 10, 8, 32},
  };
  try {
    int device = 0;
    TRAIN_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp properties{};
    TRAIN_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    std::printf("gpu_step_check: device %d: %s (sm_%d%d), seed %llu\n", device, properties.name, properties.major,
                properties.minor, static_cast<unsigned long long>(seed));
    cudaStream_t stream = nullptr;
    TRAIN_CUDA_CHECK(cudaStreamCreate(&stream));
    Table table(quiet);
    {
      train::kernels::cuda::Context context(stream);
      table.header();
      for (const Case& c : cases) {
        if (!only_case.empty() && c.name.find(only_case) == std::string::npos) continue;
        for (const char* mode : {"fp32", "bf16"}) {
          if (!only_mode.empty() && only_mode != mode) continue;
          try {
            if (std::strcmp(mode, "fp32") == 0) {
              run_case<float>(c, seed, context, table);
            } else {
              run_case<bf16>(c, seed, context, table);
            }
          } catch (const std::exception& e) {
            table.check(c.name, mode, "the case ran to the end", false, std::string("error: ") + e.what());
            // A CUDA error may leave the stream unusable: stop rather than report noise.
            if (cudaGetLastError() != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess) throw;
          }
        }
      }
      TRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    TRAIN_CUDA_CHECK(cudaStreamDestroy(stream));
    if (table.rows() == 0) {
      std::fprintf(stderr, "gpu_step_check: nothing selected by --case/--mode\n");
      return 64;
    }
    std::printf("\ngpu_step_check: %d of %d checks passed (%d INFO rows not judged)%s\n",
                table.rows() - table.failures(), table.rows(), table.infos(),
                table.failures() == 0 ? "" : " -- FAILURES above");
    return table.failures() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_step_check: %s\n", e.what());
    return 1;
  }
}
