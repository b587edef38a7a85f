#include "json_file.h"

#include "config_error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
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

// nlohmann's messages start with "[json.exception.parse_error.101] "; users need only the rest.
std::string strip_exception_tag(const std::string& what) {
  if (!what.empty() && what[0] == '[') {
    auto end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate_key;
  auto watch_duplicates = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
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
    document = nlohmann::json::parse(text.begin(), text.end(), watch_duplicates);
  } catch (const nlohmann::json::exception& error) {
    throw ConfigError(fmt::format("{}: not valid JSON ({}); fix the file so that it is one UTF-8 JSON object",
                                  source, strip_exception_tag(error.what())));
  }
  if (!duplicate_key.empty()) {
    throw ConfigError(fmt::format("{}: key \"{}\" appears more than once in one object; keep exactly one", source,
                                  duplicate_key));
  }
  return document;
}

std::string read_small_file(const std::filesystem::path& path, size_t limit) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) {
    throw ConfigError(fmt::format("{}: cannot open ({})", path.string(), std::strerror(errno)));
  }
  std::string content;
  char chunk[65536];
  while (stream.read(chunk, sizeof chunk) || stream.gcount() > 0) {
    content.append(chunk, static_cast<size_t>(stream.gcount()));
    if (content.size() > limit) {
      throw ConfigError(fmt::format("{}: larger than {} bytes; this is not a job description file",
                                    path.string(), limit));
    }
  }
  if (stream.bad()) {
    throw ConfigError(fmt::format("{}: read failed ({})", path.string(), std::strerror(errno)));
  }
  return content;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_small_file(path, max_config_file_bytes), path.string());
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
    size_t cut = max_shown;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + fmt::format("... ({} characters)", text.size());
  }
  return text;
}

}  // namespace train
