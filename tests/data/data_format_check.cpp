// Checks that data sets written by the converter scripts read back as the reference image folder does:
//   data_format_check REFERENCE_FOLDER CHANNEL[:LIST_CHANNEL] ... [--pipe RECORD_FOLDER ...]
// For every channel (detected format; LIST_CHANNEL is the .lst channel of an image list) the batches of
// two shuffled, augmented epochs on 1 and 3 ranks must equal the reference's bit for bit. Every
// RECORD_FOLDER (TFRecord or RecordIO files) is also streamed through Pipe-mode FIFOs, as is and wrapped in
// RecordIO records (RecordWrapperType=RecordIO), dealt by the Pipe dealer to 1 and 3 ranks: the batches of
// two augmented epochs must equal the reference's read in order (Pipe mode streams, it cannot shuffle).
// Exit 0 when they all do, 1 (saying which and where) when one differs or cannot be read.
#include "runtime/data/loader/batch_loader.h"
#include "runtime/data/pipe/pipe_dealer.h"
#include "runtime/data/sources/data_channel.h"
#include "tests/unit/test_data_record_writers.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using train::DataFormat;
using train::data_format_name;
using namespace train::data;

namespace {

constexpr int kEpochs = 2;

LoaderOptions loader_options(int rank, int ranks) {
  LoaderOptions options;
  options.batch_size = 16;
  options.threads = 2;
  options.epochs = kEpochs;
  options.seed = 1234;
  options.rank = rank;
  options.ranks = ranks;
  return options;
}

std::vector<Batch> drain(BatchLoader& loader) {
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

std::vector<Batch> batches_of(std::shared_ptr<const SampleSource> source, int rank, int ranks, bool shuffle = true) {
  LoaderOptions options = loader_options(rank, ranks);
  options.shuffle = shuffle;
  BatchLoader loader(std::move(source), options);
  return drain(loader);
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// SageMaker's part: FIFOs <dir>/train_0, _1 streaming the files back to back, each object optionally
// wrapped in one RecordIO record.
void feed_fifos(const std::string& dir, const std::vector<std::string>& files, bool wrap) {
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    const std::string path = fmt::format("{}/train_{}", dir, epoch);
    if (::mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path);
    const int fd = ::open(path.c_str(), O_WRONLY);  // waits for the dealer to open it
    if (fd < 0) throw std::runtime_error("open " + path);
    for (const auto& file : files) {
      std::vector<uint8_t> bytes = file_bytes(file);
      if (wrap) bytes = train::data::testing::recordio(bytes);
      for (size_t done = 0; done < bytes.size();) {
        const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (wrote <= 0) throw std::runtime_error("write " + path);
        done += static_cast<size_t>(wrote);
      }
    }
    ::close(fd);
  }
}

// The batches each of `ranks` ranks gets from the files streamed through Pipe-mode FIFOs.
std::vector<std::vector<Batch>> pipe_batches(const std::vector<std::string>& files, bool wrap, int ranks,
                                             const ImageFolderOptions& image, int classes) {
  char pattern[] = "/tmp/pipe-check-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp");
  const std::string dir = pattern;
  std::exception_ptr feeder_error;
  std::thread feeder([&] {
    try {
      feed_fifos(dir, files, wrap);
    } catch (...) {
      feeder_error = std::current_exception();
    }
  });
  std::vector<std::vector<Batch>> batches(static_cast<size_t>(ranks));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  {
    PipeDealerOptions options;
    options.fifo_prefix = dir + "/train";
    options.epochs = kEpochs;
    options.deal_ranks = ranks;
    for (int rank = 0; rank < ranks; ++rank) options.deal_rank_of.push_back(rank);
    options.records.unwrap_recordio = wrap;
    options.records.num_classes = classes;
    options.timeout = std::chrono::seconds(60);
    PipeRendezvous rendezvous = listen_for_ranks(ranks);
    const std::string name = rendezvous.name;
    PipeDealer dealer(std::move(rendezvous), options);
    std::vector<std::thread> consumers;
    for (int rank = 0; rank < ranks; ++rank) {
      consumers.emplace_back([&, rank] {
        try {
          auto feed = std::make_shared<PipeFeed>(name, rank, "train", std::chrono::seconds(60));
          BatchLoader loader(feed, image, loader_options(rank, ranks));
          batches[static_cast<size_t>(rank)] = drain(loader);
        } catch (...) {
          errors[static_cast<size_t>(rank)] = std::current_exception();
        }
      });
    }
    for (auto& consumer : consumers) consumer.join();
  }
  feeder.join();
  std::filesystem::remove_all(dir);
  for (auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  if (feeder_error) std::rethrow_exception(feeder_error);
  return batches;
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
    bool pipe = false;
    for (int a = 2; a < argc; ++a) {
      const std::string argument = argv[a];
      if (argument == "--pipe") {
        pipe = true;
        continue;
      }
      if (pipe) {
        const auto layout = detect_channel_layout(argument, std::nullopt, DataFormat::detect);
        for (bool wrap : {false, true}) {
          for (int ranks : {1, 3}) {
            const auto streamed = pipe_batches(layout.files, wrap, ranks, options.image, reference.source->num_classes());
            for (int rank = 0; rank < ranks; ++rank) {
              const std::string difference =
                  compare(batches_of(reference.source, rank, ranks, /*shuffle=*/false), streamed[static_cast<size_t>(rank)]);
              if (!difference.empty()) {
                std::printf("FAILED: %s (%s) through Pipe-mode FIFOs%s differs from %s on rank %d of %d: %s\n",
                            argument.c_str(), data_format_name(layout.format), wrap ? ", RecordIO-wrapped," : "",
                            argv[1], rank, ranks, difference.c_str());
                ++failures;
              }
            }
          }
        }
        std::printf("%s: %s through Pipe-mode FIFOs (plain and RecordIO-wrapped, 1 and 3 ranks)\n", argument.c_str(),
                    data_format_name(layout.format));
        continue;
      }
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
