#include "checkpoint/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/crc32.h"
#include "poseidon/errors.h"

namespace poseidon {

namespace {

constexpr char kMagic[8] = {'P', 'S', 'D', 'N', 'S', 'T', 'A', 'T'};
constexpr std::uint32_t kVersion = 1;
// Bounds on what a header may announce, checked before anything is allocated.
constexpr std::uint32_t kMaxRecords = 1u << 20;
constexpr std::uint32_t kMaxName = 4096;

std::string folderOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

void writeAll(int fd, const void* data, std::size_t bytes, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(detail::cat("cannot write ", path, ": ", std::strerror(errno)));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// Writes through a temporary file and renames it over `path` once it is on disk.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(detail::cat("cannot create ", tmp_, ": ", std::strerror(errno)));
  }
  ~AtomicFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  void write(const void* data, std::size_t bytes) {
    writeAll(fd_, data, bytes, tmp_);
    crc_ = crc32Update(crc_, data, bytes);
    size_ += bytes;
  }
  FileDigest commit() {
    if (::fsync(fd_) != 0) throw Error(detail::cat("cannot fsync ", tmp_, ": ", std::strerror(errno)));
    ::close(fd_);
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      ::unlink(tmp_.c_str());
      throw Error(detail::cat("cannot rename ", tmp_, " to ", path_, ": ", std::strerror(errno)));
    }
    // The rename itself must reach the disk too.
    const int dir = ::open(folderOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
    return FileDigest{size_, crc_};
  }
  std::uint32_t crc() const { return crc_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  std::uint32_t crc_ = 0;
  std::uint64_t size_ = 0;
};

template <typename T>
void put(AtomicFile& f, T value) {
  f.write(&value, sizeof(value));
}

// Reads from an in-memory copy of the file; every read is bounds-checked.
class Cursor {
 public:
  Cursor(const std::string& bytes, std::size_t end, const std::string& path) : bytes_(bytes), end_(end), path_(path) {}
  template <typename T>
  T get(const char* what) {
    T value;
    std::memcpy(&value, skip(sizeof(value), what), sizeof(value));
    return value;
  }
  // Moves past n bytes and returns where they start.
  const char* skip(std::uint64_t n, const char* what) {
    if (n > end_ - at_) throw InputError(detail::cat("checkpoint file ", path_, " is truncated (in ", what, ")"));
    const char* p = bytes_.data() + at_;
    at_ += static_cast<std::size_t>(n);
    return p;
  }
  std::size_t left() const { return end_ - at_; }

 private:
  const std::string& bytes_;
  const std::size_t end_;
  const std::string& path_;
  std::size_t at_ = 0;
};

}  // namespace

FileDigest writeStateFile(const std::string& path, const std::string& meta, const std::vector<StateRecord>& records) {
  AtomicFile f(path);
  f.write(kMagic, sizeof(kMagic));
  put<std::uint32_t>(f, kVersion);
  put<std::uint32_t>(f, static_cast<std::uint32_t>(records.size()));
  put<std::uint64_t>(f, meta.size());
  f.write(meta.data(), meta.size());
  for (const auto& r : records) {
    put<std::uint32_t>(f, static_cast<std::uint32_t>(r.name.size()));
    f.write(r.name.data(), r.name.size());
    put<std::uint64_t>(f, r.bytes);
    f.write(r.data, r.bytes);
  }
  put<std::uint32_t>(f, f.crc());
  return f.commit();
}

std::string readFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(detail::cat("cannot read checkpoint file ", path));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

FileDigest digestOf(const std::string& bytes) {
  return FileDigest{bytes.size(), crc32Update(0, bytes.data(), bytes.size())};
}

std::string readStateFile(const std::string& path, const std::vector<StateRecord>& records) {
  return parseStateFile(readFileBytes(path), path, records);
}

namespace {

// What precedes the records: magic, version, count and meta, with the CRC of the whole
// file checked first. Leaves `c` at the first record.
struct Header {
  std::uint32_t count = 0;
  std::string meta;
};

Header parseHeader(const std::string& bytes, const std::string& path, Cursor& c) {
  if (bytes.size() < sizeof(kMagic) + 4 + 4 + 8 + 4)
    throw InputError(detail::cat("checkpoint file ", path, " is truncated"));
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    throw InputError(detail::cat(path, " is not a Poseidon checkpoint file"));
  }
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  const std::uint32_t crc = crc32Update(0, bytes.data(), bytes.size() - 4);
  if (crc != stored_crc) throw InputError(detail::cat("checkpoint file ", path, " is corrupt (checksum mismatch)"));
  c.skip(sizeof(kMagic), "magic");
  const auto version = c.get<std::uint32_t>("version");
  if (version != kVersion) {
    throw InputError(
        detail::cat("checkpoint file ", path, " has format version ", version, "; this build reads ", kVersion));
  }
  Header h;
  h.count = c.get<std::uint32_t>("record count");
  const auto meta_bytes = c.get<std::uint64_t>("meta length");
  if (h.count > kMaxRecords) throw InputError(detail::cat("checkpoint file ", path, " is corrupt"));
  h.meta.assign(c.skip(meta_bytes, "meta"), meta_bytes);
  return h;
}

}  // namespace

std::string parseStateMeta(const std::string& bytes, const std::string& path) {
  Cursor c(bytes, bytes.size() < 4 ? 0 : bytes.size() - 4, path);
  return parseHeader(bytes, path, c).meta;
}

std::string parseStateFile(const std::string& bytes, const std::string& path, const std::vector<StateRecord>& records) {
  Cursor c(bytes, bytes.size() < 4 ? 0 : bytes.size() - 4, path);
  const Header h = parseHeader(bytes, path, c);
  if (h.count != records.size()) {
    throw InputError(detail::cat("checkpoint file ", path, " holds ", h.count, " records, this run expects ",
                                 records.size(), ": it was written for another model or configuration"));
  }
  // Every record's name and size first, then the copies: on a mismatch memory is untouched.
  std::vector<const char*> payloads;
  for (const auto& r : records) {
    const auto name_bytes = c.get<std::uint32_t>("record name length");
    if (name_bytes > kMaxName) throw InputError(detail::cat("checkpoint file ", path, " is corrupt"));
    const std::string name(c.skip(name_bytes, "record name"), name_bytes);
    const auto n = c.get<std::uint64_t>("record length");
    if (name != r.name || n != r.bytes) {
      throw InputError(detail::cat("checkpoint file ", path, " holds '", name, "' (", n,
                                   " bytes) where this run expects '", r.name, "' (", r.bytes,
                                   " bytes): it was written for another model or configuration"));
    }
    payloads.push_back(c.skip(n, r.name.c_str()));
  }
  if (c.left() != 0) throw InputError(detail::cat("checkpoint file ", path, " has trailing bytes"));
  for (std::size_t i = 0; i < records.size(); ++i) std::memcpy(records[i].data, payloads[i], records[i].bytes);
  return h.meta;
}

std::map<std::string, std::string> parseNamedRecords(const std::string& bytes, const std::string& path,
                                                     const std::string& prefix) {
  Cursor c(bytes, bytes.size() < 4 ? 0 : bytes.size() - 4, path);
  const Header h = parseHeader(bytes, path, c);
  std::map<std::string, std::string> found;
  for (std::uint32_t i = 0; i < h.count; ++i) {
    const auto name_bytes = c.get<std::uint32_t>("record name length");
    if (name_bytes > kMaxName) throw InputError(detail::cat("checkpoint file ", path, " is corrupt"));
    std::string name(c.skip(name_bytes, "record name"), name_bytes);
    const auto n = c.get<std::uint64_t>("record length");
    const char* data = c.skip(n, "record");
    if (name.compare(0, prefix.size(), prefix) == 0) found[std::move(name)].assign(data, n);
  }
  if (c.left() != 0) throw InputError(detail::cat("checkpoint file ", path, " has trailing bytes"));
  return found;
}

void writeFileAtomically(const std::string& path, const std::string& contents) {
  AtomicFile f(path);
  f.write(contents.data(), contents.size());
  f.commit();
}

FileDigest digestFile(const std::string& path) { return digestOf(readFileBytes(path)); }

}  // namespace poseidon
