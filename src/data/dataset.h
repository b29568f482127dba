// Image classification data as the trainer consumes it: N images of C x H x W floats
// (normalised) and N labels. Fashion-MNIST comes from IDX files; synthetic data has the
// same shape with random content.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace poseidon {

struct Dataset {
  std::int64_t count = 0;
  std::int64_t channels = 1, height = 28, width = 28;
  std::vector<float> images;         // count * channels * height * width
  std::vector<std::int64_t> labels;  // count
  std::int64_t imageSize() const { return channels * height * width; }
};

// Reads an IDX image file and its label file (gzip or raw; by magic). Pixels are scaled to
// [0, 1] and normalised with Fashion-MNIST's mean and std. Throws InputError naming the
// file and the problem: missing, truncated, not IDX, counts or sizes that disagree.
Dataset readIdxPair(const std::string& images_path, const std::string& labels_path);

// The same from the two files' bytes, as they are on disk (gzip or raw, by magic; a gzip
// file decoded as zlib's gzread decodes it), named in errors by `images_name` and
// `labels_name`. readIdxPair reads the files and calls this.
Dataset parseIdxPair(const std::vector<std::uint8_t>& images, const std::vector<std::uint8_t>& labels,
                     const std::string& images_name, const std::string& labels_name);

// The Fashion-MNIST training or test split from `dir` (train-*/t10k-* files, .gz or not).
Dataset loadFashionMnist(const std::string& dir, bool train);

// `count` random images (normal noise) with random labels in [0, classes).
Dataset syntheticDataset(std::int64_t count, std::int64_t channels, std::int64_t height, std::int64_t width,
                         int classes, std::uint64_t seed);

}  // namespace poseidon
