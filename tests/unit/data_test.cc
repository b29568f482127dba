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
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--data"), std::string::npos) << e.what();
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
