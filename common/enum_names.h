// An enum's names in one table, read both ways: the name of a value (logs, SM_* values) and the value of a
// name (parsing a job's files), plus the list of names for an error message. A switch for one direction and
// a chain of comparisons for the other would say every name twice.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace train {

template <typename Enum>
struct EnumName {
  Enum value;
  const char* name;
};

// The name of `value` in `names`; "?" for a value the table lacks.
template <typename Enum, std::size_t N>
constexpr const char* name_of(const EnumName<Enum> (&names)[N], Enum value) {
  for (const auto& entry : names) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

// The value named `name` (exactly, case included); nothing for a name the table lacks.
template <typename Enum, std::size_t N>
std::optional<Enum> value_named(const EnumName<Enum> (&names)[N], std::string_view name) {
  for (const auto& entry : names) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

// The names for a message: `none, crop or crop_color`, or with quote = "\"": `"File", "Pipe" or "FastFile"`.
template <typename Enum, std::size_t N>
std::string names_listed(const EnumName<Enum> (&names)[N], std::string_view quote = "") {
  std::string listed;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) listed += i + 1 == N ? " or " : ", ";
    listed.append(quote).append(names[i].name).append(quote);
  }
  return listed;
}

}  // namespace train
