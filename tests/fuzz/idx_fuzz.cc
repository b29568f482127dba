// A Fashion-MNIST IDX pair (parseIdxPair: the two files' bytes, raw or gzip by magic, as
// readIdxPair reads them from disk). The input is
//   bytes 0-1: the length L of the image file (little-endian, clamped to what follows);
//   the next L bytes: the image file; the rest: the label file.
#include <algorithm>
#include <vector>

#include "data/dataset.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t length = std::min<std::size_t>(data[0] | data[1] << 8, size - 2);
  const std::vector<std::uint8_t> images(data + 2, data + 2 + length), labels(data + 2 + length, data + size);
  return poseidon::fuzz::parseOrRefuse([&] {
    const poseidon::Dataset d = poseidon::parseIdxPair(images, labels, "images", "labels");
    (void)d.images.size();
  });
}
