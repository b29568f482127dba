// poseidon._C's options (option_bindings.cc).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "poseidon/option_table.h"

namespace poseidon::python {

void bindOptions(pybind11::module_& m);
// A bool row's text for `value` (its words: "memory"/"messages", else "true"/"false").
std::string optionTextOfBool(const OptionSpec& spec, bool value);

}  // namespace poseidon::python
