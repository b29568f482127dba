// Checkpoints of a whole job, one folder per checkpoint (2015 paper: exact restart):
//   DIR/iter-<T>/rank-<r>.state   each rank's records (state_file.h)
//   DIR/iter-<T>/MANIFEST         iteration, ranks, configuration, every file's size and
//                                 CRC-32, and a CRC of the manifest itself; written last
//   DIR/LATEST                    the folder of the newest complete checkpoint
//   DIR/.iter-<T>.staging         where a save is written before rank 0 renames it
// A checkpoint exists once LATEST names it; a crash or a failed save at any moment leaves
// the previous one readable. The two newest are kept.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/state_file.h"

namespace poseidon {

class Collectives;

struct CheckpointInfo {
  std::string folder;  // DIR/iter-<T>
  std::uint64_t iteration = 0;
  int ranks = 0;
  std::string config;
  std::vector<FileDigest> files;  // by rank
};

class Checkpointer {
 public:
  Checkpointer(std::string dir, Collectives& control, int rank, int ranks);

  // Collective: every rank writes its records, rank 0 the manifest and LATEST. `config`
  // describes what a resumed run must match (one line). `extra`: this rank's own bytes
  // beside the records (the Python package's pickled optimizer and checkpoint objects), kept in
  // the rank file's meta and covered by its checksum.
  void save(std::uint64_t iteration, const std::string& config, const std::vector<StateRecord>& records,
            const std::string& extra = "");

  // The newest complete checkpoint in `dir`, its manifest checked; InputError if there is
  // none or it is damaged.
  static CheckpointInfo latest(const std::string& dir);
  // Parses the MANIFEST text of `folder`, checksum included; InputError if damaged.
  static CheckpointInfo parseManifest(const std::string& text, const std::string& folder);
  // Throws InputError unless a run on `ranks` ranks may resume from `info`.
  static void checkRanks(const CheckpointInfo& info, int ranks);
  // Throws InputError unless a run with `config` on `ranks` ranks may resume from `info`.
  static void checkCompatible(const CheckpointInfo& info, const std::string& config, int ranks);

  // Not collective: `rank`'s extra bytes in `info`, its file checked against the manifest.
  static std::string readExtra(const CheckpointInfo& info, int rank);
  // Not collective: `rank`'s records in `info` whose names start with `prefix`, by name.
  static std::map<std::string, std::string> readRecords(const CheckpointInfo& info, int rank,
                                                        const std::string& prefix);
  // Collective: restores this rank's records from `info` and returns its `extra` bytes. If
  // any rank fails, every rank throws the same error, so none goes on training alone.
  std::string load(const CheckpointInfo& info, const std::vector<StateRecord>& records);

 private:
  // Rank 0: renames the finished staging folder to DIR/<name> and points LATEST at it.
  void publish(const std::string& staging, const std::string& name) const;
  // Rank 0: removes complete checkpoints older than the two newest.
  void removeOlder(const std::string& name) const;

  const std::string dir_;
  Collectives& control_;
  const int rank_;
  const int ranks_;
};

}  // namespace poseidon
