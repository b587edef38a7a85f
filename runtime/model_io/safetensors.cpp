#include "runtime/model_io/safetensors.h"

#include "common/atomic_file.h"
#include "common/json_file.h"
#include "common/non_copyable.h"
#include "common/regular_file.h"
#include "runtime/model_io/tensor_checksums.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace train::model_io {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view metadata_key = "__metadata__";

struct HeaderEntry {
  std::string name;
  Dtype dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

struct Header {
  std::vector<HeaderEntry> entries;  // sorted by data offset once parsed
  Metadata metadata;
};

[[noreturn]] void fail(std::string_view source, std::string_view what) {
  throw SafetensorsError(fmt::format("{}: {}", source, what));
}

// A name from the file as messages show it: control characters (JSON can escape them into a key) as <0x01>.
std::string shown(std::string_view name) {
  std::string result;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7F) {
      result += fmt::format("<0x{:02X}>", c);
    } else {
      result.push_back(static_cast<char>(c));
    }
  }
  return result;
}

[[noreturn]] void fail_tensor(std::string_view source, std::string_view name, std::string_view what) {
  throw SafetensorsError(fmt::format("{}: tensor \"{}\": {}", source, shown(name), what));
}

// A JSON value for a message, cut short: a hostile header can hold megabytes in one value.
std::string excerpt(const ordered_json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string all_dtype_names() {
  std::vector<std::string_view> names;
  for (Dtype dtype : {Dtype::BOOL, Dtype::U8, Dtype::I8, Dtype::U16, Dtype::I16, Dtype::F16, Dtype::BF16,
                      Dtype::U32, Dtype::I32, Dtype::F32, Dtype::U64, Dtype::I64, Dtype::F64}) {
    names.push_back(dtype_name(dtype));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

// `text` with bytes outside printable ASCII written as <0xFF>: a parse error quotes the bytes it choked on,
// and this message may end up in the job's failure file.
std::string printable(std::string_view text) {
  std::string result;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F) {
      result.push_back(static_cast<char>(c));
    } else {
      result += fmt::format("<0x{:02X}>", c);
    }
  }
  return result;
}

// ---- writing ---------------------------------------------------------------------------------------

// The header (padded) and, in `sizes`, each tensor's byte count.
std::string make_header(const std::vector<TensorView>& tensors, const Metadata& metadata,
                        std::string_view source, std::vector<size_t>& sizes) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json& entries = header[std::string(metadata_key)];
    for (const auto& [key, value] : metadata) entries[key] = value;
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  sizes.clear();
  for (const auto& tensor : tensors) {
    if (tensor.name.empty()) fail(source, "a tensor has an empty name");
    if (tensor.name == metadata_key) fail_tensor(source, tensor.name, "this name is reserved for the metadata");
    if (!names.insert(tensor.name).second) fail_tensor(source, tensor.name, "the name appears twice");
    if (!element_count(tensor.shape)) {
      fail_tensor(source, tensor.name, fmt::format("invalid shape {}", shape_text(tensor.shape)));
    }
    size_t size = tensor.byte_size();
    if (size > 0 && tensor.data == nullptr) fail_tensor(source, tensor.name, "no data");
    header[tensor.name] = {{"dtype", dtype_name(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + size}}};
    offset += size;
    sizes.push_back(size);
  }
  std::string text = header.dump();
  // The data starts at 8 + N; spaces (valid JSON whitespace) make that a multiple of 8.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string length_prefix(uint64_t length) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return bytes;
}

// ---- reading ---------------------------------------------------------------------------------------

uint64_t decode_length(const unsigned char* bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | bytes[i];
  return length;
}

// Checks the header length against the file; returns the size of the data that follows the header.
uint64_t check_header_length(uint64_t header_length, uint64_t file_size, std::string_view source) {
  if (header_length > safetensors_header_limit) {
    fail(source, fmt::format("header length {} is larger than the limit of {} bytes: this is not a safetensors "
                             "file, or a damaged one",
                             header_length, safetensors_header_limit));
  }
  if (header_length > file_size - 8) {
    fail(source, fmt::format("header length {} reaches beyond the end of the file ({} bytes): the file is "
                             "truncated, or not a safetensors file",
                             header_length, file_size));
  }
  return file_size - 8 - header_length;
}

void check_file_size(uint64_t file_size, std::string_view source) {
  if (file_size < 8) {
    fail(source, fmt::format("not a safetensors file: it has {} bytes, fewer than the 8 of the header length",
                             file_size));
  }
}

// Parses the JSON, refusing duplicate keys in the top-level object and in each entry (nlohmann keeps
// the last of duplicates silently; here a second "conv1.weight" must not quietly win) and nesting deeper
// than the config files may (common/json_file.h).
ordered_json parse_json(std::string_view text, std::string_view source) {
  struct Frame {
    bool is_object;
    std::string owner;  // the key under which this object sits ("" at the top)
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<Frame> stack;
  std::string duplicate;  // the first duplicate's message
  ordered_json::parser_callback_t callback = [&](int, nlohmann::detail::parse_event_t event, ordered_json& parsed) {
    using event_t = nlohmann::detail::parse_event_t;
    switch (event) {
      case event_t::object_start:
      case event_t::array_start: {
        std::string owner = stack.empty() ? "" : stack.back().last_key;
        stack.push_back({event == event_t::object_start, std::move(owner), {}, {}});
        break;
      }
      case event_t::object_end:
      case event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case event_t::key: {
        if (stack.empty() || !parsed.is_string()) break;
        Frame& frame = stack.back();
        frame.last_key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.last_key).second && duplicate.empty()) {
          if (stack.size() == 1) {
            duplicate = frame.last_key == metadata_key
                            ? fmt::format("header has \"{}\" twice", metadata_key)
                            : fmt::format("header names tensor \"{}\" twice", shown(frame.last_key));
          } else if (stack.size() == 2) {
            duplicate = frame.owner == metadata_key
                            ? fmt::format("\"{}\": key \"{}\" appears twice", metadata_key, shown(frame.last_key))
                            : fmt::format("tensor \"{}\": key \"{}\" appears twice", shown(frame.owner),
                                          shown(frame.last_key));
          }
        }
        break;
      }
      case event_t::value:
        break;
    }
    return true;
  };
  // nlohmann's lexer takes a NUL byte for the end of the input and would ignore whatever follows it.
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    fail(source, fmt::format("header is not valid JSON: a NUL byte at position {}", nul));
  }
  ordered_json header;
  try {
    header = ordered_json::parse(text.begin(), text.end(), json_depth_limited<ordered_json>(callback));
  } catch (const JsonTooDeep& error) {
    // Before anything of it is quoted in a message: dumping 100,000 levels overflowed the stack.
    fail(source, fmt::format("header is not a safetensors header: {} (a tensor's entry needs 3): the file is "
                             "damaged, or not a safetensors file",
                             error.what()));
  } catch (const nlohmann::json::parse_error& error) {
    // Drop the "[json.exception.parse_error.101] " tag; keep the position and reason.
    std::string reason = error.what();
    if (auto tag_end = reason.find("] "); reason.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) {
      reason = reason.substr(tag_end + 2);
    }
    reason = printable(reason);
    fail(source, fmt::format("header is not valid JSON: {}", reason));
  }
  if (!duplicate.empty()) fail(source, duplicate);
  if (!header.is_object()) {
    fail(source, fmt::format("header is a JSON {}, expected an object of tensors", header.type_name()));
  }
  return header;
}

// A JSON number that is a non-negative integer (nlohmann stores those as number_unsigned).
bool as_unsigned(const ordered_json& value, uint64_t& out) {
  if (!value.is_number_unsigned()) return false;
  out = value.get<uint64_t>();
  return true;
}

HeaderEntry parse_entry(const std::string& name, const ordered_json& entry, std::string_view source) {
  if (name.empty()) fail(source, "a tensor has an empty name");
  if (!entry.is_object()) {
    fail_tensor(source, name,
                fmt::format("expected an object with \"dtype\", \"shape\" and \"data_offsets\", found {}",
                            excerpt(entry)));
  }
  HeaderEntry result{name, Dtype::F32, {}, 0, 0};
  for (std::string_view key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) fail_tensor(source, name, fmt::format("\"{}\" is missing", key));
  }

  const ordered_json& dtype = entry["dtype"];
  if (!dtype.is_string()) fail_tensor(source, name, fmt::format("\"dtype\" must be a string, found {}", excerpt(dtype)));
  auto parsed = parse_dtype(dtype.get<std::string>());
  if (!parsed) {
    fail_tensor(source, name,
                fmt::format("unknown dtype {}; expected one of {}", excerpt(dtype), all_dtype_names()));
  }
  result.dtype = *parsed;

  const ordered_json& shape = entry["shape"];
  bool shape_ok = shape.is_array();
  if (shape_ok) {
    for (const auto& dimension : shape) {
      uint64_t value;
      if (!as_unsigned(dimension, value) || value > static_cast<uint64_t>(INT64_MAX)) {
        shape_ok = false;
        break;
      }
      result.shape.push_back(static_cast<int64_t>(value));
    }
  }
  if (!shape_ok) {
    fail_tensor(source, name,
                fmt::format("\"shape\" must be an array of non-negative integers, found {}", excerpt(shape)));
  }

  const ordered_json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !as_unsigned(offsets[0], result.begin) ||
      !as_unsigned(offsets[1], result.end)) {
    fail_tensor(source, name,
                fmt::format("\"data_offsets\" must be two non-negative integers [begin, end], found {}",
                            excerpt(offsets)));
  }
  if (result.end < result.begin) {
    fail_tensor(source, name, fmt::format("data_offsets [{}, {}] end before they begin", result.begin, result.end));
  }

  auto count = element_count(result.shape);
  size_t element_size = dtype_size(result.dtype);
  if (!count || static_cast<uint64_t>(*count) > UINT64_MAX / element_size) {
    fail_tensor(source, name, fmt::format("shape {} has too many elements", shape_text(result.shape)));
  }
  uint64_t needed = static_cast<uint64_t>(*count) * element_size;
  if (needed != result.end - result.begin) {
    fail_tensor(source, name,
                fmt::format("shape {} of {} needs {} bytes, but data_offsets [{}, {}] hold {}",
                            shape_text(result.shape), dtype_name(result.dtype), needed, result.begin, result.end,
                            result.end - result.begin));
  }
  return result;
}

Header parse_header(std::string_view text, uint64_t data_size, std::string_view source) {
  ordered_json json = parse_json(text, source);
  Header header;
  for (const auto& [key, value] : json.items()) {
    if (key == metadata_key) {
      if (!value.is_object()) {
        fail(source, fmt::format("\"{}\" must be an object of strings, found {}", metadata_key, excerpt(value)));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          fail(source, fmt::format("\"{}\": the value of \"{}\" must be a string, found {}", metadata_key,
                                   shown(meta_key), excerpt(meta_value)));
        }
        header.metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    HeaderEntry entry = parse_entry(key, value, source);
    if (entry.end > data_size) {
      fail_tensor(source, key,
                  fmt::format("data_offsets [{}, {}] reach beyond the end of the data ({} bytes)", entry.begin,
                              entry.end, data_size));
    }
    header.entries.push_back(std::move(entry));
  }

  // The byte ranges, in file order, must tile the data exactly: no overlap, no gap, nothing after.
  std::stable_sort(header.entries.begin(), header.entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const HeaderEntry* previous = nullptr;
  for (const auto& entry : header.entries) {
    if (entry.begin < covered) {
      fail_tensor(source, entry.name,
                  fmt::format("data_offsets [{}, {}] overlap tensor \"{}\" at [{}, {}]", entry.begin, entry.end,
                              shown(previous->name), previous->begin, previous->end));
    }
    if (entry.begin > covered) {
      fail(source, fmt::format("bytes [{}, {}) of the data belong to no tensor", covered, entry.begin));
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != data_size) {
    fail(source, fmt::format("bytes [{}, {}) of the data belong to no tensor", covered, data_size));
  }
  return header;
}

// Reads exactly `size` bytes at `offset`; false on a short read (the file shrank) or an error.
bool read_at(int fd, void* buffer, size_t size, uint64_t offset) {
  char* next = static_cast<char*>(buffer);
  while (size > 0) {
    ssize_t got = ::pread(fd, next, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      return false;
    }
    next += got;
    size -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

class FileHandle : private NonCopyable {
 public:
  explicit FileHandle(int fd) : fd_(fd) {}
  FileHandle(FileHandle&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ~FileHandle() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

const Tensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

std::string encode_safetensors(const std::vector<TensorView>& tensors, const Metadata& metadata,
                               std::string_view source) {
  std::vector<size_t> sizes;
  std::string header = make_header(tensors, metadata, source, sizes);
  std::string bytes = length_prefix(header.size()) + header;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] > 0) bytes.append(static_cast<const char*>(tensors[i].data), sizes[i]);
  }
  return bytes;
}

void write_safetensors(AtomicFile& file, const std::vector<TensorView>& tensors, const Metadata& metadata) {
  std::vector<size_t> sizes;
  std::string header = make_header(tensors, metadata, file.path(), sizes);
  file.write(length_prefix(header.size()));
  file.write(header);
  for (size_t i = 0; i < tensors.size(); ++i) file.write(tensors[i].data, sizes[i]);
}

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors, const Metadata& metadata) {
  AtomicFile file(path);  // removed again if the tensors are refused
  write_safetensors(file, tensors, metadata);
  file.commit();
}

SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view source) {
  check_file_size(bytes.size(), source);
  uint64_t header_length = decode_length(reinterpret_cast<const unsigned char*>(bytes.data()));
  uint64_t data_size = check_header_length(header_length, bytes.size(), source);
  Header header = parse_header(bytes.substr(8, header_length), data_size, source);
  const char* data = bytes.data() + 8 + header_length;
  SafetensorsFile file{{}, std::move(header.metadata)};
  file.tensors.reserve(header.entries.size());
  for (auto& entry : header.entries) {
    Tensor tensor{std::move(entry.name), entry.dtype, std::move(entry.shape), {}};
    tensor.data.resize(entry.end - entry.begin);
    if (!tensor.data.empty()) std::memcpy(tensor.data.data(), data + entry.begin, tensor.data.size());
    file.tensors.push_back(std::move(tensor));
  }
  verify_tensor_checksums(file, source);
  return file;
}

namespace {

// Opens `path` for reading a regular file (common/regular_file.h: a FIFO or a device in the file's place is
// refused at once). A missing file is an error unless `missing_ok` (then fd -1). Sets `size` to the file's.
FileHandle open_regular(const std::string& path, uint64_t& size, bool missing_ok) {
  RegularFile file = open_regular_file(path);
  if (!file.ok() && missing_ok && file.error == ENOENT && file.not_regular == nullptr) return FileHandle(-1);
  if (!file.ok()) fail(path, file.problem());
  size = file.size;
  return FileHandle(file.fd);
}

[[noreturn]] void read_failed(const std::string& path) {
  fail(path, errno != 0 ? fmt::format("cannot read: {}", std::strerror(errno))
                        : std::string("cannot read: the file became shorter while it was read"));
}

}  // namespace

std::optional<std::string> read_file_bytes(const std::string& path) {
  uint64_t size = 0;
  FileHandle fd = open_regular(path, size, /*missing_ok=*/true);
  if (fd.get() < 0) return std::nullopt;
  std::string bytes(size, '\0');
  if (!read_at(fd.get(), bytes.data(), bytes.size(), 0)) read_failed(path);
  return bytes;
}

SafetensorsFile read_safetensors(const std::string& path) {
  uint64_t file_size = 0;
  FileHandle fd = open_regular(path, file_size, /*missing_ok=*/false);
  check_file_size(file_size, path);
  unsigned char prefix[8];
  if (!read_at(fd.get(), prefix, 8, 0)) read_failed(path);
  uint64_t header_length = decode_length(prefix);
  uint64_t data_size = check_header_length(header_length, file_size, path);
  std::string text(header_length, '\0');
  if (!read_at(fd.get(), text.data(), text.size(), 8)) read_failed(path);
  Header header = parse_header(text, data_size, path);

  const uint64_t data_start = 8 + header_length;
  SafetensorsFile file{{}, std::move(header.metadata)};
  file.tensors.reserve(header.entries.size());
  for (auto& entry : header.entries) {
    Tensor tensor{std::move(entry.name), entry.dtype, std::move(entry.shape), {}};
    tensor.data.resize(entry.end - entry.begin);
    if (!read_at(fd.get(), tensor.data.data(), tensor.data.size(), data_start + entry.begin)) read_failed(path);
    file.tensors.push_back(std::move(tensor));
  }
  verify_tensor_checksums(file, path);
  return file;
}

}  // namespace train::model_io
