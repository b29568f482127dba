#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/dataset.h"
#include "data/partition.h"
#include "poseidon/config.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {
namespace {

namespace fs = std::filesystem;

void putBigEndian(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
}

void writeGz(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("poseidon_idx_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    images = {};
    putBigEndian(images, 0x803);
    putBigEndian(images, 3);
    putBigEndian(images, 2);
    putBigEndian(images, 2);
    for (int i = 0; i < 12; ++i) images.push_back(static_cast<std::uint8_t>(i * 20));
    labels = {};
    putBigEndian(labels, 0x801);
    putBigEndian(labels, 3);
    for (std::uint8_t l : {7, 0, 9}) labels.push_back(l);
  }
  void TearDown() override { fs::remove_all(dir); }
  void write() {
    writeGz(dir / "train-images-idx3-ubyte.gz", images);
    writeGz(dir / "train-labels-idx1-ubyte.gz", labels);
  }
  fs::path dir;
  std::vector<std::uint8_t> images, labels;
};

TEST_F(IdxTest, ReadsImagesAndLabels) {
  write();
  Dataset d = loadFashionMnist(dir.string(), true);
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.height, 2);
  EXPECT_EQ(d.labels, (std::vector<std::int64_t>{7, 0, 9}));
  EXPECT_NEAR(d.images[1], (20 / 255.0f - 0.2860f) / 0.3530f, 1e-6);
}

TEST_F(IdxTest, TruncatedImagesAreAnErrorNamingTheFile) {
  images.resize(images.size() - 5);
  write();
  try {
    loadFashionMnist(dir.string(), true);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train-images-idx3-ubyte.gz is truncated"), std::string::npos) << e.what();
  }
}

TEST_F(IdxTest, BadMagicMissingFileAndCountMismatch) {
  images[3] = 0x01;
  write();
  EXPECT_THROW(loadFashionMnist(dir.string(), true), InputError);
  SetUp();
  labels[7] = 4;  // header says 4 labels, 3 present
  write();
  EXPECT_THROW(loadFashionMnist(dir.string(), true), InputError);
  try {
    loadFashionMnist((dir / "nowhere").string(), true);
    FAIL() << "no error";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.field(), "data") << e.what();  // the CLI says --data DIR
  }
}

TEST_F(IdxTest, CorruptGzipIsAnError) {
  write();
  // Cut the compressed file in half: zlib must not pass this off as a short file.
  const auto path = dir / "train-images-idx3-ubyte.gz";
  const auto size = fs::file_size(path);
  fs::resize_file(path, size / 2);
  EXPECT_THROW(loadFashionMnist(dir.string(), true), InputError);
}

// gzip bytes as gzwrite makes them, in memory.
std::vector<std::uint8_t> gzipped(const std::vector<std::uint8_t>& bytes) {
  uLongf size = compressBound(static_cast<uLong>(bytes.size())) + 64;
  std::vector<std::uint8_t> out(size);
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The files' bytes in memory, as readIdxPair reads them from disk: raw or gzip.
TEST_F(IdxTest, ParsesRawAndGzipBytesInMemory) {
  for (bool gz : {false, true}) {
    const Dataset d = parseIdxPair(gz ? gzipped(images) : images, gz ? gzipped(labels) : labels, "i", "l");
    EXPECT_EQ(d.count, 3);
    EXPECT_EQ(d.width, 2);
    EXPECT_EQ(d.labels, (std::vector<std::int64_t>{7, 0, 9}));
    EXPECT_NEAR(d.images[1], (20 / 255.0f - 0.2860f) / 0.3530f, 1e-6);
  }
  // As zlib's gzread decodes files: gzip members one after the other, then bytes after a
  // member that do not start another ignored.
  std::vector<std::uint8_t> head(images.begin(), images.begin() + 10), tail(images.begin() + 10, images.end());
  std::vector<std::uint8_t> members = gzipped(head);
  const std::vector<std::uint8_t> second = gzipped(tail);
  members.insert(members.end(), second.begin(), second.end());
  std::vector<std::uint8_t> trailing = gzipped(labels);
  for (char ch : std::string("junk")) trailing.push_back(static_cast<std::uint8_t>(ch));
  EXPECT_EQ(parseIdxPair(members, trailing, "i", "l").labels, (std::vector<std::int64_t>{7, 0, 9}));
  // The same as reading the files.
  write();
  const Dataset d =
      readIdxPair((dir / "train-images-idx3-ubyte.gz").string(), (dir / "train-labels-idx1-ubyte.gz").string());
  EXPECT_EQ(d.images, parseIdxPair(gzipped(images), gzipped(labels), "i", "l").images);
}

TEST_F(IdxTest, BadBytesInMemoryAreErrorsNamingTheFile) {
  const auto errorOf = [](const std::vector<std::uint8_t>& i, const std::vector<std::uint8_t>& l) -> std::string {
    try {
      parseIdxPair(i, l, "img.gz", "lab.gz");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  std::vector<std::uint8_t> bad_crc = gzipped(images);
  bad_crc[bad_crc.size() - 6] ^= 1;  // the CRC-32, before the length
  EXPECT_NE(errorOf(bad_crc, labels).find("dataset file img.gz is corrupt: incorrect data check"), std::string::npos)
      << errorOf(bad_crc, labels);
  // Cut short, the stream decodes as far as it goes, which the size checks refuse.
  std::vector<std::uint8_t> cut = gzipped(images);
  cut.resize(cut.size() / 2);
  EXPECT_EQ(errorOf(cut, labels).find("dataset file img.gz is "), 0u) << errorOf(cut, labels);
  EXPECT_NE(errorOf(images, {}).find("lab.gz is not an IDX label file"), std::string::npos);
  EXPECT_NE(errorOf({0x1f, 0x8b}, labels).find("img.gz is not an IDX image file"), std::string::npos);
  EXPECT_NE(errorOf({0x1f, 0x8b, 7, 0, 0, 0, 0, 0, 0, 0, 0}, labels).find("img.gz is corrupt: unknown compression"),
            std::string::npos);
  std::vector<std::uint8_t> bad_label = labels;
  bad_label.back() = 10;
  EXPECT_NE(errorOf(images, bad_label).find("lab.gz has label 10 at index 2"), std::string::npos);
}

TEST(FashionMnist, DebianPackageFilesLoadWhenInstalled) {
  const std::string dir = POSEIDON_DEFAULT_DATA_DIR;
  ASSERT_TRUE(fs::exists(dir + "/t10k-images-idx3-ubyte.gz"))
      << "install dataset-fashion-mnist (the README's commands do)";
  Dataset d = loadFashionMnist(dir, false);
  EXPECT_EQ(d.count, 10000);
  EXPECT_EQ(d.height, 28);
  EXPECT_EQ(d.width, 28);
}

TEST(Partition, WorkersTakeDisjointSharesOfOnePermutation) {
  const int workers = 3;
  std::set<std::int64_t> seen;
  for (int w = 0; w < workers; ++w) {
    Partition p(100, workers, w, 5, 7);
    EXPECT_EQ(p.batchesPerEpoch(), 6);  // steps of 15 examples: 6 full steps
    for (std::int64_t b = 0; b < p.batchesPerEpoch(); ++b) {
      for (auto i : p.batch(0, b)) EXPECT_TRUE(seen.insert(i).second) << "example " << i << " twice";
    }
  }
  EXPECT_EQ(seen.size(), 90u);
  // A step of 3 workers at batch 5 covers the same examples as 1 worker at batch 15.
  Partition one(100, 1, 0, 15, 7);
  for (std::int64_t b = 0; b < 6; ++b) {
    std::vector<std::int64_t> joint;
    for (int w = 0; w < workers; ++w) {
      auto part = Partition(100, workers, w, 5, 7).batch(2, b);
      joint.insert(joint.end(), part.begin(), part.end());
    }
    EXPECT_EQ(joint, one.batch(2, b));
  }
  Partition a(100, 1, 0, 10, 7), b(100, 1, 0, 10, 7);
  EXPECT_EQ(a.batch(1, 2), b.batch(1, 2));
  EXPECT_NE(a.batch(0, 0), a.batch(1, 0));  // a new order every epoch
}

TEST(Partition, RejectsBadBatches) {
  EXPECT_THROW(Partition(100, 2, 0, 0, 1), InputError);
  EXPECT_THROW(Partition(100, 2, 0, 51, 1), InputError);  // two workers need 102 per step
}

}  // namespace
}  // namespace poseidon
