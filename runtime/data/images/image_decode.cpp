#include "runtime/data/images/image_decode.h"

#include "common/regular_file.h"
#include "runtime/data/data_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <unistd.h>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

// libjpeg and libpng report errors by longjmp. Every function below that calls setjmp calls the
// libraries directly, so a jump only skips C frames of the library and our C-style handlers, never a
// C++ object with a destructor; the C++ work (allocation, throwing) happens outside those calls.

namespace train::data {

ImageFormat sniff_image_format(const uint8_t* data, size_t size) {
  static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::jpeg;
  if (size >= 8 && std::memcmp(data, png_signature, 8) == 0) return ImageFormat::png;
  return ImageFormat::unknown;
}

void read_file(const std::string& path, std::vector<uint8_t>& bytes) {
  // Only a regular file: a FIFO, a device (/dev/zero never ends) or a directory is refused before a byte is read.
  RegularFile file = open_regular_file(path);
  if (!file.ok()) throw DataError(fmt::format("{}: {}", path, file.problem()));
  bytes.clear();
  size_t size = 0;
  // Grow as needed instead of trusting the size from fstat (the file may change while we read it).
  if (bytes.capacity() < (size_t{1} << 16)) bytes.reserve(size_t{1} << 16);
  int error = 0;
  for (;;) {
    if (size == bytes.size()) bytes.resize(std::max(bytes.capacity(), size * 2));
    const ssize_t got = ::read(file.fd, bytes.data() + size, bytes.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) error = errno;
    if (got <= 0) break;
    size += static_cast<size_t>(got);
  }
  ::close(file.fd);
  bytes.resize(size);
  if (error != 0) throw DataError(fmt::format("{}: cannot read: {}", path, std::strerror(error)));
}

namespace {

std::string describe_start(const uint8_t* data, size_t size) {
  std::string bytes;
  for (size_t i = 0; i < size && i < 8; ++i) bytes += fmt::format("{}{:02x}", i ? " " : "", data[i]);
  return size == 0 ? "it is empty" : "it starts with bytes " + bytes;
}

// ---- JPEG ----

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first, so a j_common_ptr's err can be cast to this
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, manager->message);
  std::longjmp(manager->jump, 1);
}

void jpeg_emit_message(j_common_ptr cinfo, int level) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  if (level < 0) {
    // Corrupt-data warnings leave a usable (if damaged) image, as PIL accepts them; a file that ends
    // early does not: PIL refuses it too ("image file is truncated").
    if (cinfo->err->msg_code == JWRN_JPEG_EOF) manager->truncated = true;
    cinfo->err->num_warnings++;
  }
}

uint8_t muldiv255(unsigned a, unsigned b) {
  const unsigned t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

// Adobe's inverted CMYK (what Photoshop writes, and what PIL assumes for every CMYK JPEG) to RGB, as
// PIL's cmyk2rgb: r = (255 - c) * (255 - k) / 255 on the un-inverted values.
void inverted_cmyk_to_rgb(const uint8_t* cmyk, int width, uint8_t* rgb) {
  for (int x = 0; x < width; ++x) {
    const unsigned c = 255u - cmyk[4 * x], m = 255u - cmyk[4 * x + 1], y = 255u - cmyk[4 * x + 2];
    const unsigned nk = cmyk[4 * x + 3];  // 255 - k
    rgb[3 * x + 0] = static_cast<uint8_t>(nk - muldiv255(c, nk));
    rgb[3 * x + 1] = static_cast<uint8_t>(nk - muldiv255(m, nk));
    rgb[3 * x + 2] = static_cast<uint8_t>(nk - muldiv255(y, nk));
  }
}

}  // namespace

struct JpegDecoder::Impl {
  jpeg_decompress_struct cinfo;
  JpegErrorManager error;
  std::vector<uint8_t> cmyk_rows;
  bool cmyk = false;

  Impl() {
    std::memset(&cinfo, 0, sizeof(cinfo));
    cinfo.err = jpeg_std_error(&error.pub);
    error.pub.error_exit = jpeg_error_exit;
    error.pub.emit_message = jpeg_emit_message;
    error.truncated = false;
    error.message[0] = '\0';
    jpeg_create_decompress(&cinfo);  // only fails on out-of-memory, which would call jpeg_error_exit
  }
  ~Impl() { jpeg_destroy_decompress(&cinfo); }

  void reset() {
    jpeg_abort_decompress(&cinfo);
    error.truncated = false;
    error.message[0] = '\0';
    error.pub.num_warnings = 0;
  }

  // 0 on success, else the error message is in error.message.
  int read_header(const uint8_t* data, size_t size) {
    if (setjmp(error.jump)) return -1;
    jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
    jpeg_read_header(&cinfo, TRUE);
    return 0;
  }

  int start_decompress(int eighths) {
    if (setjmp(error.jump)) return -1;
    cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg-turbo expands grayscale to RGB
    cinfo.scale_num = static_cast<unsigned>(eighths);
    cinfo.scale_denom = 8;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&cinfo);
    return 0;
  }

  int crop(JDIMENSION* x, JDIMENSION* width) {
    if (setjmp(error.jump)) return -1;
    jpeg_crop_scanline(&cinfo, x, width);
    return 0;
  }

  // Skips to row y0 and reads rows [y0, y1) of `width` pixels into `rgb`.
  int read_rows(int y0, int y1, int width, uint8_t* rgb) {
    if (setjmp(error.jump)) return -1;
    if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
    const size_t row_bytes = static_cast<size_t>(width) * 3;
    const size_t cmyk_bytes = static_cast<size_t>(width) * 4;
    JSAMPROW rows[16];
    while (static_cast<int>(cinfo.output_scanline) < y1) {
      const int first = static_cast<int>(cinfo.output_scanline);
      const int count = std::min(16, y1 - first);
      for (int i = 0; i < count; ++i) {
        rows[i] = cmyk ? cmyk_rows.data() + i * cmyk_bytes : rgb + (first - y0 + i) * row_bytes;
      }
      const int got = static_cast<int>(jpeg_read_scanlines(&cinfo, rows, static_cast<JDIMENSION>(count)));
      if (got <= 0) {
        std::snprintf(error.message, sizeof(error.message), "decoder returned no rows at row %d", first);
        return -1;
      }
      if (cmyk) {
        for (int i = 0; i < got; ++i) inverted_cmyk_to_rgb(rows[i], width, rgb + (first - y0 + i) * row_bytes);
      }
    }
    return 0;
  }
};

JpegDecoder::JpegDecoder() : impl_(std::make_unique<Impl>()) {}
JpegDecoder::~JpegDecoder() = default;

void JpegDecoder::start(const uint8_t* data, size_t size, const std::string& name) {
  name_ = name;
  impl_->reset();
  if (impl_->read_header(data, size) != 0) {
    const std::string message = impl_->error.message;
    impl_->reset();
    throw DataError(fmt::format("{}: not a decodable JPEG: {}", name_, message));
  }
  width_ = static_cast<int>(impl_->cinfo.image_width);
  height_ = static_cast<int>(impl_->cinfo.image_height);
  if (width_ <= 0 || height_ <= 0 || int64_t{width_} * height_ > kMaxImagePixels) {
    impl_->reset();
    throw DataError(fmt::format("{}: JPEG of {}x{} pixels is empty or too large (at most {} pixels)", name_,
                                width_, height_, kMaxImagePixels));
  }
}

JpegDecoder::Region JpegDecoder::decode(int eighths, int x0, int x1, int y0, int y1, std::vector<uint8_t>& rgb) {
  auto fail = [&](const char* what) {
    const std::string message = impl_->error.message;
    impl_->reset();
    return DataError(fmt::format("{}: not a decodable JPEG: {}{}", name_, what, message));
  };
  if (eighths != 1 && eighths != 2 && eighths != 4 && eighths != 8) eighths = 8;
  if (impl_->start_decompress(eighths) != 0) throw fail("");
  const int out_width = static_cast<int>(impl_->cinfo.output_width);
  const int out_height = static_cast<int>(impl_->cinfo.output_height);
  x0 = std::clamp(x0, 0, out_width);
  x1 = std::clamp(x1, x0, out_width);
  y0 = std::clamp(y0, 0, out_height);
  y1 = std::clamp(y1, y0, out_height);
  if (x0 == x1 || y0 == y1) {
    impl_->reset();
    throw DataError(fmt::format("{}: empty region requested from a {}x{} JPEG", name_, out_width, out_height));
  }
  Region region{x0, y0, x1 - x0, y1 - y0};
  if (x0 > 0 || x1 < out_width) {
    // Fancy upsampling treats a cropped edge as the image's edge, so the outermost column on each side
    // may differ from a full decode: decode two more on each side, which then lie outside [x0, x1).
    const int left = std::max(0, x0 - 2), right = std::min(out_width, x1 + 2);
    JDIMENSION x = static_cast<JDIMENSION>(left), width = static_cast<JDIMENSION>(right - left);
    if (impl_->crop(&x, &width) != 0) throw fail("");
    region.x = static_cast<int>(x);
    region.width = static_cast<int>(width);
  }
  try {
    // Grown only: growing zero-fills the new part, a cost for nothing when the decoder overwrites it.
    const size_t bytes = static_cast<size_t>(region.width) * region.height * 3;
    if (rgb.size() < bytes) rgb.resize(bytes);
    if (impl_->cmyk) impl_->cmyk_rows.resize(static_cast<size_t>(region.width) * 4 * 16);
  } catch (...) {
    impl_->reset();
    throw;
  }
  if (impl_->read_rows(y0, y1, region.width, rgb.data()) != 0) throw fail("");
  const bool truncated = impl_->error.truncated;
  impl_->reset();  // the rows after y1 are not needed
  if (truncated) throw DataError(fmt::format("{}: truncated JPEG (the data ends before the image does)", name_));
  return region;
}

// ---- PNG ----

namespace {

struct PngReader {
  const uint8_t* data;
  size_t size;
  size_t offset;
  char message[256];
};

void png_read_from_memory(png_structp png, png_bytep out, png_size_t length) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (length > reader->size - reader->offset) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, reader->data + reader->offset, length);
  reader->offset += length;
}

void png_error_handler(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", message);
  png_longjmp(png, 1);
}

void png_warning_handler(png_structp, png_const_charp) {}

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngReader reader{};
  ~PngState() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

int png_read_header(PngState& s, int* width, int* height) {
  if (setjmp(png_jmpbuf(s.png))) return -1;
  png_set_read_fn(s.png, &s.reader, png_read_from_memory);
  png_set_user_limits(s.png, 0x7fffffff, 0x7fffffff);
  png_read_info(s.png, s.info);
  const int color_type = png_get_color_type(s.png, s.info);
  const int bit_depth = png_get_bit_depth(s.png, s.info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s.png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(s.png);
  if (bit_depth == 16) png_set_strip_16(s.png);  // keeps the high byte
  // Alpha, and the alpha that png_set_palette_to_rgb makes of a tRNS chunk, is dropped.
  png_set_strip_alpha(s.png);
  if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(s.png);
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  *width = static_cast<int>(png_get_image_width(s.png, s.info));
  *height = static_cast<int>(png_get_image_height(s.png, s.info));
  if (png_get_rowbytes(s.png, s.info) != static_cast<size_t>(*width) * 3) {
    std::snprintf(s.reader.message, sizeof(s.reader.message), "unexpected row size after conversion to RGB");
    return -1;
  }
  return 0;
}

int png_read_pixels(PngState& s, png_bytepp rows) {
  if (setjmp(png_jmpbuf(s.png))) return -1;
  png_read_image(s.png, rows);
  return 0;
}

}  // namespace

void decode_png(const uint8_t* data, size_t size, const std::string& name, RgbImage& image) {
  PngState s;
  s.reader = PngReader{data, size, 0, {0}};
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s.reader, png_error_handler, png_warning_handler);
  if (s.png != nullptr) s.info = png_create_info_struct(s.png);
  if (s.png == nullptr || s.info == nullptr) throw DataError(fmt::format("{}: cannot start libpng", name));
  int width = 0, height = 0;
  if (png_read_header(s, &width, &height) != 0) {
    throw DataError(fmt::format("{}: not a decodable PNG: {}", name, s.reader.message));
  }
  if (width <= 0 || height <= 0 || int64_t{width} * height > kMaxImagePixels) {
    throw DataError(fmt::format("{}: PNG of {}x{} pixels is empty or too large (at most {} pixels)", name, width,
                                height, kMaxImagePixels));
  }
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int y = 0; y < height; ++y) rows[y] = image.pixels.data() + static_cast<size_t>(y) * width * 3;
  if (png_read_pixels(s, rows.data()) != 0) {
    throw DataError(fmt::format("{}: not a decodable PNG: {}", name, s.reader.message));
  }
}

RgbImage decode_image(const uint8_t* data, size_t size, const std::string& name) {
  RgbImage image;
  switch (sniff_image_format(data, size)) {
    case ImageFormat::jpeg: {
      JpegDecoder decoder;
      decoder.start(data, size, name);
      image.width = decoder.width();
      image.height = decoder.height();
      decoder.decode(8, 0, image.width, 0, image.height, image.pixels);
      image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
      return image;
    }
    case ImageFormat::png:
      decode_png(data, size, name, image);
      return image;
    case ImageFormat::unknown:
      break;
  }
  throw DataError(fmt::format("{}: not a JPEG or PNG file ({})", name, describe_start(data, size)));
}

RgbImage read_image(const std::string& path) {
  std::vector<uint8_t> bytes;
  read_file(path, bytes);
  return decode_image(bytes.data(), bytes.size(), path);
}

}  // namespace train::data
