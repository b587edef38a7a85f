// Decoding and augmentation throughput: images per CPU-second of the sample path (read, decode,
// crop/resize, colour jitter, normalise) on one thread, next to libjpeg-turbo's bare full decode of the
// same files, and the loader's rate with several threads. It can also generate photo-like JPEGs to
// measure on. scripts/bench/decode_bench.py runs it next to Pillow/torchvision.
//
//   data_bench --make-jpegs DIR [--count 64] [--width 500] [--height 375]
//       writes COUNT photo-like WIDTHxHEIGHT JPEGs (4:2:0, quality 90) into DIR/photos (an image folder
//       of one class).
//   data_bench --folder DIR [--augmentation none|crop|crop_color] [--size 224] [--images 2000]
//              [--rounds 3] [--threads 1] [--no-bare] [--digest] [--json]
//       --images  samples per measurement (cycling over the folder's files, a new epoch per cycle)
//       --rounds  bare decode and sample path are measured alternately this many times and the best
//                 round of each is reported: other processes on the machine only ever slow a round down
//       --threads above 1 also measures the loader (wall-clock images/s of that many threads)
//       --no-bare skips the bare decode (profiling the sample path alone)
//       --digest  prints a hash of every output float of the first round: equal digests, equal pixels
//                 (to check that a change to the sample path leaves its output alone)
//       --json    prints one JSON object instead of text
//
// "Bare decode" is the cheapest way to get the whole image's RGB pixels out of libjpeg-turbo as PIL does
// (full scale, accurate integer IDCT, fancy upsampling), with the decompressor and buffers reused and the
// file read included, as in the sample path: the floor of any pipeline that decodes whole images.
// Rates are per CPU-second of this thread (CLOCK_THREAD_CPUTIME_ID), so a busy machine distorts them little.
#include "job/training_choices.h"
#include "runtime/data/images/image_decode.h"
#include "runtime/data/loader/batch_loader.h"
#include "tests/support/image_encode.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

using train::Augmentation;
using train::augmentation_names;
using namespace train::data;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// This thread's CPU time: a per-core rate that other processes on a busy machine do not distort.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

// Smooth colour fields, some texture and a little noise: compresses roughly as photos do.
std::vector<uint8_t> photo_like(int width, int height, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  double f[6];
  for (double& value : f) value = rng.uniform(0.005, 0.05);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        double v = 128 + 70 * std::sin(f[c] * x + f[c + 3] * y + c) + 30 * std::sin(0.3 * x * (c + 1) / 3.0) *
                                                                           std::cos(0.2 * y);
        v += static_cast<double>(rng.below(17)) - 8;
        pixels[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return pixels;
}

struct Options {
  std::string folder, make_dir, augmentation = "crop";
  int count = 64, width = 500, height = 375, size = 224, images = 2000, rounds = 3, threads = 1;
  bool bare = true, digest = false, json = false;
};

constexpr const char* kUsage =
    "usage: data_bench --make-jpegs DIR [--count N --width W --height H]\n"
    "       data_bench --folder DIR [--augmentation none|crop|crop_color --size S --images N --rounds R\n"
    "                  --threads T --no-bare --digest --json]\n";

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n{}", arg, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&]() {
      const std::string text = value();
      size_t end = 0;
      int parsed = 0;
      try {
        parsed = std::stoi(text, &end);
      } catch (const std::exception&) {
        end = 0;
      }
      if (end == 0 || end != text.size() || parsed < 1) {
        fmt::print(stderr, "{}: expected a positive integer, got \"{}\"\n", arg, text);
        std::exit(2);
      }
      return parsed;
    };
    if (arg == "--folder") o.folder = value();
    else if (arg == "--make-jpegs") o.make_dir = value();
    else if (arg == "--count") o.count = number();
    else if (arg == "--width") o.width = number();
    else if (arg == "--height") o.height = number();
    else if (arg == "--augmentation") o.augmentation = value();
    else if (arg == "--size") o.size = number();
    else if (arg == "--images") o.images = number();
    else if (arg == "--rounds") o.rounds = number();
    else if (arg == "--threads") o.threads = number();
    else if (arg == "--no-bare") o.bare = false;
    else if (arg == "--digest") o.digest = true;
    else if (arg == "--json") o.json = true;
    else if (arg == "--help" || arg == "-h") {
      fmt::print("{}", kUsage);
      std::exit(0);
    } else {
      fmt::print(stderr, "data_bench: unknown option {}\n{}", arg, kUsage);
      std::exit(2);
    }
  }
  return o;
}

int make_jpegs(const Options& o) {
  std::filesystem::create_directories(o.make_dir + "/photos");
  size_t total = 0;
  for (int i = 0; i < o.count; ++i) {
    const auto bytes = encode_jpeg(photo_like(o.width, o.height, 1000 + i).data(), o.width, o.height, 3);
    total += bytes.size();
    write_file(fmt::format("{}/photos/{:05d}.jpg", o.make_dir, i), bytes);
  }
  fmt::print("wrote {} {}x{} JPEGs (4:2:0, quality 90, {:.0f} KB each) into {}/photos\n", o.count, o.width,
             o.height, total / 1024.0 / o.count, o.make_dir);
  return 0;
}

// One measurement: images per CPU-second and per wall-clock second.
struct Rate {
  double cpu = 0;
  double wall = 0;
};

template <typename Body>
Rate measure(int n, Body body) {
  const auto start = Clock::now();
  const double cpu = thread_cpu_seconds();
  for (int i = 0; i < n; ++i) body(i);
  return Rate{n / (thread_cpu_seconds() - cpu), n / seconds_since(start)};
}

// The bare decode of one file: all of it, full scale, into reused buffers.
void decode_whole(const std::vector<uint8_t>& bytes, const std::string& path, JpegDecoder& jpeg, RgbImage& image) {
  if (sniff_image_format(bytes.data(), bytes.size()) == ImageFormat::jpeg) {
    jpeg.start(bytes.data(), bytes.size(), path);
    jpeg.decode(8, 0, jpeg.width(), 0, jpeg.height(), image.pixels);
  } else {
    decode_png(bytes.data(), bytes.size(), path, image);
  }
}

// FNV-1a over bytes.
uint64_t fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

double loader_rate(const std::shared_ptr<ImageFolderSource>& source, int threads, int n) {
  LoaderOptions loader_options;
  loader_options.batch_size = 64;
  loader_options.threads = threads;
  loader_options.prefetch_batches = 4;
  auto loader = BatchLoader(source, loader_options);
  Batch batch;
  int done = 0;
  const auto start = Clock::now();
  while (done < n && loader.next(batch, std::chrono::seconds(60)) == BatchLoader::Status::batch) done += batch.size;
  return done / seconds_since(start);
}

int bench_folder(const Options& o) {
  auto scanned = scan_image_folder(o.folder);
  const int64_t files = scanned.size();
  ImageFolderOptions options;
  options.height = options.width = o.size;
  const auto augmentation = value_named(augmentation_names, o.augmentation);
  if (!augmentation) {
    throw std::invalid_argument(fmt::format("augmentation: expected {}, got \"{}\"",
                                            names_listed(augmentation_names), o.augmentation));
  }
  options.augmentation = *augmentation;
  auto source = std::make_shared<ImageFolderSource>(std::move(scanned), options);
  const int n = static_cast<int>(std::min<int64_t>(o.images, files * 50));
  const auto& paths = source->folder().paths;

  std::vector<uint8_t> bytes;
  JpegDecoder jpeg;
  RgbImage image;
  SampleScratch scratch;
  std::vector<float> out(static_cast<size_t>(o.size) * o.size * 3);
  uint64_t digest = 14695981039346656037ull;
  Rate bare, sample;
  for (int round = 0; round < o.rounds; ++round) {
    if (o.bare) {
      const Rate r = measure(n, [&](int i) {
        const std::string& path = paths[static_cast<size_t>(i % files)];
        read_file(path, bytes);
        decode_whole(bytes, path, jpeg, image);
      });
      if (r.cpu > bare.cpu) bare = r;
    }
    const Rate r = measure(n, [&](int i) {
      source->load(i % files, 0, i / files, out.data(), scratch);
      if (o.digest && round == 0) digest = fnv1a(digest, out.data(), out.size() * sizeof(float));
    });
    if (r.cpu > sample.cpu) sample = r;
  }
  const double loader = o.threads > 1 ? loader_rate(source, o.threads, n) : 0.0;

  if (o.json) {
    nlohmann::json result = {{"folder", o.folder},
                             {"files", files},
                             {"samples", n},
                             {"rounds", o.rounds},
                             {"augmentation", o.augmentation},
                             {"size", o.size},
                             {"sample_images_per_cpu_second", sample.cpu},
                             {"sample_images_per_second", sample.wall}};
    if (o.bare) {
      result["bare_images_per_cpu_second"] = bare.cpu;
      result["bare_images_per_second"] = bare.wall;
    }
    if (o.threads > 1) {
      result["loader_threads"] = o.threads;
      result["loader_images_per_second"] = loader;
    }
    if (o.digest) result["digest"] = fmt::format("{:016x}", digest);
    fmt::print("{}\n", result.dump());
    return 0;
  }
  fmt::print("{}: {} files, {} samples x best of {} rounds, augmentation {}, {}x{}\n", o.folder, files, n, o.rounds,
             o.augmentation, o.size, o.size);
  if (o.bare) {
    fmt::print("  bare full decode:               {:8.0f} images/s wall, {:8.0f} images per CPU-second (1 thread)\n",
               bare.wall, bare.cpu);
  }
  fmt::print("  decode + {:10} + normalise: {:8.0f} images/s wall, {:8.0f} images per CPU-second (1 thread)\n",
             o.augmentation, sample.wall, sample.cpu);
  if (o.bare) fmt::print("  sample path / bare decode:      {:8.2f}\n", sample.cpu / bare.cpu);
  if (o.threads > 1) fmt::print("  loader with {} threads:          {:8.0f} images/s\n", o.threads, loader);
  if (o.digest) fmt::print("  digest of the outputs:          {:016x}\n", digest);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    if (!options.make_dir.empty()) return make_jpegs(options);
    if (options.folder.empty()) {
      fmt::print(stderr, "data_bench: give --folder DIR or --make-jpegs DIR\n{}", kUsage);
      return 2;
    }
    return bench_folder(options);
  } catch (const std::exception& error) {
    fmt::print(stderr, "data_bench: {}\n", error.what());
    return 1;
  }
}
