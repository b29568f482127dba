#include "checkpoint/checkpointer.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/fault.h"
#include "common/files.h"
#include "poseidon/collectives.h"
#include "poseidon/errors.h"
#include "poseidon/options.h"

namespace poseidon {

namespace {

constexpr const char* kHeader = "poseidon-checkpoint 1";

std::string folderName(std::uint64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof(name), "iter-%08llu", static_cast<unsigned long long>(iteration));
  return name;
}

std::string rankFile(int rank) { return detail::cat("rank-", rank, ".state"); }

std::uint32_t crcOf(const std::string& text) { return digestOf(text).crc; }

// A rank file's meta: "iteration T", then "\n" and the adapter's extra bytes if any.
std::string metaOf(std::uint64_t iteration, const std::string& extra) {
  return extra.empty() ? detail::cat("iteration ", iteration) : detail::cat("iteration ", iteration, "\n", extra);
}

std::string extraOf(const std::string& meta) {
  const auto newline = meta.find('\n');
  return newline == std::string::npos ? "" : meta.substr(newline + 1);
}

std::string readText(const std::string& path, std::size_t limit) {
  std::string text = readFileBytes(path);
  if (text.size() > limit) throw InputError(detail::cat(path, " is too large to be a checkpoint manifest"));
  return text;
}

}  // namespace

CheckpointInfo Checkpointer::parseManifest(const std::string& text, const std::string& folder) {
  const std::string path = folder + "/MANIFEST";
  const auto crc_at = text.rfind("crc ");
  if (text.rfind(kHeader, 0) != 0 || crc_at == std::string::npos) {
    throw InputError(detail::cat(path, " is not a Poseidon checkpoint manifest"));
  }
  unsigned long crc = 0;
  if (std::sscanf(text.c_str() + crc_at, "crc %lu", &crc) != 1 || crc != crcOf(text.substr(0, crc_at))) {
    throw InputError(detail::cat(path, " is corrupt (checksum mismatch)"));
  }
  CheckpointInfo info;
  info.folder = folder;
  std::istringstream lines(text.substr(0, crc_at));
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "iteration") {
      words >> info.iteration;
    } else if (key == "ranks") {
      words >> info.ranks;
    } else if (key == "config") {
      info.config = line.size() > 7 ? line.substr(7) : "";
    } else if (key == "file") {
      FileDigest d;
      int rank = -1;
      words >> rank >> d.bytes >> d.crc;
      if (rank != static_cast<int>(info.files.size())) throw InputError(detail::cat(path, " is corrupt"));
      info.files.push_back(d);
    }
    if (words.fail()) throw InputError(detail::cat(path, " is corrupt (line '", line.substr(0, 60), "')"));
  }
  if (info.ranks <= 0 || static_cast<int>(info.files.size()) != info.ranks) {
    throw InputError(detail::cat(path, " is incomplete"));
  }
  return info;
}

Checkpointer::Checkpointer(std::string dir, Collectives& control, int rank, int ranks)
    : dir_(std::move(dir)), control_(control), rank_(rank), ranks_(ranks) {}

void Checkpointer::save(std::uint64_t iteration, const std::string& config, const std::vector<StateRecord>& records,
                        const std::string& extra) {
  const std::string name = folderName(iteration);
  // Every rank writes into a staging folder that rank 0 renames once all files and the
  // manifest are there: a save that fails half way never touches a complete checkpoint,
  // not even one of the same iteration saved before.
  const std::string staging = dir_ + "/." + name + ".staging";
  const std::string file = staging + "/" + rankFile(rank_);
  std::string mine;
  try {
    makeDirectories(staging);
    const FileDigest d = writeStateFile(file, metaOf(iteration, extra), records);
    mine = detail::cat("ok ", d.bytes, " ", d.crc);
  } catch (const std::exception& e) {
    mine = detail::cat("rank ", rank_, ": ", e.what());
  }
  faultPoint(rank_, "checkpoint");
  const auto all = control_.allgather(mine, "checkpoint files");
  for (const auto& a : all) {
    if (a.rfind("ok ", 0) == 0) continue;
    // Leave no half checkpoint behind to fill a disk that is likely full already; LATEST
    // still names the previous one.
    removePath(file);
    removePath(file + ".tmp");
    removePath(staging);  // once empty: the last rank to clean up removes it
    throw Error("checkpoint at iteration " + std::to_string(iteration) + " failed: " + a);
  }
  if (rank_ == 0) {
    std::string text = detail::cat(kHeader, "\niteration ", iteration, "\nranks ", ranks_, "\nconfig ", config, "\n");
    for (int r = 0; r < ranks_; ++r) text += detail::cat("file ", r, " ", all[r].substr(3), "\n");
    text += detail::cat("crc ", crcOf(text), "\n");
    writeFileAtomically(staging + "/MANIFEST", text);
    publish(staging, name);
    removeOlder(name);
  }
  control_.barrier("checkpoint written");
}

void Checkpointer::publish(const std::string& staging, const std::string& name) const {
  const std::string folder = dir_ + "/" + name;
  const std::string replaced = dir_ + "/." + name + ".old";
  // What an earlier save that died here left (another job's rank files) is not published.
  for (const auto& file : listDirectory(staging)) {
    bool ours = file == "MANIFEST";
    for (int r = 0; r < ranks_ && !ours; ++r) ours = file == rankFile(r);
    if (!ours) removeTree(staging + "/" + file);
  }
  // The same iteration saved again (a new run in an old folder): the old one steps aside
  // first; latest() finds it there if the job dies before the new one is in place.
  if (pathExists(folder)) {
    removeTree(replaced);
    renamePath(folder, replaced);
  }
  renamePath(staging, folder);
  writeFileAtomically(dir_ + "/LATEST", name + "\n");
  removeTree(replaced);
}

void Checkpointer::removeOlder(const std::string& name) const {
  // Keep the two newest complete ones; what LATEST does not name is only ever removed
  // after it moved on. A folder without a MANIFEST never counts as one of the two.
  std::vector<std::string> old;
  for (const auto& other : listDirectory(dir_)) {
    const std::string path = dir_ + "/" + other;
    if (other.rfind("iter-", 0) == 0 && other < name && isDirectory(path) && pathExists(path + "/MANIFEST")) {
      old.push_back(other);
    }
  }
  std::sort(old.begin(), old.end());
  for (std::size_t i = 0; i + 1 < old.size(); ++i) {
    removeTree(dir_ + "/" + old[i]);  // best effort: a leftover folder harms nothing
  }
}

CheckpointInfo Checkpointer::latest(const std::string& dir) {
  if (!isDirectory(dir)) throw InputError(detail::cat("resume from ", dir, ": no such folder"));
  const std::string latest = dir + "/LATEST";
  if (!pathExists(latest)) {
    throw InputError(detail::cat("resume from ", dir, ": no complete checkpoint there (no LATEST file)"));
  }
  std::string name = readText(latest, 256);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.rfind("iter-", 0) != 0 || name.find('/') != std::string::npos) {
    throw InputError(detail::cat(latest, " is corrupt"));
  }
  std::string folder = dir + "/" + name;
  // Missing only if the job died while publish() put a new save of this iteration in place.
  if (!pathExists(folder + "/MANIFEST") && pathExists(dir + "/." + name + ".old/MANIFEST")) {
    folder = dir + "/." + name + ".old";
  }
  CheckpointInfo info = parseManifest(readText(folder + "/MANIFEST", 1 << 20), folder);
  if (folderName(info.iteration) != name) throw InputError(detail::cat(folder, "/MANIFEST names another iteration"));
  return info;
}

void Checkpointer::checkRanks(const CheckpointInfo& info, int ranks) {
  if (info.ranks != ranks) {
    throw InputError(detail::cat("the checkpoint in ", info.folder, " was written by ", info.ranks,
                                 " ranks; resume it with mpirun -np ", info.ranks));
  }
}

void Checkpointer::checkCompatible(const CheckpointInfo& info, const std::string& saved_for,
                                   int ranks) {
  checkRanks(info, ranks);
  // Whole momentum on every rank (no sharded field in the checkpoint) serves a run that
  // steps allreduce layers by owner as well: compare without this run's field then.
  std::string config = saved_for;
  const std::string sharded = kShardedAllreduceField;
  const std::size_t at = config.find(sharded);
  if (at != std::string::npos && info.config.find(sharded) == std::string::npos) config.erase(at, sharded.size());
  if (info.config != config && info.config.find(sharded) != std::string::npos &&
      config.find(sharded) == std::string::npos) {
    throw InputError(detail::cat("the checkpoint in ", info.folder,
                                 " holds allreduce momentum sharded by owner (saved in server mode), which only such a "
                                 "run can resume: resume it with the original settings"));
  }
  // Settings written before runConfiguration() cannot be compared field by field: say so
  // rather than show two unrelated strings.
  const auto formatted = [](const std::string& c) { return c.rfind(kConfigurationFormat, 0) == 0; };
  if (info.config != config && formatted(config) && !formatted(info.config)) {
    throw InputError(detail::cat("the checkpoint in ", info.folder,
                                 " was written by an older Poseidon, whose record of the settings this one cannot "
                                 "compare ('",
                                 info.config.substr(0, 60), "...'); resume it with that version, or start anew"));
  }
  if (info.config != config) {
    std::size_t i = 0;
    while (i < config.size() && i < info.config.size() && config[i] == info.config[i]) ++i;
    const std::size_t from = i > 20 ? i - 20 : 0;
    throw InputError(detail::cat("the checkpoint in ", info.folder, " was written with other settings: '...",
                                 info.config.substr(from, 60), "' vs this run's '...", config.substr(from, 60),
                                 "'; resume with the flags of the original run"));
  }
}

namespace {

// One read of a rank's file, its bytes checked against the manifest.
std::string readRankFile(const CheckpointInfo& info, int rank) {
  const std::string path = info.folder + "/" + rankFile(rank);
  if (rank < 0 || rank >= static_cast<int>(info.files.size())) {
    throw InputError(detail::cat(info.folder, " holds no file of rank ", rank));
  }
  std::string bytes = readFileBytes(path);
  const FileDigest d = digestOf(bytes);
  const FileDigest& want = info.files[static_cast<std::size_t>(rank)];
  if (d.bytes != want.bytes || d.crc != want.crc) {
    throw InputError(detail::cat(path, " does not match its manifest (", d.bytes, " bytes, CRC ", d.crc,
                                 "; the manifest says ", want.bytes, " bytes, CRC ", want.crc, ")"));
  }
  return bytes;
}

}  // namespace

std::string Checkpointer::readExtra(const CheckpointInfo& info, int rank) {
  return extraOf(parseStateMeta(readRankFile(info, rank), info.folder + "/" + rankFile(rank)));
}

std::map<std::string, std::string> Checkpointer::readRecords(const CheckpointInfo& info, int rank,
                                                            const std::string& prefix) {
  return parseNamedRecords(readRankFile(info, rank), info.folder + "/" + rankFile(rank), prefix);
}

std::string Checkpointer::load(const CheckpointInfo& info, const std::vector<StateRecord>& records) {
  std::string mine = "ok", extra;
  try {
    const std::string bytes = readRankFile(info, rank_);
    extra = extraOf(parseStateFile(bytes, info.folder + "/" + rankFile(rank_), records));
  } catch (const std::exception& e) {
    mine = detail::cat("rank ", rank_, ": ", e.what());
  }
  const auto all = control_.allgather(mine, "checkpoint restore");
  for (const auto& a : all) {
    if (a != "ok") throw InputError("cannot resume: " + a);
  }
  return extra;
}

}  // namespace poseidon
