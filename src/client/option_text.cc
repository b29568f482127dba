// Options as text (include/poseidon/option_table.h): the one parser both front ends use for
// every option's value, and each option said in a front end's words.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "coordinator/units.h"
#include "poseidon/option_table.h"

namespace poseidon {

namespace {

[[noreturn]] void refuse(const OptionSpec& s, const std::string& text, const char* what) {
  throw OptionError(detail::cat("{", s.name, "=", text, "}: ", what));
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// A kBool's two words: the row's ("memory/messages") or true/false.
std::pair<std::string, std::string> boolWords(const OptionSpec& s) {
  if (!s.words) return {"true", "false"};
  const std::string w = s.words;
  const std::size_t slash = w.find('/');
  return {w.substr(0, slash), w.substr(slash + 1)};
}

bool boolFrom(const OptionSpec& s, const std::string& text) {
  const auto [yes, no] = boolWords(s);
  const std::string t = lower(text);
  if (t == yes || t == "true" || t == "1" || t == "on") return true;
  if (t == no || t == "false" || t == "0" || t == "off") return false;
  refuse(s, text, ("use " + yes + " or " + no).c_str());
}

template <typename T>
T wholeFrom(const OptionSpec& s, const std::string& text) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, v);
  if (error == std::errc::result_out_of_range) refuse(s, text, "out of range");
  if (error != std::errc() || at != end) refuse(s, text, "give a whole number");
  return v;
}

double realFrom(const OptionSpec& s, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) refuse(s, text, "give a number");
  return v;
}

// "50G", "5e10", "0": flop/s.
double flopsFrom(const OptionSpec& s, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = lower(end ? end : "");
  const double scale = unit.empty() ? 1 : unit == "k" ? 1e3 : unit == "m" ? 1e6 : unit == "g" ? 1e9 : unit == "t" ? 1e12 : 0;
  if (end == text.c_str() || scale == 0 || !std::isfinite(v)) refuse(s, text, "give flop/s such as 50G or 5e10");
  return v * scale;
}

// The shortest text that reads back as the same value.
template <typename T>
std::string shortest(T v) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

double numberFrom(const OptionSpec& s, const std::string& text) {
  if (s.kind == OptionKind::kRate) return parseRateOrOff(text, s.name);
  if (s.kind == OptionKind::kFlops) return flopsFrom(s, text);
  return realFrom(s, text);
}

std::string dashes(const std::string& name) {
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

}  // namespace

std::string optionText(const OptionSpec& s, const Options& o) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = o.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? boolWords(s).first : boolWords(s).second;
        } else if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
          return shortest(v.count() / 1000.0);
        } else {
          if (s.kind == OptionKind::kDevices && v == 0) return "host";
          return shortest(v);
        }
      },
      s.member);
}

void setOption(Options& o, const OptionSpec& s, const std::string& text) {
  std::visit(
      [&](auto member) {
        auto& v = o.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          v = boolFrom(s, text);
        } else if constexpr (std::is_same_v<T, std::string>) {
          v = text;
        } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
          v = std::chrono::milliseconds(std::llround(realFrom(s, text) * 1000));
        } else if constexpr (std::is_floating_point_v<T>) {
          v = static_cast<T>(numberFrom(s, text));
        } else if (s.kind == OptionKind::kDevices) {
          v = parseDevicesPerNode(text);
        } else {
          v = wholeFrom<T>(s, text);
        }
      },
      s.member);
}

std::string cliFlag(const OptionSpec& s) { return s.flag ? s.flag : dashes(s.name); }

std::string sayInCli(const std::string& field, const std::string& value) {
  if (field == "schedule_plan") return "--profile FILE (or --emulate-compute FILE)";
  const OptionSpec* s = findOption(field);
  if (s && !(s->fronts & kCliFront) && s->cli_words) return s->cli_words;
  const std::string flag = s && (s->fronts & kCliFront) ? cliFlag(*s) : dashes(field);
  // A plain bool's flag sets its non-default value: the flag alone says it.
  if (s && s->kind == OptionKind::kBool && !s->words) return flag;
  return value.empty() ? flag : flag + " " + value;
}

std::string sayInPython(const std::string& field, const std::string& value) {
  if (field == "schedule_plan") return "profile=FILE";
  const OptionSpec* s = findOption(field);
  if (s && s->kind == OptionKind::kBool) {
    // No value: the message is about the non-default setting. Never parsed (a message about
    // a bad value must not fail in the saying).
    const auto [yes, no] = boolWords(*s);
    const std::string v = lower(value);
    const std::string said = value.empty() ? (optionText(*s, Options{}) == yes ? "False" : "True")
                             : v == yes || v == "true" || v == "1" ? "True"
                             : v == no || v == "false" || v == "0" ? "False"
                                                                   : value;
    if (s->python_words && said == "True") return s->python_words;
    return field + "=" + said;
  }
  if (s && s->python_words) return value.empty() ? s->python_words : s->python_words + ("=" + value);
  return value.empty() ? field : field + "=" + value;
}

}  // namespace poseidon
