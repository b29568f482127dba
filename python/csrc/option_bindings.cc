// poseidon._C's options: Options with an attribute per row of the option table, the table
// itself (DistributedModel's keywords, defaults and docstring are read from it) and its
// parser, which turns each keyword's value into the member, as the CLI's flags.
#include "option_bindings.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "poseidon/option_table.h"
#include "profile/compute_profile.h"
#include "simulate/profiled_model.h"

namespace py = pybind11;

namespace poseidon::python {
namespace {

const char* kindName(OptionKind kind) {
  switch (kind) {
    case OptionKind::kBool: return "bool";
    case OptionKind::kWhole: return "int";
    case OptionKind::kReal: return "float";
    case OptionKind::kText: return "str";
    case OptionKind::kSeconds: return "seconds";
    case OptionKind::kRate: return "rate";
    case OptionKind::kFlops: return "flops";
    case OptionKind::kDevices: return "devices";
  }
  return "?";
}

// A row's value in Options as the Python keyword takes it: seconds as a float, "host" for
// devices_per_node 0, the rest as the member's own type.
py::object keywordValue(const OptionSpec& spec, const Options& o) {
  if (spec.kind == OptionKind::kDevices && optionText(spec, o) == "host") return py::str("host");
  return std::visit(
      [&](auto member) -> py::object {
        const auto& v = o.*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::chrono::milliseconds>) {
          return py::float_(v.count() / 1000.0);
        } else {
          return py::cast(v);
        }
      },
      spec.member);
}

// A keyword's value as the table's text: True/False as a bool row's words (and as words no
// other row takes), None as 0 (none), whole numbers (numpy's, and floats such as 4e6 where a
// whole number is asked for) as int() writes them, other numbers as float's repr (the
// shortest exact text), anything else as str().
std::string keywordText(const OptionSpec& spec, const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) {
    const bool on = value.cast<bool>();
    return spec.kind == OptionKind::kBool ? optionTextOfBool(spec, on) : on ? "True" : "False";
  }
  if (value.is_none()) return "0";
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  const py::object v = py::reinterpret_borrow<py::object>(value);
  const bool whole = spec.kind == OptionKind::kWhole || spec.kind == OptionKind::kDevices;
  if (whole && py::isinstance<py::float_>(value) && v.attr("is_integer")().cast<bool>()) {
    return py::str(py::int_(v)).cast<std::string>();
  }
  if (py::hasattr(value, "__index__")) return py::str(py::int_(v)).cast<std::string>();
  if (py::hasattr(value, "__float__")) return py::repr(py::float_(v)).cast<std::string>();
  return py::str(value).cast<std::string>();
}

const OptionSpec& rowOf(const std::string& name) {
  const OptionSpec* spec = findOption(name);
  if (!spec) throw InputError("no option " + name);
  return *spec;
}

py::list tableForPython() {
  const Options defaults;
  py::list rows;
  for (const OptionSpec& spec : optionTable()) {
    py::dict row;
    row["name"] = spec.name;
    row["kind"] = kindName(spec.kind);
    row["python"] = (spec.fronts & kPythonFront) != 0;
    row["cli"] = (spec.fronts & kCliFront) != 0;
    row["group"] = spec.group;
    row["default"] = keywordValue(spec, defaults);
    row["help"] = sayOptions(spec.help, sayInPython);
    row["server_only"] = spec.server_only;
    rows.append(row);
  }
  return rows;
}

}  // namespace

std::string optionTextOfBool(const OptionSpec& spec, bool value) {
  Options o;
  std::visit(
      [&](auto member) {
        if constexpr (std::is_same_v<std::decay_t<decltype(o.*member)>, bool>) o.*member = value;
      },
      spec.member);
  return optionText(spec, o);
}

void bindOptions(py::module_& m) {
  // Raises ValueError naming the bad option as its keyword (the session checks again).
  m.def("validate_options", [](const Options& o) { validate(o); });
  m.def("check_checkpoint_options", &checkCheckpointOptions, py::arg("dir"), py::arg("every"));
  // The run-configuration string (include/poseidon/options.h): what every rank must share
  // at start-up, or (resume=True) what a resumed run must share with the saved one.
  m.def("run_configuration", [](const Options& o, bool resume) {
    return runConfiguration(o, resume ? ConfigurationUse::kResume : ConfigurationUse::kStart);
  });
  m.def("option_table", &tableForPython, "Every option's row: name, kind, fronts, group, default, help");
  auto options = py::class_<Options>(m, "Options").def(py::init<>());
  for (const OptionSpec& spec : optionTable()) {
    std::visit([&](auto member) { options.def_readwrite(spec.name, member); }, spec.member);
  }
  options
      .def(
          "set",
          [](Options& o, const std::string& name, const py::handle& value) {
            const OptionSpec& spec = rowOf(name);
            setOption(o, spec, keywordText(spec, value));
          },
          "Sets the option `name` from a keyword's value through the table's parser (OptionError: ValueError)")
      .def(
          "get", [](const Options& o, const std::string& name) { return keywordValue(rowOf(name), o); },
          "The option `name` as its keyword takes it")
      .def(
          "use_schedule_profile",
          [](Options& o, const std::string& path, double stack_bytes_per_s, int local_ranks, bool read_now) {
            // Rank 0 reads it now (a missing or malformed file fails before the session) and
            // alone simulates it: the other ranks' hosts need no copy.
            if (read_now) readProfile(path);
            o.schedule_plan = sim::schedulePlanFrom(path, o.kv_pair_bytes, stack_bytes_per_s, local_ranks);
          },
          "The schedule rule's plan from the profile at `path` (cost_model \"schedule\")");
}

}  // namespace poseidon::python
