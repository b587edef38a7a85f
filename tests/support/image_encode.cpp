#include "tests/support/image_encode.h"

#include <fmt/format.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <jpeglib.h>
#include <png.h>

namespace train::data {

namespace {

struct JpegWriteError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_write_error_exit(j_common_ptr cinfo) {
  auto* error = reinterpret_cast<JpegWriteError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, error->message);
  std::longjmp(error->jump, 1);
}

struct JpegWriter {
  jpeg_compress_struct cinfo;
  JpegWriteError error;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
};

int jpeg_write(JpegWriter& w, const uint8_t* pixels, int width, int height, int components,
               const JpegEncodeOptions& options) {
  if (setjmp(w.error.jump)) return -1;
  jpeg_create_compress(&w.cinfo);
  jpeg_mem_dest(&w.cinfo, &w.buffer, &w.size);
  w.cinfo.image_width = static_cast<JDIMENSION>(width);
  w.cinfo.image_height = static_cast<JDIMENSION>(height);
  w.cinfo.input_components = components;
  w.cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&w.cinfo);
  jpeg_set_quality(&w.cinfo, options.quality, TRUE);
  if (components == 3) {
    const int h = options.subsampling == ChromaSubsampling::s444 ? 1 : 2;
    const int v = options.subsampling == ChromaSubsampling::s420 ? 2 : 1;
    w.cinfo.comp_info[0].h_samp_factor = h;
    w.cinfo.comp_info[0].v_samp_factor = v;
    for (int c = 1; c < 3; ++c) w.cinfo.comp_info[c].h_samp_factor = w.cinfo.comp_info[c].v_samp_factor = 1;
  }
  if (options.progressive) jpeg_simple_progression(&w.cinfo);
  jpeg_start_compress(&w.cinfo, TRUE);
  while (w.cinfo.next_scanline < w.cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + static_cast<size_t>(w.cinfo.next_scanline) * width * components;
    jpeg_write_scanlines(&w.cinfo, &row, 1);
  }
  jpeg_finish_compress(&w.cinfo);
  return 0;
}

struct PngWriter {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<uint8_t>* out = nullptr;
  char message[256] = {0};
};

void png_write_to_memory(png_structp png, png_bytep data, png_size_t length) {
  auto* writer = static_cast<PngWriter*>(png_get_io_ptr(png));
  writer->out->insert(writer->out->end(), data, data + length);
}
void png_flush_nothing(png_structp) {}
void png_write_error(png_structp png, png_const_charp message) {
  auto* writer = static_cast<PngWriter*>(png_get_error_ptr(png));
  std::snprintf(writer->message, sizeof(writer->message), "%s", message);
  png_longjmp(png, 1);
}
void png_write_warning(png_structp, png_const_charp) {}

int png_write(PngWriter& w, const PngImage& image, int color_type, png_bytepp rows) {
  if (setjmp(png_jmpbuf(w.png))) return -1;
  png_set_write_fn(w.png, &w, png_write_to_memory, png_flush_nothing);
  png_set_IHDR(w.png, w.info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height),
               image.bit_depth, color_type, image.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (image.color == PngColor::palette) {
    png_color palette[256];
    const int entries = static_cast<int>(image.palette.size() / 3);
    for (int i = 0; i < entries && i < 256; ++i) {
      palette[i] = png_color{image.palette[3 * i], image.palette[3 * i + 1], image.palette[3 * i + 2]};
    }
    png_set_PLTE(w.png, w.info, palette, entries);
    if (!image.transparency.empty()) {
      png_set_tRNS(w.png, w.info, image.transparency.data(), static_cast<int>(image.transparency.size()), nullptr);
    }
  }
  png_write_info(w.png, w.info);
  png_write_image(w.png, rows);
  png_write_end(w.png, nullptr);
  return 0;
}

}  // namespace

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int components,
                                 const JpegEncodeOptions& options) {
  if (components != 1 && components != 3 && components != 4) {
    throw std::runtime_error(fmt::format("encode_jpeg: {} components (expected 1, 3 or 4)", components));
  }
  JpegWriter writer;
  std::memset(&writer.cinfo, 0, sizeof(writer.cinfo));
  writer.cinfo.err = jpeg_std_error(&writer.error.pub);
  writer.error.pub.error_exit = jpeg_write_error_exit;
  const int status = jpeg_write(writer, pixels, width, height, components, options);
  jpeg_destroy_compress(&writer.cinfo);
  std::vector<uint8_t> bytes;
  if (status == 0) bytes.assign(writer.buffer, writer.buffer + writer.size);
  std::free(writer.buffer);
  if (status != 0) throw std::runtime_error(fmt::format("encode_jpeg: {}", writer.error.message));
  return bytes;
}

std::vector<uint8_t> encode_png(const PngImage& image) {
  int channels = 0, color_type = 0;
  switch (image.color) {
    case PngColor::gray: channels = 1; color_type = PNG_COLOR_TYPE_GRAY; break;
    case PngColor::gray_alpha: channels = 2; color_type = PNG_COLOR_TYPE_GRAY_ALPHA; break;
    case PngColor::rgb: channels = 3; color_type = PNG_COLOR_TYPE_RGB; break;
    case PngColor::rgba: channels = 4; color_type = PNG_COLOR_TYPE_RGB_ALPHA; break;
    case PngColor::palette: channels = 1; color_type = PNG_COLOR_TYPE_PALETTE; break;
  }
  const size_t samples_per_row = static_cast<size_t>(image.width) * channels;
  if (image.samples.size() != samples_per_row * image.height) {
    throw std::runtime_error(fmt::format("encode_png: {} samples for {}x{}x{}", image.samples.size(), image.width,
                                         image.height, channels));
  }
  // Pack each row: big-endian 16-bit, or several samples per byte (most significant bits first).
  const size_t row_bytes = (samples_per_row * image.bit_depth + 7) / 8;
  std::vector<uint8_t> packed(row_bytes * image.height, 0);
  std::vector<png_bytep> rows(static_cast<size_t>(image.height));
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = packed.data() + row_bytes * y;
    rows[y] = row;
    const uint16_t* in = image.samples.data() + samples_per_row * y;
    for (size_t i = 0; i < samples_per_row; ++i) {
      if (image.bit_depth == 16) {
        row[2 * i] = static_cast<uint8_t>(in[i] >> 8);
        row[2 * i + 1] = static_cast<uint8_t>(in[i] & 0xFF);
      } else if (image.bit_depth == 8) {
        row[i] = static_cast<uint8_t>(in[i]);
      } else {
        const size_t bit = i * image.bit_depth;
        row[bit / 8] |= static_cast<uint8_t>(in[i] << (8 - image.bit_depth - bit % 8));
      }
    }
  }
  std::vector<uint8_t> bytes;
  PngWriter writer;
  writer.out = &bytes;
  writer.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &writer, png_write_error, png_write_warning);
  if (writer.png != nullptr) writer.info = png_create_info_struct(writer.png);
  const int status = writer.info != nullptr ? png_write(writer, image, color_type, rows.data()) : -1;
  png_destroy_write_struct(&writer.png, &writer.info);
  if (status != 0) throw std::runtime_error(fmt::format("encode_png: {}", writer.message));
  return bytes;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file) throw std::runtime_error(fmt::format("cannot write {}", path));
}

}  // namespace train::data
