// Python's json.loads, str(), repr() and json.dumps as the toolkit's values need them. Every expected string
// here is what CPython 3.11 writes for the same input (json.loads(s), then str() or json.dumps(sort_keys=True,
// separators=(",", ":"), ensure_ascii=True)); tests/toolkit compares train with the toolkit itself.
#include "job/python_value.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

using namespace train;

namespace {

struct Written {
  std::string str, dumps;
};

Written written(const std::string& json) {
  auto value = python_json_loads(json);
  if (!value) FAIL("python_json_loads refused " << json);
  return {python_str(*value), python_json_dumps(*value)};
}

}  // namespace

TEST_CASE("Python values: numbers as json.loads then str() and json.dumps write them", "[python_value]") {
  struct Row {
    const char* json;
    const char* str;
    const char* dumps;
  };
  const Row rows[] = {
      {"123456789012345678901234567890", "123456789012345678901234567890", "123456789012345678901234567890"},
      {"-98765432109876543210", "-98765432109876543210", "-98765432109876543210"},
      {"1e15", "1000000000000000.0", "1000000000000000.0"},
      {"1e16", "1e+16", "1e+16"},
      {"0.0001", "0.0001", "0.0001"},
      {"0.00001", "1e-05", "1e-05"},
      {"NaN", "nan", "NaN"},
      {"Infinity", "inf", "Infinity"},
      {"-Infinity", "-inf", "-Infinity"},
      {"1E400", "inf", "Infinity"},
      {"-1e400", "-inf", "-Infinity"},
      {"1e-400", "0.0", "0.0"},
      {"-0.0", "-0.0", "-0.0"},
      {"-0", "0", "0"},
      {"1.5e300", "1.5e+300", "1.5e+300"},
      {"100.0", "100.0", "100.0"},
      {"0.1", "0.1", "0.1"},
      {"1e22", "1e+22", "1e+22"},
      {"123456789.123456789", "123456789.12345679", "123456789.12345679"},
      {"5e-324", "5e-324", "5e-324"},
      {"1.7976931348623157e308", "1.7976931348623157e+308", "1.7976931348623157e+308"},
  };
  for (const auto& row : rows) {
    INFO(row.json);
    const Written out = written(row.json);
    CHECK(out.str == row.str);
    CHECK(out.dumps == row.dumps);
  }
  CHECK(python_float_repr(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(python_float_repr(0.0) == "0.0");
  CHECK(python_float_repr(1234.5) == "1234.5");
  CHECK(python_float_repr(9999999999999998.0) == "9999999999999998.0");
  CHECK(python_float_repr(1e-4) == "0.0001");
  CHECK(python_float_repr(0.000123) == "0.000123");
}

TEST_CASE("Python values: lists, dicts and strings as repr() and json.dumps write them", "[python_value]") {
  // Dicts keep their insertion order in str(); json.dumps sorts; a repeated key keeps its first place.
  CHECK(written(R"([1, "a", {"b": 2, "a": [true, null]}])").str == "[1, 'a', {'b': 2, 'a': [True, None]}]");
  CHECK(written(R"([1, "a", {"b": 2, "a": [true, null]}])").dumps == R"([1,"a",{"a":[true,null],"b":2}])");
  CHECK(written(R"({"b":1,"a":2,"b":3})").str == "{'b': 3, 'a': 2}");
  CHECK(written(R"({"b":1,"a":2,"b":3})").dumps == R"({"a":2,"b":3})");
  // A string alone is itself; inside a list, its repr: the quote that needs no escape, \x, \u and \U escapes
  // for what Python does not print (U+00A0 and U+200B among them), printable non-ASCII as it is.
  CHECK(written(R"("it's")").str == "it's");
  CHECK(written(R"(["it's", "say \"hi\" it's", "\u00a0\u00e9\u200b\ud83d\ude00\u0007\u007f\t\\", "a'b\"c"])").str ==
        R"(["it's", 'say "hi" it\'s', '\xa0é\u200b😀\x07\x7f\t\\', 'a\'b"c'])");
  CHECK(written(R"("\u00a0\u00e9\u200b\ud83d\ude00\u0007\u007f")").dumps ==
        R"("\u00a0\u00e9\u200b\ud83d\ude00\u0007\u007f")");
}

TEST_CASE("Python values: what json.loads refuses stays the string it was", "[python_value]") {
  for (const char* text : {"", "sgd", "01", "1.", ".5", "1e", "+1", "[1,]", "{\"a\":1,}", "nan", "infinity", "True",
                           "'a'", "[1] x", "\"tab\there\"", "\"\\x41\"", "\xEF\xBB\xBF" "1", "\"\\ud800\"", "\"\\u0000\""}) {
    INFO(text);
    CHECK_FALSE(python_json_loads(text).has_value());
    CHECK(decode_toolkit_value(PythonValue::make_string(text)) == PythonValue::make_string(text));
  }
  // White space as Python allows it, around and inside; a number of 4,300 digits is Python's limit.
  CHECK(python_json_loads(" \t\n[ 1 ,\r2 ] ").has_value());
  CHECK(python_json_loads(std::string(4300, '7')).has_value());
  CHECK_FALSE(python_json_loads(std::string(4301, '7')).has_value());
  // Deeper than any config file nests: a string.
  CHECK_FALSE(python_json_loads(std::string(100, '[') + std::string(100, ']')).has_value());
}

TEST_CASE("Python values: values train holds as nlohmann::json", "[python_value]") {
  const auto value = python_value_from_json(nlohmann::json{{"hosts", {"algo-1", "algo-2"}}, {"n", 18446744073709551615u},
                                                           {"f", 1e15}, {"ok", true}, {"none", nullptr}});
  CHECK(python_json_dumps(value) == R"({"f":1000000000000000.0,"hosts":["algo-1","algo-2"],"n":18446744073709551615,)"
                                    R"("none":null,"ok":true})");
}

TEST_CASE("Python values: str.upper() with Unicode's full case mapping", "[python_value]") {
  // Issue 31: SM_HP_ names were upper-cased in ASCII only ("größe" gave SM_HP_GRößE). Each expected value is
  // Python 3.11's "...".upper() (the table is generated from it: scripts/generate_python_upper.py).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"größe", "GRÖSSE"},          // ß becomes two letters
      {"ß", "SS"},
      {"ﬁ", "FI"},                  // a ligature
      {"ﬃ", "FFI"},                 // three
      {"µ", "\u039C"},              // the micro sign becomes Greek capital mu
      {"ǆ", "Ǆ"},
      {"ǅ", "Ǆ"},                   // a title-case letter
      {"ŉ", "\u02BCN"},
      {"ı", "I"},                   // dotless i: no Turkish rules in Python
      {"i\u0307", "I\u0307"},       // nor a context: the combining dot stays
      {"ΐ", "\u0399\u0308\u0301"},  // decomposed into three
      {"ᾀ", "\u1F08\u0399"},        // iota subscript becomes a capital iota
      {"\U00010428", "\U00010400"}, // beyond the BMP (Deseret)
      {"ꭰ", "\u13A0"},              // Cherokee small letters become the old capitals
      {"a-b_c1", "A-B_C1"},         // ASCII, hyphens, underscores and digits
      {"\u3164", "\u3164"},         // no case at all
      {"", ""},
  };
  for (const auto& [text, upper] : cases) {
    INFO(text);
    CHECK(python_upper(text) == upper);
  }
}
