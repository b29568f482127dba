#include "profile/compute_profile.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "common/words.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {

// The words of a line up to a comment (a word that starts with '#').
std::vector<std::string> wordsOf(const std::string& line) {
  std::vector<std::string> words = splitWords(line);
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (words[i][0] == '#') words.resize(i);
  }
  return words;
}

// A time in milliseconds: the whole word a finite number in [0, kMaxProfileMs].
double parseMs(const std::string& word, const std::string& where, const std::string& what) {
  const double v = parseWholeReal(word);
  if (!(v >= 0 && v <= kMaxProfileMs)) {
    throw InputError(detail::cat(where, ": ", what, " must be a number of milliseconds from 0 to ", kMaxProfileMs,
                                 ", got '", word, "'"));
  }
  return v;
}

// Bounds of a shape line, as model files have (models/model_spec.cc): every product of
// them stays far inside int64 (numel() multiplies without checks).
constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
constexpr std::int64_t kMaxParams = std::int64_t{1} << 40;

// A positive whole number of a shape line, at most kMaxDim.
std::int64_t parseDim(const std::string& word, const std::string& where, const std::string& what) {
  const std::optional<long long> v = parseWholeInteger(word);
  if (!v || *v <= 0 || *v > kMaxDim) {
    throw InputError(detail::cat(where, ": ", what, " must be an integer from 1 to ", kMaxDim, ", got '", word, "'"));
  }
  return *v;
}

// "DxDx...": a tensor's dimensions, their product at most kMaxParams.
std::vector<std::int64_t> parseDims(const std::string& word, const std::string& where) {
  std::vector<std::int64_t> dims;
  std::int64_t product = 1;
  std::size_t at = 0;
  while (at <= word.size() && dims.size() < 8) {
    const std::size_t x = std::min(word.find('x', at), word.size());
    dims.push_back(parseDim(word.substr(at, x - at), where, "a tensor dimension"));
    if (dims.back() > kMaxParams / product)
      throw InputError(where + ": a tensor of more than 2^40 values: '" + word + "'");
    product *= dims.back();
    at = x + 1;
  }
  if (at <= word.size()) throw InputError(where + ": a tensor has at most 8 dimensions, got '" + word + "'");
  return dims;
}

// "shape NAME kind K [M m N n rows r factorable f] tensor T DIMS ...": a layer's shapes.
LayerInfo parseShape(const std::vector<std::string>& w, const std::string& where) {
  const std::string usage =
      "expected 'shape NAME kind fc|conv|other [M m N n rows r factorable 0|1] tensor NAME DxD ...'";
  if (w.size() < 4 || w[2] != "kind") throw InputError(where + ": " + usage);
  LayerInfo l;
  l.name = w[1];
  if (w[3] == "fc") {
    l.kind = LayerKind::kFC;
  } else if (w[3] == "conv") {
    l.kind = LayerKind::kConv;
  } else if (w[3] != "other") {
    throw InputError(where + ": the kind must be fc, conv or other, got '" + w[3] + "'");
  }
  std::set<std::string> seen;  // keys other than tensor come once
  std::size_t i = 4;
  while (i < w.size()) {
    const std::string& key = w[i];
    const std::size_t values = key == "tensor" ? 2 : 1;
    if (i + values >= w.size()) throw InputError(where + ": '" + key + "' without its value: " + usage);
    if (key != "tensor" && !seen.insert(key).second) throw InputError(where + ": '" + key + "' given twice");
    if (key == "tensor") {
      l.tensors.push_back(TensorInfo{w[i + 1], parseDims(w[i + 2], where)});
    } else if (key == "M") {
      l.M = parseDim(w[i + 1], where, "M");
    } else if (key == "N") {
      l.N = parseDim(w[i + 1], where, "N");
    } else if (key == "rows") {
      l.rows_per_example = parseDim(w[i + 1], where, "rows");
    } else if (key == "factorable") {
      if (w[i + 1] != "0" && w[i + 1] != "1")
        throw InputError(where + ": factorable must be 0 or 1, got '" + w[i + 1] + "'");
      l.factorable = w[i + 1] == "1";
    } else {
      throw InputError(where + ": unexpected '" + key + "': " + usage);
    }
    i += 1 + values;
  }
  if (l.tensors.empty()) throw InputError(where + ": a shape line needs at least one 'tensor NAME DIMS'");
  std::int64_t total = 0;
  for (const auto& t : l.tensors) {
    total += t.numel();  // each at most 2^40, so at most 2^41 after the first excess
    if (total > kMaxParams) throw InputError(where + ": a layer of more than 2^40 values");
  }
  if (l.kind != LayerKind::kFC && (l.M != 0 || l.N != 0)) throw InputError(where + ": M and N are for fc layers");
  if (l.kind == LayerKind::kFC && (l.M == 0 || l.N == 0)) throw InputError(where + ": an fc layer needs M and N");
  return l;
}

}  // namespace

ComputeProfile parseProfile(std::istream& in, const std::string& source) {
  ComputeProfile p;
  std::string line;
  long long n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::vector<std::string> w = wordsOf(line);
    if (w.empty()) continue;
    const std::string where = detail::cat(source, " line ", n);
    const std::string& kind = w[0];
    // "forward_ms F backward_ms B" from word `at` on, the last words of the line.
    const auto times = [&](std::size_t at, double& fwd, double& bwd) {
      if (w.size() != at + 4 || w[at] != "forward_ms" || w[at + 2] != "backward_ms") return false;
      fwd = parseMs(w[at + 1], where, "forward_ms");
      bwd = parseMs(w[at + 3], where, "backward_ms");
      return true;
    };
    // Words past the end of a known line: named, rather than the usage alone.
    const std::size_t words = kind == "batch"   ? 2
                              : kind == "cpu"   ? 3
                              : kind == "layer" ? 6
                              : kind == "other" ? 5
                                                : w.size();  // shape: variable
    if (w.size() > words) {
      throw InputError(where + ": unexpected '" + w[words] + "' after the " + std::to_string(words) + " words of a '" +
                       kind + "' line");
    }
    bool ok = false;
    if (kind == "batch") {
      if (w.size() == 2) {
        const std::optional<long long> batch = parseWholeInteger(w[1]);
        if (!batch || *batch <= 0) {
          throw InputError(where + ": the batch size must be a positive integer, got '" + w[1] + "'");
        }
        p.batch = *batch;
        ok = true;
      }
    } else if (kind == "layer") {
      double fwd = 0, bwd = 0;
      if (w.size() >= 2 && times(2, fwd, bwd)) {
        p.layers[w[1]] = {fwd, bwd};
        ok = true;
      }
    } else if (kind == "other") {
      ok = times(1, p.other_forward_ms, p.other_backward_ms);
    } else if (kind == "cpu") {
      if (w.size() == 3 && w[1] == "iteration_ms") {
        p.cpu_iteration_ms = parseMs(w[2], where, "iteration_ms");
        ok = true;
      }
    } else if (kind == "shape") {
      p.shapes.push_back(parseShape(w, where));
      ok = true;
    }
    if (!ok) {
      throw InputError(where +
                       ": expected 'batch K', 'layer NAME forward_ms F backward_ms B', "
                       "'other forward_ms F backward_ms B', 'cpu iteration_ms C' or 'shape NAME kind ...'");
    }
  }
  if (in.bad()) throw InputError(source + ": cannot read the profile");
  if (p.batch <= 0 || p.layers.empty()) throw InputError(source + ": a profile needs a 'batch' line and 'layer' lines");
  std::set<std::string> shaped;
  std::int64_t total = 0;
  for (const auto& l : p.shapes) {
    if (!p.layers.count(l.name)) throw InputError(source + ": a shape for layer '" + l.name + "', which has no times");
    if (!shaped.insert(l.name).second) throw InputError(source + ": two shape lines for layer '" + l.name + "'");
    total += l.numel();
    if (total > kMaxParams) throw InputError(source + ": a model of more than 2^40 values");
  }
  if (!p.shapes.empty() && p.shapes.size() != p.layers.size()) {
    throw InputError(detail::cat(source, ": shapes for ", p.shapes.size(), " of its ", p.layers.size(),
                                 " layers: give every layer one, or none"));
  }
  return p;
}

ComputeProfile readProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the profile");
  return parseProfile(in, path);
}

namespace {

double medianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// A name the parser reads back as one word (PyTorch allows any string as a module name).
void checkWord(const std::string& name, const std::string& what) {
  const bool word = !name.empty() && name[0] != '#' &&
                    std::none_of(name.begin(), name.end(), [](unsigned char c) { return std::isspace(c); });
  if (!word)
    throw InputError(what + " '" + name + "' is not one word without '#' at its start: a profile cannot name it");
}

void writeShape(std::ostream& out, const LayerInfo& l) {
  checkWord(l.name, "layer");
  out << "shape " << l.name << " kind " << layerKindName(l.kind);
  if (l.kind == LayerKind::kFC) {
    out << " M " << l.M << " N " << l.N << " rows " << l.rows_per_example << " factorable " << (l.factorable ? 1 : 0);
  }
  for (const auto& t : l.tensors) {
    const std::string name = t.name.empty() ? "t" : t.name;  // adapters name every tensor; a hand-made model may not
    checkWord(name, "tensor of layer " + l.name + ":");
    if (t.numel() == 0)
      throw InputError("layer '" + l.name + "' has a tensor without values: a profile cannot describe it");
    out << " tensor " << name << " ";
    for (std::size_t d = 0; d < t.shape.size(); ++d) out << (d ? "x" : "") << t.shape[d];
    if (t.shape.empty()) out << 1;  // a scalar: read back as one value of shape {1}
  }
  out << "\n";
}

}  // namespace

std::string profileText(const ModelInfo& model, const std::map<std::string, std::vector<double>>& spans,
                        std::int64_t batch, int ranks) {
  const auto med = [&](const std::string& name) {
    const auto it = spans.find(name);
    return it == spans.end() ? 0.0 : medianOf(it->second);
  };
  std::ostringstream out;
  out << "# poseidon compute profile: model " << model.name << ", medians over the run of rank 0 of " << ranks
      << "\nbatch " << batch << "\n";
  double inside = 0;  // every span's median, waits included
  for (const auto& l : model.layers) {
    checkWord(l.name, "layer");
    const double f = med("forward " + l.name), b = med("backward " + l.name);
    out << "layer " << l.name << " forward_ms " << f << " backward_ms " << b << "\n";
    inside += f + b;
  }
  // Every wait (per layer, at the forward's start, at the step) is communication, not compute.
  for (const auto& span : spans) {
    if (startsWith(span.first, "wait ")) inside += medianOf(span.second);
  }
  double other_f = 0;  // modules without parameters (named by their kind; the median of one is a guess at each)
  for (const auto& span : spans) {  // not a structured binding: clang's C++17 lambdas cannot capture one
    const std::string& name = span.first;
    const bool param_layer = std::any_of(model.layers.begin(), model.layers.end(),
                                         [&](const LayerInfo& l) { return name == "forward " + l.name; });
    if (startsWith(name, "forward ") && !param_layer) other_f += medianOf(span.second);
  }
  inside += other_f;
  // The rest of an iteration (the loss, the batch, the loop's own work) is compute too.
  const double outside = spans.count("iteration") ? std::max(0.0, med("iteration") - inside) : 0.0;
  out << "# other: modules without parameters " << other_f << " ms, outside the layers " << outside << " ms\n";
  // Modules without parameters: their backward is inside the next layer's backward span.
  out << "other forward_ms " << other_f + outside << " backward_ms 0\n";
  if (spans.count("cpu iteration")) {
    out << "# the compute thread's CPU time per iteration (less than the wall time where it waited or shared a core)\n"
        << "cpu iteration_ms " << med("cpu iteration") << "\n";
  }
  for (const auto& l : model.layers) writeShape(out, l);
  return out.str();
}

}  // namespace poseidon
