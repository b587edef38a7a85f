// Decoding and augmentation throughput: images/s of the sample path (read, decode, crop/resize,
// normalise) on one thread, next to the bare full decode of the same files, and the loader's rate with
// several threads. It can also generate photo-like JPEGs to measure on.
//
//   data_bench --make-jpegs DIR [--count 64] [--width 500] [--height 375]
//   data_bench --folder DIR [--augmentation crop|none] [--size 224] [--images 2000] [--threads 1]
#include "runtime/data/batch_loader.h"
#include "runtime/data/image_decode.h"
#include "runtime/data/image_encode.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  std::string folder, make_dir, augmentation = "crop";
  int count = 64, width = 500, height = 375, size = 224, images = 2000, threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", arg);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--folder") folder = value();
    else if (arg == "--make-jpegs") make_dir = value();
    else if (arg == "--count") count = std::stoi(value());
    else if (arg == "--width") width = std::stoi(value());
    else if (arg == "--height") height = std::stoi(value());
    else if (arg == "--augmentation") augmentation = value();
    else if (arg == "--size") size = std::stoi(value());
    else if (arg == "--images") images = std::stoi(value());
    else if (arg == "--threads") threads = std::stoi(value());
    else {
      fmt::print(stderr, "usage: data_bench --make-jpegs DIR [--count N --width W --height H] | --folder DIR "
                         "[--augmentation crop|none --size S --images N --threads T]\n");
      return 2;
    }
  }
  try {
    if (!make_dir.empty()) {
      std::filesystem::create_directories(make_dir + "/photos");
      size_t total = 0;
      for (int i = 0; i < count; ++i) {
        const auto bytes = encode_jpeg(photo_like(width, height, 1000 + i).data(), width, height, 3);
        total += bytes.size();
        write_file(fmt::format("{}/photos/{:05d}.jpg", make_dir, i), bytes);
      }
      fmt::print("wrote {} {}x{} JPEGs (4:2:0, quality 90, {:.0f} KB each) into {}/photos\n", count, width, height,
                 total / 1024.0 / count, make_dir);
      return 0;
    }
    if (folder.empty()) {
      fmt::print(stderr, "data_bench: give --folder DIR or --make-jpegs DIR\n");
      return 2;
    }
    auto scanned = scan_image_folder(folder);
    const int64_t files = scanned.size();
    ImageFolderOptions options;
    options.height = options.width = size;
    options.augmentation = parse_augmentation(augmentation);
    auto source = std::make_shared<ImageFolderSource>(std::move(scanned), options);
    const int n = static_cast<int>(std::min<int64_t>(images, files * 50));

    // Bare decode (whole image, no augmentation), file reading included.
    std::vector<uint8_t> bytes;
    auto start = Clock::now();
    double cpu = thread_cpu_seconds();
    for (int i = 0; i < n; ++i) {
      read_file(source->folder().paths[i % files], bytes);
      auto image = decode_image(bytes.data(), bytes.size(), "");
      if (image.width == 0) return 1;
    }
    const double bare = n / seconds_since(start), bare_cpu = n / (thread_cpu_seconds() - cpu);

    // The sample path on one thread.
    SampleScratch scratch;
    std::vector<float> out(static_cast<size_t>(size) * size * 3);
    start = Clock::now();
    cpu = thread_cpu_seconds();
    for (int i = 0; i < n; ++i) source->load(i % files, 0, i / files, out.data(), scratch);
    const double one = n / seconds_since(start), one_cpu = n / (thread_cpu_seconds() - cpu);
    fmt::print("{}: {} files, {} samples, augmentation {}, {}x{}\n", folder, files, n, augmentation, size, size);
    fmt::print("  bare full decode:         {:8.0f} images/s wall, {:8.0f} images per CPU-second (1 thread)\n", bare,
               bare_cpu);
    fmt::print("  decode + {:4} + normalise: {:8.0f} images/s wall, {:8.0f} images per CPU-second (1 thread)\n",
               augmentation, one, one_cpu);

    if (threads > 1) {
      LoaderOptions loader_options;
      loader_options.batch_size = 64;
      loader_options.threads = threads;
      loader_options.prefetch_batches = 4;
      auto loader = BatchLoader(source, loader_options);
      Batch batch;
      int done = 0;
      start = Clock::now();
      while (done < n && loader.next(batch, std::chrono::seconds(60)) == BatchLoader::Status::batch) done += batch.size;
      fmt::print("  loader with {} threads:              {:8.0f} images/s\n", threads, done / seconds_since(start));
    }
  } catch (const std::exception& error) {
    fmt::print(stderr, "data_bench: {}\n", error.what());
    return 1;
  }
  return 0;
}
