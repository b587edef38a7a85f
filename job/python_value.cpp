#include "job/python_value.h"

#include "common/json_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace train {

PythonValue::PythonValue() = default;
PythonValue::PythonValue(Kind kind) : kind(kind) {}
PythonValue::PythonValue(const PythonValue&) = default;
PythonValue::PythonValue(PythonValue&&) noexcept = default;
PythonValue& PythonValue::operator=(const PythonValue&) = default;
PythonValue& PythonValue::operator=(PythonValue&&) noexcept = default;
PythonValue::~PythonValue() = default;

PythonValue PythonValue::make_string(std::string value) {
  PythonValue result;
  result.kind = Kind::string;
  result.text = std::move(value);
  return result;
}

PythonValue PythonValue::make_integer(int64_t value) {
  PythonValue result;
  result.kind = Kind::integer;
  result.text = std::to_string(value);
  return result;
}

bool PythonValue::operator==(const PythonValue& other) const {
  if (kind != other.kind) return false;
  switch (kind) {
    case Kind::none: return true;
    case Kind::boolean: return flag == other.flag;
    case Kind::integer:
    case Kind::string: return text == other.text;
    case Kind::real: return real == other.real || (std::isnan(real) && std::isnan(other.real));
    case Kind::list: return items == other.items;
    case Kind::dict: return entries == other.entries;
  }
  return false;
}

namespace {

// Python's limit on the digits of an int made from a string (sys.get_int_max_str_digits(), 3.11 on).
constexpr size_t max_integer_digits = 4300;

void append_utf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// The code points of valid UTF-8 (every text here was checked as UTF-8 when its file was read); a byte that
// does not start a valid sequence counts as the code point of its value.
std::vector<uint32_t> code_points(std::string_view text) {
  std::vector<uint32_t> codes;
  for (size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    int length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
    if (length <= 1 || i + length > text.size()) {
      codes.push_back(byte);
      ++i;
      continue;
    }
    uint32_t code = byte & (0x7F >> length);
    for (int k = 1; k < length; ++k) code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    codes.push_back(code);
    i += length;
  }
  return codes;
}

// Python's json.loads, after its C scanner (Modules/_json.c): the same grammar, NaN and Infinity included.
class PythonJsonParser {
 public:
  explicit PythonJsonParser(std::string_view text) : text_(text) {}

  std::optional<PythonValue> parse_document() {
    skip_whitespace();
    auto value = parse_value(0);
    if (!value) return std::nullopt;
    skip_whitespace();
    if (position_ != text_.size()) return std::nullopt;  // "Extra data"
    return value;
  }

 private:
  bool at_end() const { return position_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[position_]; }
  bool is_digit(size_t at) const { return at < text_.size() && text_[at] >= '0' && text_[at] <= '9'; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++position_;
  }

  bool take(std::string_view word) {
    if (text_.substr(position_, word.size()) != word) return false;
    position_ += word.size();
    return true;
  }

  std::optional<PythonValue> parse_value(int depth) {
    if (depth >= max_json_depth) return std::nullopt;  // deeper than any config: left as the string it is
    PythonValue value;
    switch (peek()) {
      case '"': {
        auto text = parse_string();
        if (!text) return std::nullopt;
        return PythonValue::make_string(std::move(*text));
      }
      case '{': return parse_object(depth);
      case '[': return parse_array(depth);
      case 'n':
        if (!take("null")) return std::nullopt;
        return value;
      case 't':
      case 'f':
        value.kind = PythonValue::Kind::boolean;
        value.flag = peek() == 't';
        if (!take(value.flag ? "true" : "false")) return std::nullopt;
        return value;
      case 'N':
        if (!take("NaN")) return std::nullopt;
        value.kind = PythonValue::Kind::real;
        value.real = std::nan("");
        return value;
      case 'I':
        if (!take("Infinity")) return std::nullopt;
        value.kind = PythonValue::Kind::real;
        value.real = HUGE_VAL;
        return value;
      default:
        if (take("-Infinity")) {
          value.kind = PythonValue::Kind::real;
          value.real = -HUGE_VAL;
          return value;
        }
        return parse_number();
    }
  }

  std::optional<PythonValue> parse_number() {
    const size_t start = position_;
    if (peek() == '-') ++position_;
    if (peek() == '0') {
      ++position_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (is_digit(position_)) ++position_;
    } else {
      return std::nullopt;
    }
    bool is_float = false;
    if (peek() == '.' && is_digit(position_ + 1)) {
      is_float = true;
      position_ += 2;
      while (is_digit(position_)) ++position_;
    }
    if (peek() == 'e' || peek() == 'E') {
      size_t exponent = position_ + 1;
      if (exponent < text_.size() && (text_[exponent] == '-' || text_[exponent] == '+')) ++exponent;
      if (is_digit(exponent)) {
        is_float = true;
        position_ = exponent;
        while (is_digit(position_)) ++position_;
      }
    }
    const std::string lexeme(text_.substr(start, position_ - start));
    PythonValue value;
    if (is_float) {
      value.kind = PythonValue::Kind::real;
      value.real = std::strtod(lexeme.c_str(), nullptr);  // correctly rounded; out of range gives +-inf or 0
      return value;
    }
    value.kind = PythonValue::Kind::integer;
    value.text = lexeme == "-0" ? "0" : lexeme;
    if (value.text.size() - (value.text[0] == '-' ? 1 : 0) > max_integer_digits) return std::nullopt;
    return value;
  }

  std::optional<uint32_t> hex4(size_t at) const {
    if (at + 4 > text_.size()) return std::nullopt;
    uint32_t code = 0;
    auto [end, error] = std::from_chars(text_.data() + at, text_.data() + at + 4, code, 16);
    if (error != std::errc() || end != text_.data() + at + 4) return std::nullopt;
    return code;
  }

  std::optional<std::string> parse_string() {
    ++position_;  // the opening quote
    std::string out;
    while (true) {
      if (at_end()) return std::nullopt;
      char c = text_[position_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return std::nullopt;  // strict: no control characters
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) return std::nullopt;
      char escaped = text_[position_++];
      switch (escaped) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          auto code = hex4(position_);
          if (!code) return std::nullopt;
          position_ += 4;
          if (*code >= 0xD800 && *code <= 0xDBFF && text_.substr(position_, 2) == "\\u") {
            auto low = hex4(position_ + 2);
            if (low && *low >= 0xDC00 && *low <= 0xDFFF) {
              position_ += 6;
              *code = 0x10000 + ((*code - 0xD800) << 10) + (*low - 0xDC00);
            }
          }
          // A lone surrogate, or NUL: Python keeps them, but no environment variable or argument can hold them.
          if ((*code >= 0xD800 && *code <= 0xDFFF) || *code == 0) return std::nullopt;
          append_utf8(out, *code);
          break;
        }
        default: return std::nullopt;
      }
    }
  }

  // From the opening bracket: elements, each read by parse_element() (false where there is none), separated
  // by commas and ended by `close`, whitespace around each. False where the text is not such a sequence.
  template <typename ParseElement>
  bool parse_sequence(char close, const ParseElement& parse_element) {
    ++position_;
    skip_whitespace();
    if (peek() == close) {
      ++position_;
      return true;
    }
    while (true) {
      if (!parse_element()) return false;
      skip_whitespace();
      if (peek() == close) {
        ++position_;
        return true;
      }
      if (peek() != ',') return false;
      ++position_;
      skip_whitespace();
    }
  }

  std::optional<PythonValue> parse_object(int depth) {
    PythonValue value;
    value.kind = PythonValue::Kind::dict;
    const bool parsed = parse_sequence('}', [&] {
      if (peek() != '"') return false;
      auto key = parse_string();
      if (!key) return false;
      skip_whitespace();
      if (peek() != ':') return false;
      ++position_;
      skip_whitespace();
      auto item = parse_value(depth + 1);
      if (!item) return false;
      // A repeated key keeps its first place and takes the later value, as a Python dict does.
      auto same = std::find_if(value.entries.begin(), value.entries.end(),
                               [&](const auto& entry) { return entry.first == *key; });
      if (same != value.entries.end()) same->second = std::move(*item);
      else value.entries.emplace_back(std::move(*key), std::move(*item));
      return true;
    });
    if (!parsed) return std::nullopt;
    return value;
  }

  std::optional<PythonValue> parse_array(int depth) {
    PythonValue value;
    value.kind = PythonValue::Kind::list;
    const bool parsed = parse_sequence(']', [&] {
      auto item = parse_value(depth + 1);
      if (!item) return false;
      value.items.push_back(std::move(*item));
      return true;
    });
    if (!parsed) return std::nullopt;
    return value;
  }

  std::string_view text_;
  size_t position_ = 0;
};

struct CodeRange {
  uint32_t first, last;
};
constexpr CodeRange unprintable_ranges[] = {
#include "job/python_unprintable.inc"
};

struct UpperMapping {
  uint32_t code;
  uint32_t upper[3];  // one to three code points, then zeros
};
constexpr UpperMapping upper_mappings[] = {
#include "job/python_upper.inc"
};

// Python's str.isprintable() of one character.
bool is_printable(uint32_t code) {
  if (code < 0x80) return code >= 0x20 && code != 0x7F;
  auto after = std::upper_bound(std::begin(unprintable_ranges), std::end(unprintable_ranges), code,
                                [](uint32_t value, const CodeRange& range) { return value < range.first; });
  return after == std::begin(unprintable_ranges) || code > std::prev(after)->last;
}

// Python's repr() of a str (Objects/unicodeobject.c, unicode_repr).
std::string string_repr(const std::string& text) {
  const auto codes = code_points(text);
  const bool has_single = std::find(codes.begin(), codes.end(), '\'') != codes.end();
  const bool has_double = std::find(codes.begin(), codes.end(), '"') != codes.end();
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t code : codes) {
    if (code == static_cast<uint32_t>(quote) || code == '\\') {
      out += '\\';
      out += static_cast<char>(code);
    } else if (code == '\t') {
      out += "\\t";
    } else if (code == '\n') {
      out += "\\n";
    } else if (code == '\r') {
      out += "\\r";
    } else if (is_printable(code)) {
      append_utf8(out, code);
    } else if (code <= 0xFF) {
      out += fmt::format("\\x{:02x}", code);
    } else if (code <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", code);
    } else {
      out += fmt::format("\\U{:08x}", code);
    }
  }
  return out + quote;
}

// json.dumps of a str with ensure_ascii=True (Modules/_json.c, ascii_escape_unicode).
std::string string_json(const std::string& text) {
  std::string out = "\"";
  for (uint32_t code : code_points(text)) {
    switch (code) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (code >= ' ' && code <= '~') {
      out += static_cast<char>(code);
    } else if (code >= 0x10000) {
      const uint32_t value = code - 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 | (value >> 10), 0xDC00 | (value & 0x3FF));
    } else {
      out += fmt::format("\\u{:04x}", code);
    }
  }
  return out + "\"";
}

template <typename Item>
std::string joined(const std::vector<Item>& items, const char* separator, auto&& write) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + write(item);
  return out;
}

}  // namespace

const PythonValue* find_entry(const PythonValue& dict, std::string_view key) {
  for (const auto& [name, value] : dict.entries) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::vector<std::pair<std::string, PythonValue>> sorted_entries(const PythonValue& dict) {
  auto entries = dict.entries;
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return entries;
}

std::optional<PythonValue> python_json_loads(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") return std::nullopt;  // "Unexpected UTF-8 BOM"
  return PythonJsonParser(text).parse_document();
}

PythonValue decode_toolkit_value(const PythonValue& raw) {
  if (!raw.is_string()) return raw;
  auto decoded = python_json_loads(raw.text);
  return decoded ? std::move(*decoded) : raw;
}

PythonValue python_value_from_json(const nlohmann::json& value) {
  PythonValue result;
  using Kind = PythonValue::Kind;
  if (value.is_boolean()) {
    result.kind = Kind::boolean;
    result.flag = value.get<bool>();
  } else if (value.is_number_unsigned()) {
    result.kind = Kind::integer;
    result.text = std::to_string(value.get<uint64_t>());
  } else if (value.is_number_integer()) {
    result = PythonValue::make_integer(value.get<int64_t>());
  } else if (value.is_number_float()) {
    result.kind = Kind::real;
    result.real = value.get<double>();
  } else if (value.is_string()) {
    result = PythonValue::make_string(value.get<std::string>());
  } else if (value.is_array()) {
    result.kind = Kind::list;
    for (const auto& item : value) result.items.push_back(python_value_from_json(item));
  } else if (value.is_object()) {
    result.kind = Kind::dict;
    for (const auto& [key, item] : value.items()) result.entries.emplace_back(key, python_value_from_json(item));
  }
  return result;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // The shortest digits that read back as `value` (what Python's repr takes from David Gay's dtoa, mode 0).
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string text(buffer, end);
  std::string sign;
  if (text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const size_t e = text.find('e');
  std::string digits = text.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::atoi(text.c_str() + e + 1);
  const int point = exponent + 1;  // value = 0.DIGITS x 10^point
  const int count = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {  // Python's float_repr_style 'short': scientific outside [1e-4, 1e16)
    std::string mantissa = digits.substr(0, 1) + (count > 1 ? "." + digits.substr(1) : "");
    return fmt::format("{}{}e{}{:02d}", sign, mantissa, exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  if (point <= 0) return sign + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (point >= count) return sign + digits + std::string(static_cast<size_t>(point - count), '0') + ".0";
  return sign + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

std::string python_upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (uint32_t code : code_points(text)) {
    auto found = std::lower_bound(std::begin(upper_mappings), std::end(upper_mappings), code,
                                  [](const UpperMapping& mapping, uint32_t value) { return mapping.code < value; });
    if (found == std::end(upper_mappings) || found->code != code) {
      append_utf8(out, code);
      continue;
    }
    for (uint32_t upper : found->upper) {
      if (upper != 0) append_utf8(out, upper);
    }
  }
  return out;
}

std::string python_repr(const PythonValue& value) {
  using Kind = PythonValue::Kind;
  switch (value.kind) {
    case Kind::none: return "None";
    case Kind::boolean: return value.flag ? "True" : "False";
    case Kind::integer: return value.text;
    case Kind::real: return python_float_repr(value.real);
    case Kind::string: return string_repr(value.text);
    case Kind::list:
      return "[" + joined(value.items, ", ", [](const PythonValue& item) { return python_repr(item); }) + "]";
    case Kind::dict:
      return "{" + joined(value.entries, ", ", [](const auto& entry) {
               return string_repr(entry.first) + ": " + python_repr(entry.second);
             }) + "}";
  }
  return "";
}

std::string python_str(const PythonValue& value) { return value.is_string() ? value.text : python_repr(value); }

std::string python_json_dumps(const PythonValue& value) {
  using Kind = PythonValue::Kind;
  switch (value.kind) {
    case Kind::none: return "null";
    case Kind::boolean: return value.flag ? "true" : "false";
    case Kind::integer: return value.text;
    case Kind::real:
      if (std::isnan(value.real)) return "NaN";
      if (std::isinf(value.real)) return value.real < 0 ? "-Infinity" : "Infinity";
      return python_float_repr(value.real);
    case Kind::string: return string_json(value.text);
    case Kind::list:
      return "[" + joined(value.items, ",", [](const PythonValue& item) { return python_json_dumps(item); }) + "]";
    case Kind::dict: {
      return "{" + joined(sorted_entries(value), ",", [](const auto& entry) {
               return string_json(entry.first) + ":" + python_json_dumps(entry.second);
             }) + "}";
    }
  }
  return "";
}

}  // namespace train
