// Values as the SageMaker training toolkit holds them: Python objects made by Python's json module. What a
// user's program gets from the toolkit is written by Python, so train writes it the same way: an argument
// as str() writes it (big integers exact, 1e15 as 1000000000000000.0, NaN as nan, a list as [1, 'a']), an
// SM_* variable as json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True) writes it.
// nlohmann::json cannot be that model: it turns integers beyond 64 bits into doubles, formats doubles its
// own way, refuses NaN and Infinity, and sorts dictionaries.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace train {

// One value of Python's json module: None, bool, int (any size: its decimal digits), float, str, list, or
// dict (keys in insertion order, as Python keeps them).
struct PythonValue {
  enum class Kind { none, boolean, integer, real, string, list, dict };
  // Declared here and defined where the type is complete (python_value.cpp): a vector of pairs holding
  // the type itself is complete only then, and clang's library checks (the fuzz build) insist.
  PythonValue();
  explicit PythonValue(Kind kind);
  PythonValue(const PythonValue&);
  PythonValue(PythonValue&&) noexcept;
  PythonValue& operator=(const PythonValue&);
  PythonValue& operator=(PythonValue&&) noexcept;
  ~PythonValue();

  Kind kind = Kind::none;
  bool flag = false;         // boolean
  std::string text;          // integer: decimal digits with an optional '-'; string: UTF-8
  double real = 0;           // real
  std::vector<PythonValue> items;                            // list
  std::vector<std::pair<std::string, PythonValue>> entries;  // dict

  static PythonValue make_string(std::string value);
  static PythonValue make_integer(int64_t value);
  bool is_string() const { return kind == Kind::string; }
  bool operator==(const PythonValue& other) const;
};

// A dict's value for `key`, or nullptr.
const PythonValue* find_entry(const PythonValue& dict, std::string_view key);

// A dict's entries sorted by key, as Python's sorted() orders str (code points: UTF-8's byte order).
std::vector<std::pair<std::string, PythonValue>> sorted_entries(const PythonValue& dict);

// Python's json.loads(text), nullopt where Python raises (not JSON; a byte order mark; an integer of more
// than 4,300 digits, Python's limit since 3.11; a lone UTF-16 surrogate, which Python would accept but the
// toolkit could not put into the environment). NaN, Infinity and -Infinity are accepted, as Python does.
std::optional<PythonValue> python_json_loads(std::string_view text);

// The toolkit's decoding of one hyperparameter (its read_hyperparameters): a string that json.loads takes
// becomes what it decodes to; anything else stays as it is.
PythonValue decode_toolkit_value(const PythonValue& raw);

// A value train holds as nlohmann::json (paths, host lists, parsed config files) as Python would hold it.
PythonValue python_value_from_json(const nlohmann::json& value);

// Python's repr() and str() (str is repr except for a string, which is itself).
std::string python_repr(const PythonValue& value);
std::string python_str(const PythonValue& value);

// Python's str.upper() of UTF-8 text: Unicode's full case mapping, one character at a time ("größe" ->
// "GRÖSSE", "ﬁ" -> "FI", "ı" -> "I"), from the table scripts/generate_python_upper.py writes with Python itself.
// The toolkit's SM_ names are "SM_" + name.upper().
std::string python_upper(std::string_view text);

// repr() of a float: the shortest digits that round-trip, in scientific notation when the decimal exponent
// is below -4 or at least 16 (1e-05, 1e+16), else positional with at least one decimal (0.0001, 1e15 as
// 1000000000000000.0); nan, inf, -inf.
std::string python_float_repr(double value);

// json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True): the toolkit's encoding of
// every SM_* value that is not a string. NaN and infinities as NaN, Infinity, -Infinity.
std::string python_json_dumps(const PythonValue& value);

}  // namespace train
