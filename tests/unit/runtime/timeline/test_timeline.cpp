// The timeline's pieces that need no MPI: the step range (hyperparameter and TRAIN_TIMELINE), the layer
// groups and the passes' marks, the loader's timing, the marks' conversion into events (a CPU row and a GPU
// row: the GPU's marks are converted by this same code), the summary and the trace JSON.
#include "common/config_error.h"
#include "job/hyperparameters.h"
#include "job/step_range.h"
#include "runtime/comm/gradient_buckets.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/model/cpu_resnet.h"
#include "runtime/timeline/step_marks.h"
#include "runtime/timeline/timeline_summary.h"
#include "runtime/timeline/trace_json.h"
#include "job/training_requirements.h"
#include "runtime/training_settings.h"
#include "tests/unit/test_data_helpers.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <set>

using namespace train;
using namespace train::timeline;
using train::model::Pass;

TEST_CASE("timeline: step ranges", "[timeline]") {
  CHECK(parse_step_range("11-20") == StepRange{11, 20});
  CHECK(parse_step_range(" 3 - 7 ") == StepRange{3, 7});
  CHECK(parse_step_range("15") == StepRange{15, 15});
  CHECK(parse_step_range("1-200") == StepRange{1, 200});
  for (const char* bad : {"", "0-5", "5-3", "a-b", "-5", "1-201", "+1-2", "1-", "1--2", "1-2-3", "1.5-2", "1 2"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_step_range(bad));
  }
}

TEST_CASE("timeline: the timeline_steps hyperparameter and TRAIN_TIMELINE", "[timeline]") {
  auto parse = [](const char* value) {
    return parse_hyperparameters(nlohmann::json{{"timeline_steps", value}}, "hyperparameters.json");
  };
  CHECK(parse("11-20").timeline_steps == StepRange{11, 20});
  CHECK(parse("15").timeline_steps == StepRange{15, 15});       // decodes to a number
  CHECK(parse("\"4-6\"").timeline_steps == StepRange{4, 6});    // the SDK's quoting
  CHECK_FALSE(parse_hyperparameters(nlohmann::json::object(), "h").timeline_steps);  // off by default
  try {
    parse("20-10");
    FAIL("accepted 20-10");
  } catch (const ConfigError& error) {
    CHECK_THAT(error.what(), Catch::Contains("hyperparameter `timeline_steps`: expected a range of steps \"FIRST-LAST\" "
                                             "such as \"11-20\" (1-based, both included, at most 200 steps), or one "
                                             "step, got \"20-10\""));
  }
  CHECK_THROWS_AS(parse("0"), ConfigError);
  CHECK_THROWS_AS(parse("1-300"), ConfigError);

  const Hyperparameters none = parse_hyperparameters(nlohmann::json::object(), "h");
  const Hyperparameters some = parse("5-9");
  CHECK_FALSE(timeline_steps(none, {}));
  CHECK(timeline_steps(some, {}) == StepRange{5, 9});
  CHECK(timeline_steps(none, {{"TRAIN_TIMELINE", "2-4"}}) == StepRange{2, 4});
  CHECK(timeline_steps(some, {{"TRAIN_TIMELINE", "5-9"}}) == StepRange{5, 9});
  CHECK(timeline_steps(some, {{"TRAIN_TIMELINE", ""}}) == StepRange{5, 9});
  CHECK_THROWS_WITH(timeline_steps(some, {{"TRAIN_TIMELINE", "5-8"}}),
                    Catch::Contains("hyperparameter `timeline_steps` (5-9) and environment variable TRAIN_TIMELINE "
                                    "(\"5-8\") ask for different steps; set only one"));
  CHECK_THROWS_WITH(timeline_steps(none, {{"TRAIN_TIMELINE", "soon"}}),
                    Catch::Contains("environment variable TRAIN_TIMELINE: expected a range of steps"));
}

TEST_CASE("timeline: layer groups of every ResNet", "[timeline]") {
  for (int depth : {18, 50, 152}) {
    const model::ResNetSpec spec = model::build_resnet_spec(depth, 10);
    int previous = 0;
    std::set<int> seen;
    for (const auto& layer : spec.layers) {
      CAPTURE(depth, layer.name);
      CHECK(layer.group >= previous);  // forward order: stem, layer1..4, head
      previous = layer.group;
      seen.insert(layer.group);
      if (layer.name.rfind("layer", 0) == 0) CHECK(model::layer_group_name(layer.group) == layer.name.substr(0, 6));
    }
    CHECK(seen.size() == static_cast<size_t>(model::layer_groups));
    CHECK(spec.layers.front().group == 0);
    CHECK(std::string(model::layer_group_name(spec.layers.back().group)) == "head");
  }
}

TEST_CASE("timeline: the passes mark each layer group forward and backward, only when asked", "[timeline]") {
  model::ResNetPlan plan =
      model::plan_resnet(model::build_resnet_spec(18, 10), 2, 32, 32, model::GradientMemory::per_activation);
  comm::GradientBuffer<float> gradient_buffer(plan.parameter_counts(), size_t{1} << 20);
  model::CpuResNet<float> model(std::move(plan), gradient_buffer.views());
  model.initialize(3);
  std::vector<float> images(2 * 32 * 32 * 3, 0.5f);
  const std::vector<int32_t> labels = {1, 2};
  std::vector<std::pair<Pass, int>> marks;
  int gradients_before_backward_end = 0, gradients = 0;
  model.set_pass_marks([&](Pass pass, int group) {
    marks.emplace_back(pass, group);
    if (pass == Pass::backward && group < 0) gradients_before_backward_end = gradients;
  });
  model.forward_and_loss(images.data(), labels.data(), 2, 0.0f, 1.0f);
  model.backward([&](int) { ++gradients; }, {});
  const std::vector<std::pair<Pass, int>> expected = {
      {Pass::forward, 0}, {Pass::forward, 1},  {Pass::forward, 2},  {Pass::forward, 3},  {Pass::forward, 4},
      {Pass::forward, 5}, {Pass::forward, -1}, {Pass::backward, 5}, {Pass::backward, 4}, {Pass::backward, 3},
      {Pass::backward, 2}, {Pass::backward, 1}, {Pass::backward, 0}, {Pass::backward, -1}};
  CHECK(marks == expected);
  CHECK(gradients_before_backward_end == model.parameter_tensors());
  marks.clear();
  std::vector<float> logits(20);
  model.infer(images.data(), 2, logits.data());  // inference is never marked
  model.set_pass_marks({});
  model.forward_and_loss(images.data(), labels.data(), 2, 0.0f, 1.0f);
  model.backward({}, {});
  CHECK(marks.empty());
}

namespace {

class PieceCollector final : public data::LoaderObserver {
 public:
  bool active() const override { return on; }
  void loaded(const data::LoadedPiece& piece) override {
    std::lock_guard<std::mutex> lock(mutex);
    pieces.push_back(piece);
  }
  std::atomic<bool> on{true};
  std::mutex mutex;
  std::vector<data::LoadedPiece> pieces;
};

}  // namespace

TEST_CASE("timeline: the loader's threads report each batch's pieces with read, decode and augment times",
          "[timeline]") {
  data::testing::TempDir dir;
  for (const char* cls : {"a", "b"}) {
    dir.mkdir(std::string("root/") + cls);
    for (int i = 0; i < 6; ++i) data::testing::write_png(dir / (std::string("root/") + cls + "/" + std::to_string(i) + ".png"), 40, 30, i);
  }
  data::ImageFolderOptions image;
  image.height = image.width = 16;
  auto source = std::make_shared<data::ImageFolderSource>(data::scan_image_folder(dir / "root"), image);
  auto observer = std::make_shared<PieceCollector>();
  data::LoaderOptions options;
  options.batch_size = 5;
  options.threads = 3;
  options.epochs = 1;
  options.observer = observer;
  data::BatchLoader loader(source, options);
  data::Batch batch;
  std::map<std::pair<int64_t, int64_t>, int> sizes;
  while (loader.next(batch, std::chrono::seconds(10)) == data::BatchLoader::Status::batch) {
    // Every piece of a batch is in by the time the batch is handed over.
    std::lock_guard<std::mutex> lock(observer->mutex);
    int samples = 0;
    for (const auto& piece : observer->pieces) {
      if (piece.epoch == batch.position.epoch && piece.index == batch.position.index) samples += piece.samples;
    }
    CHECK(samples == batch.size);
    sizes[{batch.position.epoch, batch.position.index}] = batch.size;
  }
  CHECK(sizes.size() == 3);  // 12 images in batches of 5
  for (const auto& piece : observer->pieces) {
    CHECK(piece.thread >= 0);
    CHECK(piece.thread < 3);
    CHECK(piece.end_ns >= piece.begin_ns);
    for (int s = 0; s < data::sample_stages; ++s) CHECK(piece.stages.nanoseconds[s] > 0);  // read, decode, augment
    CHECK(piece.stages.nanoseconds[0] + piece.stages.nanoseconds[1] + piece.stages.nanoseconds[2] <=
          (piece.end_ns - piece.begin_ns) + 1);
  }

  observer->on = false;  // inactive: nothing is timed
  observer->pieces.clear();
  data::BatchLoader quiet(source, options);
  while (quiet.next(batch, std::chrono::seconds(10)) == data::BatchLoader::Status::batch) {}
  CHECK(observer->pieces.empty());
}

namespace {

// A row of marks, every one `gap` ns after the one before it in the order a step meets them.
struct RowBuilder {
  StepMarkLayout layout;
  std::vector<int64_t> row;
  int64_t now;
  RowBuilder(size_t buckets, int64_t start) : now(start) {
    layout.buckets = buckets;
    row.assign(layout.per_step(), 0);
  }
  void at(size_t slot, int64_t step = 10) { row[slot] = now += step; }
};

std::vector<int64_t> step_row(size_t buckets, int64_t start, bool device) {
  RowBuilder r(buckets, start);
  const StepMarkLayout& l = r.layout;
  if (device) {
    r.at(l.at(Mark::upload_begin));
    r.at(l.at(Mark::upload_end));
    r.at(l.at(Mark::compute_begin));
  }
  r.at(l.at(Mark::forward_begin), 20);
  for (int g = 0; g < model::layer_groups; ++g) r.at(l.forward_group(g));
  r.at(l.at(Mark::forward_end));
  for (int g = model::layer_groups - 1; g >= 0; --g) {
    r.at(l.backward_group(g), g == model::layer_groups - 1 ? 5 : 10);
    if (g == 4) r.at(l.bucket_start(0), 1);  // bucket 0 starts inside backward
  }
  r.at(l.at(Mark::backward_end));
  r.at(l.bucket_end(0), 30);
  r.at(l.at(Mark::reductions_done), 5);
  r.at(l.at(Mark::optimizer_end), 10);
  return r.row;
}

const TraceEvent& find(const std::vector<TraceEvent>& events, const std::string& name, size_t nth = 0) {
  for (const auto& event : events) {
    if (event.name == name && nth-- == 0) return event;
  }
  FAIL("no event " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("timeline: a CPU step's marks become the compute track's spans and the bucket's", "[timeline]") {
  RecordedSteps recorded;
  recorded.layout.buckets = 1;
  recorded.bucket_bytes = {4096};
  recorded.marks = step_row(1, 1000, false);
  std::vector<TraceEvent> events;
  size_t skipped = 0;
  append_step_events(recorded, 7, events, &skipped);
  CHECK(skipped == 0);
  const StepMarkLayout& l = recorded.layout;
  const int64_t* m = recorded.marks.data();
  const TraceEvent& forward = find(events, "forward");
  CHECK(forward.category == TraceCategory::compute);
  CHECK(forward.track == track::compute);
  CHECK(forward.begin_ns == m[l.at(Mark::forward_begin)]);
  CHECK(forward.end_ns == m[l.at(Mark::forward_end)]);
  CHECK(find(events, "forward stem").begin_ns == m[l.forward_group(0)]);
  CHECK(find(events, "forward head").end_ns == m[l.at(Mark::forward_end)]);
  CHECK(find(events, "loss").end_ns == m[l.backward_group(5)]);
  CHECK(find(events, "backward head").end_ns == m[l.backward_group(4)]);
  CHECK(find(events, "backward stem").end_ns == m[l.at(Mark::backward_end)]);
  const TraceEvent& wait = find(events, "waiting for reductions");
  CHECK(wait.category == TraceCategory::exposed_communication);
  CHECK(wait.duration_ns() == m[l.at(Mark::reductions_done)] - m[l.at(Mark::backward_end)]);
  const TraceEvent& bucket = find(events, "allreduce bucket 0");
  CHECK(bucket.track == track::bucket(0));
  CHECK(bucket.args == std::vector<std::pair<std::string, double>>{{"bytes", 4096.0}, {"step", 7.0}});
  CHECK(bucket.begin_ns < find(events, "backward").end_ns);
  for (const auto& event : events) CHECK(event.category != TraceCategory::step);  // the trainer's steps count on the CPU
}

TEST_CASE("timeline: a GPU's marks make the compute stream's steps, waits for input and uploads", "[timeline]") {
  RecordedSteps recorded;
  recorded.device = true;
  recorded.layout.buckets = 1;
  recorded.upload_bytes = 1234;
  recorded.marks = step_row(1, 1000, true);
  const std::vector<int64_t> second = step_row(1, recorded.marks[recorded.layout.at(Mark::optimizer_end)] + 500, true);
  recorded.marks.insert(recorded.marks.end(), second.begin(), second.end());
  std::vector<int64_t> broken = step_row(1, second[recorded.layout.at(Mark::optimizer_end)] + 500, true);
  std::swap(broken[recorded.layout.at(Mark::forward_end)], broken[recorded.layout.at(Mark::backward_end)]);
  recorded.marks.insert(recorded.marks.end(), broken.begin(), broken.end());
  std::vector<TraceEvent> events;
  size_t skipped = 0;
  append_step_events(recorded, 3, events, &skipped);
  CHECK(skipped == 1);  // marks out of order: left out, counted
  const StepMarkLayout& l = recorded.layout;
  const int64_t* first = recorded.row(0);
  const TraceEvent& step3 = find(events, "step 3");
  const TraceEvent& step4 = find(events, "step 4");
  CHECK(step3.category == TraceCategory::step);
  CHECK(step3.begin_ns == first[l.at(Mark::compute_begin)]);  // the first: from the stream reaching it
  CHECK(step4.begin_ns == step3.end_ns);                        // then from the previous step's end
  const TraceEvent& input = find(events, "waiting for input", 1);
  CHECK(input.category == TraceCategory::data_wait);
  CHECK(input.begin_ns == step3.end_ns);
  CHECK(input.end_ns == recorded.row(1)[l.at(Mark::forward_begin)]);
  const TraceEvent& upload = find(events, "host-to-device copy");
  CHECK(upload.track == track::copy);
  CHECK(upload.args.front() == std::pair<std::string, double>{"bytes", 1234.0});
  // On the GPU the counted spans tile the step exactly.
  const TimelineSummary summary = summarize_timeline(events);
  CHECK(summary.steps == 2);
  CHECK(summary.other_seconds() == Approx(0).margin(1e-12));
  CHECK(summary.step_seconds == Approx((step4.end_ns - step3.begin_ns) * 1e-9));
}

TEST_CASE("timeline: the summary counts within steps and leaves pauses out", "[timeline]") {
  auto span = [](const char* name, TraceCategory category, int64_t begin, int64_t end) {
    return TraceEvent{name, category, track::trainer, begin, end, {}};
  };
  const std::vector<TraceEvent> events = {
      span("step 1", TraceCategory::step, 0, 1000),
      span("waiting for data", TraceCategory::data_wait, 0, 100),
      span("forward", TraceCategory::compute, 100, 500),
      span("waiting for reductions", TraceCategory::exposed_communication, 500, 700),
      span("optimizer", TraceCategory::compute, 700, 950),
      span("step 2", TraceCategory::step, 1000, 3000),
      span("waiting for data", TraceCategory::data_wait, 1000, 1600),  // 500 of it in the validation
      span("validation", TraceCategory::pause, 1100, 1400),
      span("checkpoint", TraceCategory::pause, 1300, 1600),           // overlapping pauses count once
      span("forward", TraceCategory::compute, 1600, 2900),
      span("backward layer4", TraceCategory::detail, 1700, 1800),      // detail: not counted
      span("outside", TraceCategory::compute, 5000, 6000),             // in no step
  };
  const TimelineSummary summary = summarize_timeline(events);
  CHECK(summary.steps == 2);
  CHECK(summary.step_seconds == Approx(2500e-9));
  CHECK(summary.data_wait_seconds == Approx(200e-9));
  CHECK(summary.compute_seconds == Approx(1950e-9));
  CHECK(summary.exposed_communication_seconds == Approx(200e-9));
  CHECK(summary.other_seconds() == Approx(150e-9));
  CHECK(format_summary_line(1, "algo-2", "1-2", summary) ==
        "timeline rank=1 host=algo-2 steps=1-2 step_ms=0.00 data_wait=8.0% compute=78.0% exposed_communication=8.0% "
        "other=6.0%");
}

TEST_CASE("timeline: trace JSON with the rank's clock put on rank 0's", "[timeline]") {
  const std::vector<TraceEvent> events = {
      {"forward \"quoted\"", TraceCategory::compute, track::compute, 2'000'500, 2'003'750, {{"bytes", 8.0}}},
      {"loader (ms per batch, all threads)", TraceCategory::counter, track::counters, 2'100'000, 2'100'000,
       {{"read", 1.5}}},
      {"early", TraceCategory::detail, track::bucket(2), 900, 1000, {}},
  };
  const TraceClock clock{-1'000, 1'000'000};  // this rank's clock is 1 us ahead of rank 0's
  const std::string document = trace_document({trace_events_json(events, 3, "rank 3 (algo-2)", clock, true)},
                                              {{"timeline", {{"steps", "1-2"}}}});
  const nlohmann::json parsed = nlohmann::json::parse(document);
  CHECK(parsed["displayTimeUnit"] == "ms");
  CHECK(parsed["otherData"]["timeline"]["steps"] == "1-2");
  std::map<std::string, nlohmann::json> by_name;
  std::set<std::string> threads;
  for (const auto& event : parsed["traceEvents"]) {
    CHECK(event["pid"] == 3);
    if (event["ph"] == "M" && event["name"] == "thread_name") threads.insert(event["args"]["name"]);
    if (event["ph"] != "M") by_name[event["name"]] = event;
  }
  CHECK(threads == std::set<std::string>{"GPU compute stream", "GPU communication stream: bucket 2 allreduce"});
  const auto& forward = by_name.at("forward \"quoted\"");
  CHECK(forward["ph"] == "X");
  CHECK(forward["cat"] == "compute");
  CHECK(forward["ts"].get<double>() == Approx(999.5));  // (2'000'500 - 1'000 - 1'000'000) ns
  CHECK(forward["dur"].get<double>() == Approx(3.25));
  CHECK(forward["args"]["bytes"] == 8.0);
  CHECK(by_name.at("loader (ms per batch, all threads)")["ph"] == "C");
  CHECK(by_name.at("early")["ts"].get<double>() == Approx(-1000.1));  // before the origin: negative
  CHECK(document.find("\"ts\":-1000.100") != std::string::npos);
}

TEST_CASE("timeline: a GPU's timestamps on the host's clock keep their order, drift included", "[timeline]") {
  const int64_t epoch = 1'764'000'000'000'000'000;  // a device timer counting from 1970, as %globaltimer does
  const ClockReading first{epoch, epoch - 5'000'000'000};          // the host's clock read 5 s since its boot
  const ClockReading same = first;
  const std::vector<int64_t> device = {epoch + 10, 0, epoch + 10, epoch + 11, epoch + 1'000'000};
  CHECK(device_times_on_host(device, first, same) ==
        std::vector<int64_t>{5'000'000'010, 0, 5'000'000'010, 5'000'000'011, 5'001'000'000});
  // 2 us of drift over 10 s: halfway through, half of it.
  const ClockReading last{epoch + 10'000'000'000, first.device_minus_host_ns + 2'000};
  const auto host = device_times_on_host({epoch + 5'000'000'000, epoch + 10'000'000'000}, first, last);
  CHECK(host[0] == 10'000'000'000 - 1'000);
  CHECK(host[1] == 15'000'000'000 - 2'000);
  std::vector<int64_t> dense;
  for (int64_t t = 0; t < 20'000; t += 7) dense.push_back(epoch + 4'999'990'000 + t);
  const ClockReading backwards{epoch + 10'000'000'000, first.device_minus_host_ns - 3'000'000};  // drift either way
  for (const ClockReading& end : {last, backwards}) {
    const auto mapped = device_times_on_host(dense, first, end);
    for (size_t i = 1; i < mapped.size(); ++i) CHECK(mapped[i] >= mapped[i - 1]);
  }
}
