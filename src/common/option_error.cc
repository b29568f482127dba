// OptionError (include/poseidon/options.h): a message that names options as "{field}" or
// "{field=value}", said by each front end in its own words. Apart from the options' checks
// so that components without them (data, model files; the fuzz targets) can raise it.
#include <functional>
#include <string>

#include "poseidon/options.h"

namespace poseidon {

using Say = std::function<std::string(const std::string& field, const std::string& value)>;

std::string sayOptions(const std::string& text, const Say& say) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t open; (open = text.find('{', at)) != std::string::npos;) {
    const std::size_t close = text.find('}', open);
    if (close == std::string::npos) break;
    const std::string inner = text.substr(open + 1, close - open - 1);
    const std::size_t eq = inner.find('=');
    out += text.substr(at, open - at);
    out += eq == std::string::npos ? say(inner, "") : say(inner.substr(0, eq), inner.substr(eq + 1));
    at = close + 1;
  }
  return out + text.substr(at);
}

namespace {

std::string memberName(const std::string& field, const std::string& value) {
  return value.empty() ? field : field + "=" + value;
}

}  // namespace

OptionError::OptionError(const std::string& text) : InputError(sayOptions(text, memberName)), text_(text) {}

std::string OptionError::in(const Say& say) const { return sayOptions(text_, say); }

std::string OptionError::field() const {
  const std::size_t open = text_.find('{');
  if (open == std::string::npos) return "";
  const std::size_t end = text_.find_first_of("=}", open);
  return text_.substr(open + 1, end == std::string::npos ? std::string::npos : end - open - 1);
}

}  // namespace poseidon
