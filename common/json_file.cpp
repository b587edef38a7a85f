#include "common/json_file.h"

#include "common/config_error.h"
#include "common/regular_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <set>
#include <vector>

namespace train {

void ConfigProblems::throw_if_any() const {
  if (messages_.empty()) return;
  std::string joined;
  for (const auto& message : messages_) {
    if (!joined.empty()) joined += '\n';
    joined += message;
  }
  throw ConfigError(joined);
}

namespace {

// The length of the valid UTF-8 sequence that starts at text[i], or 0 when none does.
size_t utf8_sequence_length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
  auto continuation = [&](size_t k, unsigned low = 0x80, unsigned high = 0xBF) {
    return byte(k) >= low && byte(k) <= high;
  };
  unsigned lead = byte(i);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(i + 1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    unsigned low = lead == 0xE0 ? 0xA0 : 0x80, high = lead == 0xED ? 0x9F : 0xBF;
    return continuation(i + 1, low, high) && continuation(i + 2) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    unsigned low = lead == 0xF0 ? 0x90 : 0x80, high = lead == 0xF4 ? 0x8F : 0xBF;
    return continuation(i + 1, low, high) && continuation(i + 2) && continuation(i + 3) ? 4 : 0;
  }
  return 0;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; users need only the rest. They also
// quote the token being read ("last read: '...'") byte for byte: possibly megabytes of a long string, and
// possibly the very bytes that are not UTF-8. Keep the token's end (where the fault is), escape what is not
// UTF-8, and bound the whole.
std::string describe_parse_error(const std::string& what) {
  constexpr size_t max_token_shown = 40;
  constexpr size_t max_message = 300;
  std::string message = what;
  if (!message.empty() && message[0] == '[') {
    auto end = message.find("] ");
    if (end != std::string::npos) message = message.substr(end + 2);
  }
  const std::string marker = "last read: '";
  if (auto start = message.find(marker); start != std::string::npos) {
    start += marker.size();
    // The token ends at the quote before "; expected ..." when there is one, else at the final quote.
    size_t end = message.rfind("'; expected ");
    if (end == std::string::npos || end < start) end = message.size() - 1;
    if (end > start && end - start > max_token_shown) {
      size_t keep_from = end - max_token_shown;
      while (keep_from < end && (static_cast<unsigned char>(message[keep_from]) & 0xC0) == 0x80) ++keep_from;
      message = message.substr(0, start) + "..." + message.substr(keep_from);
    }
  }
  message = escape_invalid_utf8(message);
  if (message.size() > max_message) message = cut_utf8(message, max_message) + "...";
  return message;
}

}  // namespace

JsonTooDeep::JsonTooDeep()
    : std::runtime_error(fmt::format("it nests lists and objects more than {} levels deep", max_json_depth)) {}

std::string describe_json_value(const nlohmann::json& value) {
  if (value.is_null()) return "null";
  return describe_json_type(value) + " " + quote_json_for_message(value);
}

std::string escape_invalid_utf8(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      escaped += fmt::format("\\x{:02X}", static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      escaped.append(text.substr(i, length));
      i += length;
    }
  }
  return escaped;
}

std::string cut_utf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut));
}

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate_key;
  auto watch_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using event_t = nlohmann::json::parse_event_t;
    if (event == event_t::object_start) {
      keys_per_object.emplace_back();
    } else if (event == event_t::object_end) {
      if (!keys_per_object.empty()) keys_per_object.pop_back();
    } else if (event == event_t::key && !keys_per_object.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys_per_object.back().insert(key).second && duplicate_key.empty()) duplicate_key = key;
    }
    return true;
  };
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text.begin(), text.end(), json_depth_limited<nlohmann::json>(watch_duplicates));
  } catch (const nlohmann::json::exception& error) {
    throw ConfigError(fmt::format("{}: not valid JSON ({}); fix the file so that it is one UTF-8 JSON object",
                                  source, describe_parse_error(error.what())));
  } catch (const JsonTooDeep&) {
    throw ConfigError(fmt::format("{}: expected at most {} levels of nested lists and objects, found more; a job "
                                  "description file needs only a few, so fix the file",
                                  source, max_json_depth));
  }
  if (!duplicate_key.empty()) {
    throw ConfigError(fmt::format("{}: key {} appears more than once in one object; keep exactly one", source,
                                  quote_json_for_message(nlohmann::json(duplicate_key))));
  }
  return document;
}

std::string read_small_file(const std::filesystem::path& path, size_t limit) {
  // Refused before reading when not a regular file: a FIFO (or a device) in a config file's place would
  // otherwise hang `train` and `train validate` with no word.
  RegularFile file = open_regular_file(path.string());
  if (file.not_regular != nullptr) {
    throw ConfigError(fmt::format("{}: expected a regular file holding JSON, found {}; replace it with the file",
                                  path.string(), file.not_regular));
  }
  if (!file.ok()) throw ConfigError(fmt::format("{}: cannot open ({})", path.string(), std::strerror(file.error)));
  const int fd = file.fd;
  std::string content;
  char chunk[65536];
  while (true) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      throw ConfigError(fmt::format("{}: read failed ({})", path.string(), std::strerror(error)));
    }
    if (got == 0) break;
    content.append(chunk, static_cast<size_t>(got));
    if (content.size() > limit) {
      ::close(fd);
      throw ConfigError(fmt::format("{}: larger than {} bytes; this is not a job description file",
                                    path.string(), limit));
    }
  }
  ::close(fd);
  return content;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_small_file(path, max_config_file_bytes), path.string());
}

void require_json_object(const nlohmann::json& document, const std::string& source, std::string_view what) {
  if (!document.is_object()) {
    throw ConfigError(fmt::format("{}: expected a JSON object {}, got {}", source, what, describe_json_type(document)));
  }
}

std::string describe_json_type(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

std::string quote_json_for_message(const nlohmann::json& value) {
  constexpr size_t max_shown = 60;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_shown) {
    // Cut on a UTF-8 character boundary so the message itself stays valid UTF-8.
    text = cut_utf8(text, max_shown) + fmt::format("... ({} characters)", text.size());
  }
  return text;
}

}  // namespace train
