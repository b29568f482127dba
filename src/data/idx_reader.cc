#ifdef POSEIDON_HAVE_ZLIB
#include <zlib.h>
#endif

#include <sys/stat.h>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include "data/dataset.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

namespace {

constexpr float kMean = 0.2860f;  // Fashion-MNIST training pixels, after scaling to [0, 1]
constexpr float kStd = 0.3530f;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A file's bytes as they are on disk.
std::vector<std::uint8_t> readAll(const std::string& path) {
  if (!exists(path)) {
    throw OptionError("dataset file " + path + " not found; install dataset-fashion-mnist or pass {data=DIR}");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open dataset file " + path);
  std::vector<std::uint8_t> out;
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) out.insert(out.end(), buf, buf + in.gcount());
  if (in.bad()) throw InputError("cannot read dataset file " + path);
  return out;
}

// A file's content: a gzip file decompressed, anything else as it is. The same as zlib's
// gzread makes of the file (which the reader used before it took bytes): gzip by the magic
// 1f 8b; concatenated gzip members decoded one after the other; bytes after a member that
// do not start another ignored; a stream cut short decoded as far as it goes (the size
// checks then refuse it); a corrupt stream or a failed CRC or length check an error.
std::vector<std::uint8_t> decompress(const std::vector<std::uint8_t>& file, const std::string& name) {
  const auto gzipAt = [&file](std::size_t pos) {
    return file.size() - pos >= 2 && file[pos] == 0x1f && file[pos + 1] == 0x8b;
  };
  if (!gzipAt(0)) return file;
#ifndef POSEIDON_HAVE_ZLIB
  throw InputError("dataset file " + name + " is gzip-compressed and this build has no zlib: gunzip it, or build "
                   "with zlib's headers (Debian's zlib1g-dev)");
#else
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw InputError("cannot decompress dataset file " + name + ": out of memory");
  std::unique_ptr<z_stream, int (*)(z_stream*)> closer(&z, inflateEnd);
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  std::size_t pos = 0;  // of the next input byte to give inflate
  do {
    inflateReset(&z);
    int ret = Z_OK;
    do {
      if (z.avail_in == 0) {
        // uInt at a time: a file may be larger than 4 GiB.
        const std::size_t chunk = std::min<std::size_t>(file.size() - pos, 1u << 30);
        if (chunk == 0) return out;  // cut short: gzread returns what it has decoded
        z.next_in = const_cast<Bytef*>(file.data() + pos);
        z.avail_in = static_cast<uInt>(chunk);
        pos += chunk;
      }
      const uInt had = z.avail_in;
      z.next_out = buf;
      z.avail_out = sizeof(buf);
      ret = inflate(&z, Z_NO_FLUSH);
      if (ret == Z_STREAM_ERROR || ret == Z_NEED_DICT || ret == Z_MEM_ERROR || ret == Z_DATA_ERROR) {
        throw InputError(detail::cat("dataset file ", name, " is corrupt: ",
                                     z.msg                ? z.msg
                                     : ret == Z_MEM_ERROR ? "out of memory"
                                                          : "compressed data error"));
      }
      const std::size_t made = sizeof(buf) - z.avail_out;
      out.insert(out.end(), buf, buf + made);
      if (ret == Z_BUF_ERROR && made == 0 && z.avail_in == had) return out;  // no progress possible
    } while (ret != Z_STREAM_END);
    pos -= z.avail_in;  // the input inflate left over, after this member
    z.avail_in = 0;
  } while (gzipAt(pos));
  return out;
#endif
}

std::uint32_t bigEndian(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

}  // namespace

Dataset readIdxPair(const std::string& images_path, const std::string& labels_path) {
  const auto images = readAll(images_path);
  const auto labels = readAll(labels_path);
  return parseIdxPair(images, labels, images_path, labels_path);
}

Dataset parseIdxPair(const std::vector<std::uint8_t>& images_file, const std::vector<std::uint8_t>& labels_file,
                     const std::string& images_path, const std::string& labels_path) {
  const auto img = decompress(images_file, images_path);
  const auto lab = decompress(labels_file, labels_path);
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
    throw InputError(detail::cat("dataset file ", images_path, " is truncated or padded: header promises ", d.count,
                                 " images (", want, " bytes), file has ", img.size(), " bytes"));
  }
  if (lab.size() != 8 + static_cast<std::uint64_t>(labels)) {
    throw InputError(detail::cat("dataset file ", labels_path, " is truncated or padded: header promises ", labels,
                                 " labels, file has ", lab.size() - 8));
  }
  if (labels != d.count) {
    throw InputError(
        detail::cat(images_path, " has ", d.count, " images but ", labels_path, " has ", labels, " labels"));
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
