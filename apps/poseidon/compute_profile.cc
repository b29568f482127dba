#include "compute_profile.h"

#include <fstream>
#include <optional>
#include <vector>

#include "common/words.h"
#include "poseidon/errors.h"

namespace poseidon::app {

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
    const std::size_t words = kind == "batch" ? 2 : kind == "layer" ? 6 : kind == "other" ? 5 : w.size();
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
    }
    if (!ok) {
      throw InputError(where + ": expected 'batch K', 'layer NAME forward_ms F backward_ms B' or "
                               "'other forward_ms F backward_ms B'");
    }
  }
  if (in.bad()) throw InputError(source + ": cannot read the profile");
  if (p.batch <= 0 || p.layers.empty()) throw InputError(source + ": a profile needs a 'batch' line and 'layer' lines");
  return p;
}

ComputeProfile readProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--emulate-compute " + path + ": cannot read the profile");
  return parseProfile(in, path);
}

}  // namespace poseidon::app
