#include "models/model_spec.h"

#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>

#include "common/words.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

namespace {

const std::map<std::string, std::string>& builtins() {
  // The benchmark models (docs/design.md). fcnet: compute in convs, parameters in FC (~42.6 M).
  static const std::map<std::string, std::string> models = {
      {"fcnet",
       "input 1 28 28\nclasses 10\n"
       "conv 32 3 pad=1\nrelu\nconv 64 3 pad=1\nrelu\npool 2\nconv 128 3 pad=1\nrelu\npool 2\n"
       "flatten\nfc 4096\nrelu\nfc 4096\nrelu\nfc 10\n"
       "lr 0.05\n"},  // one epoch on 4 workers: 88% on Fashion-MNIST (0.01 gives 85%)
      {"convnet",
       "input 1 28 28\nclasses 10\n"
       "conv 64 3 pad=1\nrelu\nconv 64 3 pad=1\nrelu\npool 2\n"
       "conv 128 3 pad=1\nrelu\nconv 128 3 pad=1\nrelu\npool 2\nflatten\nfc 10\n"
       "lr 0.01\n"},  // 0.02 and above make its early loss jump about, in plain LibTorch too
      {"mlp", "input 1 28 28\nclasses 10\nflatten\nfc 256\nrelu\nfc 128\nrelu\nfc 10\nlr 0.05\n"},
  };
  return models;
}

// Bounds on what a model description may declare, so that every shape, product and sum the
// parser, the coordinator (TensorInfo::numel) and the engines compute fits in int64_t with
// room to spare: any one size (channels, height, width, features, classes, kernel, stride,
// pad) at most kMaxDim, any activation at most kMaxValues per example, and all the
// parameters together at most kMaxParams.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;     // 16,777,216
constexpr std::int64_t kMaxValues = std::int64_t{1} << 32;  // 4,294,967,296 (16 GiB of floats)
constexpr std::int64_t kMaxParams = std::int64_t{1} << 40;  // 1,099,511,627,776

std::int64_t parsePositive(const std::string& word, const std::string& where, const std::string& what,
                           std::int64_t max = kMaxDim) {
  const std::optional<long long> v = parseWholeInteger(word);
  if (!v || *v <= 0) throw InputError(where + ": " + what + " must be a positive integer, got '" + word + "'");
  if (*v > max) throw InputError(detail::cat(where, ": ", what, " must be at most ", max, ", got '", word, "'"));
  return *v;
}

// a * b * c of positive factors, or -1 when it exceeds `max` (checked before multiplying).
std::int64_t boundedProduct(std::initializer_list<std::int64_t> factors, std::int64_t max) {
  std::int64_t n = 1;
  for (std::int64_t f : factors) {
    if (f > max / n) return -1;
    n *= f;
  }
  return n;
}

}  // namespace

std::vector<std::string> builtinModelNames() {
  std::vector<std::string> names;
  for (const auto& kv : builtins()) names.push_back(kv.first);
  return names;
}

ModelInfo modelInfoFromSpec(const ModelSpec& spec) {
  ModelInfo info;
  info.name = spec.name;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    LayerInfo layer;
    if (l.op == LayerSpec::Op::kConv) {
      layer.kind = LayerKind::kConv;
      layer.name = detail::cat("conv", i);
      layer.tensors = {{"weight", {l.out, l.in, l.kernel, l.kernel}}, {"bias", {l.out}}};
    } else if (l.op == LayerSpec::Op::kFC) {
      layer.kind = LayerKind::kFC;
      layer.name = detail::cat("fc", i);
      layer.M = l.out;
      layer.N = l.in;
      layer.tensors = {{"weight", {l.out, l.in}}, {"bias", {l.out}}};
    } else {
      continue;
    }
    info.layers.push_back(std::move(layer));
  }
  return info;
}

ModelSpec builtinModel(const std::string& name) {
  auto it = builtins().find(name);
  if (it == builtins().end()) {
    std::string known;
    for (const auto& n : builtinModelNames()) known += (known.empty() ? "" : ", ") + n;
    throw OptionError("unknown model '" + name + "': use one of " + known + ", or {model_file=FILE}");
  }
  return parseModelText(it->second, "built-in model " + name, name);
}

ModelSpec parseModelFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read model file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string name = path.substr(path.find_last_of('/') + 1);
  name = name.substr(0, name.find('.'));
  return parseModelText(ss.str(), "model file " + path, name.empty() ? "custom" : name);
}

namespace {

// One model text, line by line: the shape of the activation so far and the parameters so
// far, so that every line is checked against what comes before it.
class ModelTextParser {
 public:
  ModelTextParser(std::string source, const std::string& name) : source_(std::move(source)) { spec_.name = name; }

  void line(const std::vector<std::string>& tok, int number) {
    where_ = source_ + " line " + std::to_string(number);
    tok_ = &tok;
    if (header()) return;
    if (!spec_.channels) throw InputError(where_ + ": the first layer line must come after 'input C H W'");
    LayerSpec l;
    l.line = number;
    layer(l);
    spec_.layers.push_back(l);
  }

  ModelSpec finish() {
    if (!spec_.channels) throw InputError(source_ + ": missing 'input C H W'");
    if (!spec_.classes) throw InputError(source_ + ": missing 'classes N'");
    if (spec_.layers.empty() || spec_.layers.back().op != LayerSpec::Op::kFC) {
      throw InputError(source_ + ": the last layer must be 'fc " + std::to_string(spec_.classes) + "'");
    }
    if (spec_.layers.back().out != spec_.classes) {
      throw InputError(detail::cat(source_, ": the last fc has ", spec_.layers.back().out, " outputs but 'classes' is ",
                                   spec_.classes));
    }
    return spec_;
  }

 private:
  const std::vector<std::string>& tok() const { return *tok_; }
  void need(std::size_t n, const char* usage) const {
    if (tok().size() != n) throw InputError(where_ + ": expected '" + usage + "'");
  }

  // input, lr and classes: the model's own lines. Returns whether this was one.
  bool header() {
    const std::string& op = tok()[0];
    if (op == "input") {
      need(4, "input C H W");
      if (spec_.channels) throw InputError(where_ + ": 'input' given twice");
      c_ = spec_.channels = parsePositive(tok()[1], where_, "input channels");
      h_ = spec_.height = parsePositive(tok()[2], where_, "input height");
      w_ = spec_.width = parsePositive(tok()[3], where_, "input width");
      checkValues("input", c_, h_, w_);
    } else if (op == "lr") {
      need(2, "lr X");
      spec_.lr = parseWholeReal(tok()[1]);
      if (!(spec_.lr > 0)) {
        throw InputError(where_ + ": the learning rate must be a finite positive number, got '" + tok()[1] + "'");
      }
    } else if (op == "classes") {
      need(2, "classes N");
      spec_.classes = static_cast<int>(parsePositive(tok()[1], where_, "class count"));
    } else {
      return false;
    }
    return true;
  }

  void layer(LayerSpec& l) {
    const std::string& op = tok()[0];
    if (op == "conv") {
      conv(l);
    } else if (op == "pool") {
      pool(l);
    } else if (op == "relu") {
      need(1, "relu");
      l.op = LayerSpec::Op::kRelu;
    } else if (op == "flatten") {
      need(1, "flatten");
      if (flat_) throw InputError(where_ + ": flatten given twice");
      l.op = LayerSpec::Op::kFlatten;
      flat_ = true;
      checkValues("flatten", c_, h_, w_);  // passed already, after input and every conv
      features_ = c_ * h_ * w_;
    } else if (op == "dropout") {
      need(2, "dropout P");
      l.op = LayerSpec::Op::kDropout;
      l.p = parseWholeReal(tok()[1]);
      if (!(l.p >= 0.0 && l.p < 1.0)) {
        throw InputError(where_ + ": dropout probability must be in [0, 1), got '" + tok()[1] + "'");
      }
    } else if (op == "fc") {
      need(2, "fc OUT");
      if (!flat_) throw InputError(where_ + ": fc needs 'flatten' before it");
      l.op = LayerSpec::Op::kFC;
      l.in = features_;
      l.out = features_ = parsePositive(tok()[1], where_, "fc output features");
      addParams("fc", {l.out, l.in}, l.out);
    } else {
      throw InputError(where_ + ": unknown layer '" + op + "' (use conv, pool, relu, flatten, fc, dropout)");
    }
  }

  void conv(LayerSpec& l) {
    if (tok().size() < 3 || tok().size() > 5) throw InputError(where_ + ": expected 'conv OUT K [stride=S] [pad=P]'");
    if (flat_) throw InputError(where_ + ": conv after flatten");
    l.op = LayerSpec::Op::kConv;
    l.in = c_;
    l.out = parsePositive(tok()[1], where_, "conv output channels");
    l.kernel = parsePositive(tok()[2], where_, "conv kernel size");
    for (std::size_t i = 3; i < tok().size(); ++i) {
      const std::string& t = tok()[i];
      if (t.rfind("stride=", 0) == 0)
        l.stride = parsePositive(t.substr(7), where_, "stride");
      else if (t.rfind("pad=", 0) == 0)
        l.pad = t.substr(4) == "0" ? 0 : parsePositive(t.substr(4), where_, "pad");
      else
        throw InputError(where_ + ": unknown conv option '" + t + "' (use stride=S or pad=P)");
    }
    const std::int64_t oh = (h_ + 2 * l.pad - l.kernel) / l.stride + 1;
    const std::int64_t ow = (w_ + 2 * l.pad - l.kernel) / l.stride + 1;
    if (h_ + 2 * l.pad < l.kernel || w_ + 2 * l.pad < l.kernel || oh <= 0 || ow <= 0) {
      throw InputError(detail::cat(where_, ": conv kernel ", l.kernel, " does not fit the ", h_, "x", w_, " input"));
    }
    checkValues("conv output", l.out, oh, ow);
    addParams("conv", {l.out, l.in, l.kernel, l.kernel}, l.out);
    c_ = l.out, h_ = oh, w_ = ow;
  }

  void pool(LayerSpec& l) {
    need(2, "pool K");
    if (flat_) throw InputError(where_ + ": pool after flatten");
    l.op = LayerSpec::Op::kPool;
    l.kernel = l.stride = parsePositive(tok()[1], where_, "pool size");
    if (h_ < l.kernel || w_ < l.kernel) {
      throw InputError(detail::cat(where_, ": pool ", l.kernel, " on a ", h_, "x", w_, " input"));
    }
    h_ /= l.kernel, w_ /= l.kernel;
  }

  // Adds a layer's parameters to the model's, refusing a model beyond kMaxParams.
  void addParams(const std::string& layer, std::initializer_list<std::int64_t> weight, std::int64_t bias) {
    const std::int64_t n = boundedProduct(weight, kMaxParams);
    if (n < 0 || n > kMaxParams - params_ - bias) {
      throw InputError(detail::cat(where_, ": ", layer, " takes the model past ", kMaxParams, " parameters"));
    }
    params_ += n + bias;
  }

  // An activation of c x h x w per example, at most kMaxValues.
  void checkValues(const std::string& what, std::int64_t channels, std::int64_t height, std::int64_t width) const {
    if (boundedProduct({channels, height, width}, kMaxValues) < 0) {
      throw InputError(detail::cat(where_, ": ", what, " of ", channels, "x", height, "x", width, " has more than ",
                                   kMaxValues, " values per example"));
    }
  }

  const std::string source_;
  ModelSpec spec_;
  std::string where_;
  const std::vector<std::string>* tok_ = nullptr;
  bool flat_ = false;
  std::int64_t c_ = 0, h_ = 0, w_ = 0, features_ = 0;
  std::int64_t params_ = 0;  // so far, at most kMaxParams
};

}  // namespace

ModelSpec parseModelText(const std::string& text, const std::string& source, const std::string& name) {
  ModelTextParser parser(source, name);
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::vector<std::string> tok = splitWords(line.substr(0, line.find('#')));
    if (!tok.empty()) parser.line(tok, number);
  }
  return parser.finish();
}

}  // namespace poseidon
