// One rank's share of a checkpoint: named byte records (parameters, optimizer state,
// random state) in a self-checking file. Written atomically: a temporary file, fsync,
// rename, fsync of the folder, so a crash leaves the old file or the new one, never half.
//
// Layout (little-endian): "PSDNSTAT" | u32 version | u32 records | u64 meta bytes | meta |
// per record: u32 name bytes | name | u64 bytes | bytes | ... | u32 CRC-32 of all before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "poseidon/state_record.h"

namespace poseidon {

struct FileDigest {
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
};

// Writes `records` and `meta` to `path` atomically; returns the file's size and CRC-32.
FileDigest writeStateFile(const std::string& path, const std::string& meta, const std::vector<StateRecord>& records);

// Reads `path` into `records`, which must match the file's records one for one (names and
// sizes); checks magic, version, every length against the file's size, and the CRC.
// Throws InputError saying what is wrong; `records` are untouched unless all is well.
// Returns the meta string.
std::string readStateFile(const std::string& path, const std::vector<StateRecord>& records);

// The same, from the file's bytes (`path` only names it in errors).
std::string parseStateFile(const std::string& bytes, const std::string& path, const std::vector<StateRecord>& records);

// The records of a state file's bytes whose names start with `prefix`, by name, whatever
// their sizes (magic, version, CRC and every length checked): for state a run reads before
// it knows the sizes, such as the random generators' (src/torch/random_state.h).
std::map<std::string, std::string> parseNamedRecords(const std::string& bytes, const std::string& path,
                                                     const std::string& prefix);

// Only the meta of a state file's bytes (magic, version and CRC checked; records skipped).
std::string parseStateMeta(const std::string& bytes, const std::string& path);

// A whole file's bytes (InputError if it cannot be read), and the size and CRC-32 of bytes.
std::string readFileBytes(const std::string& path);
FileDigest digestOf(const std::string& bytes);

// Writes a small text file atomically (same protocol).
void writeFileAtomically(const std::string& path, const std::string& contents);
// CRC-32 and size of a whole file.
FileDigest digestFile(const std::string& path);

}  // namespace poseidon
