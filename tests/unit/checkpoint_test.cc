// Checkpoint files: round trip, and every kind of damage gives an InputError that says
// what is wrong, never a crash or a silent partial restore.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/state_file.h"
#include "comm/control_channel.h"
#include "comm/loopback_transport.h"
#include "common/wait.h"
#include "poseidon/errors.h"

namespace poseidon {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/poseidon-ckpt-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(StateFile, RoundTripRestoresEveryRecordAndTheMeta) {
  TempDir dir;
  std::vector<float> a = {1, 2, 3}, b(1000, 0.5f);
  std::vector<std::uint8_t> c = {7, 8};
  const std::string path = dir.path + "/rank-0.state";
  const FileDigest d = writeStateFile(
      path, "iteration 5", {{"a", a.data(), a.size() * 4}, {"b", b.data(), b.size() * 4}, {"c", c.data(), 2}});
  EXPECT_EQ(d.bytes, fs::file_size(path));
  EXPECT_EQ(d.crc, digestFile(path).crc);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  std::vector<float> a2(3), b2(1000);
  std::vector<std::uint8_t> c2(2);
  EXPECT_EQ(readStateFile(path, {{"a", a2.data(), 12}, {"b", b2.data(), 4000}, {"c", c2.data(), 2}}), "iteration 5");
  EXPECT_EQ(a2, a);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(c2, c);
}

TEST(StateFile, EveryTruncationAndEveryFlippedByteIsRefusedWithoutTouchingMemory) {
  TempDir dir;
  std::vector<float> a = {1, 2, 3, 4};
  const std::string path = dir.path + "/s";
  writeStateFile(path, "m", {{"weights", a.data(), 16}});
  const std::string good = slurp(path);
  std::vector<float> out(4, -1.0f);
  const std::vector<StateRecord> want = {{"weights", out.data(), 16}};
  for (std::size_t n = 0; n < good.size(); ++n) {
    spit(path, good.substr(0, n));
    EXPECT_THROW(readStateFile(path, want), InputError) << "truncated to " << n;
  }
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    spit(path, bad);
    EXPECT_THROW(readStateFile(path, want), InputError) << "byte " << i;
  }
  EXPECT_EQ(out, std::vector<float>(4, -1.0f));
}

TEST(StateFile, AFileOfAnotherModelSaysSo) {
  TempDir dir;
  std::vector<float> a(10);
  const std::string path = dir.path + "/s";
  writeStateFile(path, "", {{"params/fc1/weight", a.data(), 40}});
  std::vector<float> b(12);
  try {
    readStateFile(path, {{"params/fc1/weight", b.data(), 48}});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("another model or configuration"), std::string::npos) << e.what();
  }
  EXPECT_THROW(readStateFile(path, {{"params/fc2/weight", a.data(), 40}}), InputError);
  EXPECT_THROW(readStateFile(path, {}), InputError);
  EXPECT_THROW(readStateFile(dir.path + "/missing", {}), InputError);
  spit(path, "hello, this is not a checkpoint at all");
  EXPECT_THROW(readStateFile(path, {}), InputError);
}

TEST(Checkpointer, LatestRefusesMissingDamagedOrIncompleteCheckpoints) {
  TempDir dir;
  EXPECT_THROW(Checkpointer::latest(dir.path + "/nope"), InputError);
  EXPECT_THROW(Checkpointer::latest(dir.path), InputError);  // no LATEST
  fs::create_directories(dir.path + "/iter-00000010");
  spit(dir.path + "/LATEST", "iter-00000010\n");
  EXPECT_THROW(Checkpointer::latest(dir.path), InputError);  // no manifest
  spit(dir.path + "/iter-00000010/MANIFEST", "poseidon-checkpoint 1\niteration 10\nranks 1\nconfig x\ncrc 1\n");
  EXPECT_THROW(Checkpointer::latest(dir.path), InputError);  // bad checksum
  spit(dir.path + "/LATEST", "../../etc\n");
  EXPECT_THROW(Checkpointer::latest(dir.path), InputError);
}

// The Python package keeps its own pickled state (optimizer, random state) in a rank file's
// meta, beside the records: any bytes, NULs and newlines included, come back as written.
TEST(Checkpointer, CarriesEachRanksExtraBytesBesideItsRecords) {
  TempDir dir;
  LoopbackHub hub(1);
  FailureState failure;
  ControlChannel control(hub.transport(0), std::chrono::seconds(5), failure);
  std::vector<float> a = {1, 2, 3}, a2(3);
  const std::string extra("pickled\0bytes\nand more", 22);
  Checkpointer(dir.path, control, 0, 1).save(7, "cfg", {{"a", a.data(), 12}}, extra);
  const CheckpointInfo info = Checkpointer::latest(dir.path);
  EXPECT_EQ(info.iteration, 7u);
  EXPECT_EQ(Checkpointer::readExtra(info, 0), extra);  // without the records
  EXPECT_EQ(Checkpointer(dir.path, control, 0, 1).load(info, {{"a", a2.data(), 12}}), extra);
  EXPECT_EQ(a2, a);
  // Without extra bytes the meta stays "iteration T" (the CLI's checkpoints) and none come back.
  Checkpointer(dir.path, control, 0, 1).save(8, "cfg", {{"a", a.data(), 12}});
  EXPECT_EQ(Checkpointer(dir.path, control, 0, 1).load(Checkpointer::latest(dir.path), {{"a", a2.data(), 12}}), "");
}

// A save is staged and renamed into place: one that fails half way (here its staging
// folder cannot be made) leaves the complete checkpoint of the same iteration as it was,
// and one that succeeds replaces it and leaves nothing else behind.
TEST(Checkpointer, SavingAnIterationAgainReplacesItOnlyWhenTheSaveIsComplete) {
  TempDir dir;
  LoopbackHub hub(1);
  FailureState failure;
  ControlChannel control(hub.transport(0), std::chrono::seconds(5), failure);
  std::vector<float> first = {1, 2, 3}, second = {4, 5, 6}, out(3);
  Checkpointer(dir.path, control, 0, 1).save(7, "cfg", {{"a", first.data(), 12}});
  spit(dir.path + "/.iter-00000007.staging", "a file where the staging folder goes");
  EXPECT_THROW(Checkpointer(dir.path, control, 0, 1).save(7, "cfg", {{"a", second.data(), 12}}), Error);
  Checkpointer(dir.path, control, 0, 1).load(Checkpointer::latest(dir.path), {{"a", out.data(), 12}});
  EXPECT_EQ(out, first);

  Checkpointer(dir.path, control, 0, 1).save(7, "cfg", {{"a", second.data(), 12}});
  Checkpointer(dir.path, control, 0, 1).load(Checkpointer::latest(dir.path), {{"a", out.data(), 12}});
  EXPECT_EQ(out, second);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"LATEST", "iter-00000007"}));

  // A job that died between the two renames of a re-save: the old one is still found.
  fs::rename(dir.path + "/iter-00000007", dir.path + "/.iter-00000007.old");
  const CheckpointInfo info = Checkpointer::latest(dir.path);
  EXPECT_EQ(info.iteration, 7u);
  Checkpointer(dir.path, control, 0, 1).load(info, {{"a", out.data(), 12}});
  EXPECT_EQ(out, second);
}

}  // namespace
}  // namespace poseidon
