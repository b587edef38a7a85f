// model_check: one training step of train's CPU ResNet on given weights and a given batch, writing
// everything a comparison with PyTorch needs. Used by test_model_vs_torch.py.
//
//   model_check DEPTH CLASSES PRECISION WEIGHTS.safetensors BATCH.safetensors OUT.safetensors LABEL_SMOOTHING [SCALE]
//
// PRECISION is float (what training uses) or double (the same code in fp64, for an exact comparison). SCALE
// (default 1) multiplies the loss gradient, as a rank of R ranks scales it by 1/R.
//
//   model_check infer DEPTH CLASSES WEIGHTS.safetensors BATCH.safetensors OUT.safetensors
//
// writes only "eval_logits": inference-mode logits of the float model with the given weights.
// BATCH holds "images" F32 [N,H,W,3] (NHWC) and "labels" I64 [N]. OUT gets "loss" [1], "grad.<name>" for
// every parameter, "state.<name>" for every parameter and buffer after the step (BN running statistics
// updated), "decision.relu.K" and "decision.pool.K" (which way each ReLU and max-pool window decided:
// export_decisions), and "eval_logits" [N,CLASSES] from inference mode after the step.
#include "runtime/model/cpu_resnet.h"
#include "runtime/model/model_state.h"
#include "runtime/model_io/safetensors.h"

#include <fmt/format.h>

#include <cstdlib>
#include <iostream>

using namespace train;
using namespace train::model;

namespace {

// What the training pass decided at every kink, in forward order: "decision.relu.K" (1 where the K-th ReLU
// passed its input, else 0; NHWC) and "decision.pool.K" (the input index each window took). Read before
// inference overwrites the activations.
template <typename T>
ExportedTensors export_decisions(const CpuResNet<T>& model) {
  ExportedTensors out;
  int relus = 0, pools = 0;
  const auto& layers = model.plan().spec.layers;
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& shape = model.activation_shape(layers[l].output);
    const std::vector<int64_t> dims{shape.n, shape.h, shape.w, shape.c};
    if (layers[l].kind == LayerKind::relu) {
      const T* y = model.activation(layers[l].output);
      std::vector<float> passed(static_cast<size_t>(shape.size()));
      for (size_t i = 0; i < passed.size(); ++i) passed[i] = y[i] > T(0) ? 1.0f : 0.0f;
      out.add(fmt::format("decision.relu.{}", relus++), dims, std::move(passed));
    } else if (layers[l].kind == LayerKind::max_pool) {
      const int32_t* winners = model.max_pool_winners(l);
      out.add(fmt::format("decision.pool.{}", pools++), dims,
              std::vector<float>(winners, winners + shape.size()));
    }
  }
  return out;
}

template <typename T>
int run(int depth, int classes, const model_io::SafetensorsFile& weights, const model_io::SafetensorsFile& batch,
        const char* out_path, T smoothing, T scale) {
  const model_io::Tensor* images = batch.find("images");
  const model_io::Tensor* labels = batch.find("labels");
  if (images == nullptr || labels == nullptr || images->shape.size() != 4) {
    throw std::runtime_error("BATCH needs images [N,H,W,3] and labels [N]");
  }
  const int n = static_cast<int>(images->shape[0]);
  std::vector<float> as_float = images->to_float();
  std::vector<T> pixels(as_float.begin(), as_float.end());
  std::vector<int32_t> targets;
  for (int64_t label : labels->to_int64()) targets.push_back(static_cast<int32_t>(label));

  ResNetPlan plan = plan_resnet(build_resnet_spec(depth, classes), n, static_cast<int>(images->shape[1]),
                                static_cast<int>(images->shape[2]));
  comm::GradientBuffer<T> gradients(plan.parameter_counts(), size_t{25} << 20);
  CpuResNet<T> model(std::move(plan), gradients.views());
  model.initialize(1);
  model.import_state(weights.tensors);
  int reported = 0;
  auto result = model.forward_and_loss(pixels.data(), targets.data(), n, smoothing, scale);
  model.backward([&](int) { ++reported; }, [] {});
  if (reported != model.parameter_tensors()) {
    throw std::runtime_error(fmt::format("backward reported {} gradients for {} parameters", reported,
                                         model.parameter_tensors()));
  }
  ExportedTensors decisions = export_decisions(model);
  std::vector<T> eval_logits(static_cast<size_t>(n) * classes);
  model.infer(pixels.data(), n, eval_logits.data());

  ExportedTensors out = export_gradients(model.plan(), gradients.plan(), gradients.values().data(), "grad.");
  ExportedTensors state = model.export_state();
  std::vector<model_io::TensorView> views = out.views();
  for (auto view : state.views()) {
    view.name = "state." + view.name;
    views.push_back(view);
  }
  for (const auto& view : decisions.views()) views.push_back(view);
  out.add("loss", {1}, std::vector<T>{static_cast<T>(result.loss)});
  out.add("eval_logits", {n, classes}, eval_logits);
  views.push_back(out.views()[out.views().size() - 2]);
  views.push_back(out.views().back());
  model_io::write_safetensors(out_path, views);
  return 0;
}

}  // namespace

int infer(int depth, int classes, const model_io::SafetensorsFile& weights, const model_io::SafetensorsFile& batch,
          const char* out_path) {
  const model_io::Tensor* images = batch.find("images");
  if (images == nullptr || images->shape.size() != 4) throw std::runtime_error("BATCH needs images [N,H,W,3]");
  const int n = static_cast<int>(images->shape[0]);
  std::vector<float> pixels = images->to_float();
  ResNetPlan plan = plan_resnet(build_resnet_spec(depth, classes), std::max(n, 2), static_cast<int>(images->shape[1]),
                                static_cast<int>(images->shape[2]));
  comm::GradientBuffer<float> gradients(plan.parameter_counts(), size_t{25} << 20);
  CpuResNet<float> model(std::move(plan), gradients.views());
  model.import_state(weights.tensors);
  std::vector<float> logits(static_cast<size_t>(n) * classes);
  model.infer(pixels.data(), n, logits.data());
  model_io::write_safetensors(out_path, {{"eval_logits", model_io::Dtype::F32, {n, classes}, logits.data()}});
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 7 && std::string(argv[1]) == "infer") {
    try {
      return infer(std::atoi(argv[2]), std::atoi(argv[3]), model_io::read_safetensors(argv[4]),
                   model_io::read_safetensors(argv[5]), argv[6]);
    } catch (const std::exception& error) {
      std::cerr << "model_check: " << error.what() << "\n";
      return 1;
    }
  }
  if (argc != 8 && argc != 9) {
    std::cerr << "usage: model_check DEPTH CLASSES float|double WEIGHTS BATCH OUT LABEL_SMOOTHING [SCALE]\n";
    return 64;
  }
  try {
    const int depth = std::atoi(argv[1]);
    const int classes = std::atoi(argv[2]);
    const std::string precision = argv[3];
    auto weights = model_io::read_safetensors(argv[4]);
    auto batch = model_io::read_safetensors(argv[5]);
    const double smoothing = std::strtod(argv[7], nullptr);
    const double scale = argc == 9 ? std::strtod(argv[8], nullptr) : 1.0;
    if (precision == "double") return run<double>(depth, classes, weights, batch, argv[6], smoothing, scale);
    if (precision == "float") return run<float>(depth, classes, weights, batch, argv[6], static_cast<float>(smoothing),
                                                    static_cast<float>(scale));
    throw std::runtime_error("PRECISION must be float or double, got " + precision);
  } catch (const std::exception& error) {
    std::cerr << "model_check: " << error.what() << "\n";
    return 1;
  }
}
