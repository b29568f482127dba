#include <zlib.h>

#include <cstring>
#include <memory>
#include <random>
#include <sys/stat.h>

#include "data/dataset.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {

constexpr float kMean = 0.2860f;  // Fashion-MNIST training pixels, after scaling to [0, 1]
constexpr float kStd = 0.3530f;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Reads a whole file through zlib, which passes non-gzip files through unchanged.
std::vector<std::uint8_t> readAll(const std::string& path) {
  if (!exists(path)) {
    throw InputError("dataset file " + path + " not found; install dataset-fashion-mnist or pass --data DIR");
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw InputError("cannot open dataset file " + path);
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  while (true) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int err = 0;
      throw InputError(detail::cat("dataset file ", path, " is corrupt: ", gzerror(f, &err)));
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  // zlib reports a gzip stream cut short as a clean end of file; ask it explicitly.
  int err = 0;
  gzerror(f, &err);
  if (err != Z_OK && err != Z_BUF_ERROR) throw InputError("dataset file " + path + " is corrupt");
  return out;
}

std::uint32_t bigEndian(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

}  // namespace

Dataset readIdxPair(const std::string& images_path, const std::string& labels_path) {
  const auto img = readAll(images_path);
  const auto lab = readAll(labels_path);
  if (img.size() < 16 || bigEndian(img.data()) != 0x803) {
    throw InputError("dataset file " + images_path + " is not an IDX image file (bad magic or header)");
  }
  if (lab.size() < 8 || bigEndian(lab.data()) != 0x801) {
    throw InputError("dataset file " + labels_path + " is not an IDX label file (bad magic or header)");
  }
  Dataset d;
  d.count = bigEndian(img.data() + 4);
  d.height = bigEndian(img.data() + 8);
  d.width = bigEndian(img.data() + 12);
  d.channels = 1;
  const std::int64_t labels = bigEndian(lab.data() + 4);
  if (d.height <= 0 || d.width <= 0 || d.height > 4096 || d.width > 4096) {
    throw InputError(detail::cat("dataset file ", images_path, " declares images of ", d.height, "x", d.width));
  }
  const std::uint64_t want = 16 + static_cast<std::uint64_t>(d.count) * d.height * d.width;
  if (img.size() != want) {
    throw InputError(detail::cat("dataset file ", images_path, " is truncated or padded: header promises ",
                                 d.count, " images (", want, " bytes), file has ", img.size(), " bytes"));
  }
  if (lab.size() != 8 + static_cast<std::uint64_t>(labels)) {
    throw InputError(detail::cat("dataset file ", labels_path, " is truncated or padded: header promises ",
                                 labels, " labels, file has ", lab.size() - 8));
  }
  if (labels != d.count) {
    throw InputError(detail::cat(images_path, " has ", d.count, " images but ", labels_path, " has ", labels,
                                 " labels"));
  }
  d.images.resize(static_cast<std::size_t>(d.count * d.imageSize()));
  for (std::size_t i = 0; i < d.images.size(); ++i) d.images[i] = (img[16 + i] / 255.0f - kMean) / kStd;
  d.labels.resize(d.count);
  for (std::int64_t i = 0; i < d.count; ++i) {
    d.labels[i] = lab[8 + i];
    if (d.labels[i] > 9) {
      throw InputError(detail::cat("dataset file ", labels_path, " has label ", d.labels[i], " at index ", i,
                                   "; Fashion-MNIST labels are 0..9"));
    }
  }
  return d;
}

Dataset loadFashionMnist(const std::string& dir, bool train) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  auto pick = [](const std::string& base) { return exists(base + ".gz") || !exists(base) ? base + ".gz" : base; };
  return readIdxPair(pick(prefix + "-images-idx3-ubyte"), pick(prefix + "-labels-idx1-ubyte"));
}

Dataset syntheticDataset(std::int64_t count, std::int64_t channels, std::int64_t height, std::int64_t width,
                         int classes, std::uint64_t seed) {
  Dataset d;
  d.count = count;
  d.channels = channels;
  d.height = height;
  d.width = width;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<int> label(0, classes - 1);
  d.images.resize(static_cast<std::size_t>(count * d.imageSize()));
  for (auto& x : d.images) x = pixel(rng);
  d.labels.resize(count);
  for (auto& y : d.labels) y = label(rng);
  return d;
}

}  // namespace poseidon
