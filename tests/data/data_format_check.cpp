// Checks that data sets written by the converter scripts read back as the reference image folder does:
//   data_format_check REFERENCE_FOLDER CHANNEL[:LIST_CHANNEL] ...
// For every channel (detected format; LIST_CHANNEL is the .lst channel of an image list) the batches of
// two shuffled, augmented epochs on 1 and 3 ranks must equal the reference's bit for bit. Exit 0 when they
// all do, 1 (saying which and where) when one differs or cannot be read.
#include "runtime/data/batch_loader.h"
#include "runtime/data/data_channel.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

using namespace train::data;

namespace {

std::vector<Batch> batches_of(std::shared_ptr<const SampleSource> source, int rank, int ranks) {
  LoaderOptions options;
  options.batch_size = 16;
  options.threads = 2;
  options.epochs = 2;
  options.seed = 1234;
  options.rank = rank;
  options.ranks = ranks;
  BatchLoader loader(std::move(source), options);
  std::vector<Batch> batches;
  for (;;) {
    Batch batch;
    const auto status = loader.next(batch, std::chrono::seconds(60));
    if (status != BatchLoader::Status::batch) {
      if (status != BatchLoader::Status::end) throw std::runtime_error("the loader timed out");
      return batches;
    }
    batches.push_back(std::move(batch));
  }
}

std::string compare(const std::vector<Batch>& expected, const std::vector<Batch>& found) {
  if (expected.size() != found.size()) return fmt::format("{} batches instead of {}", found.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].samples != found[i].samples) return fmt::format("batch {}: other samples", i);
    if (expected[i].labels != found[i].labels) return fmt::format("batch {}: other labels", i);
    if (expected[i].images != found[i].images) return fmt::format("batch {}: other pixels", i);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s REFERENCE_FOLDER CHANNEL[:LIST_CHANNEL] ...\n", argv[0]);
    return 2;
  }
  try {
    DataOptions options;
    options.image.height = options.image.width = 24;
    const auto reference = open_channel(argv[1], std::nullopt, DataFormat::image_folder, options);
    int failures = 0;
    for (int a = 2; a < argc; ++a) {
      const std::string argument = argv[a];
      const size_t colon = argument.find(':');
      const std::string channel = argument.substr(0, colon);
      const auto list = colon == std::string::npos ? std::nullopt : std::optional<std::string>(argument.substr(colon + 1));
      const auto opened = open_channel(channel, list, DataFormat::detect, options);
      for (int ranks : {1, 3}) {
        for (int rank = 0; rank < ranks; ++rank) {
          const std::string difference = compare(batches_of(reference.source, rank, ranks), batches_of(opened.source, rank, ranks));
          if (!difference.empty()) {
            std::printf("FAILED: %s (%s) differs from %s on rank %d of %d: %s\n", channel.c_str(),
                        data_format_name(opened.layout.format), argv[1], rank, ranks, difference.c_str());
            ++failures;
          }
        }
      }
      std::printf("%s: %s, %s; %lld samples\n", channel.c_str(), data_format_name(opened.layout.format),
                  opened.layout.why.c_str(), static_cast<long long>(opened.source->size()));
    }
    if (failures == 0) std::printf("every format gives the reference's batches\n");
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::printf("FAILED: %s\n", error.what());
    return 1;
  }
}
