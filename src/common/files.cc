#include "common/files.h"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {

namespace {

std::string reason() { return std::strerror(errno); }

}  // namespace

bool pathExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;  // follows links, as std::filesystem::exists
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void makeDirectories(const std::string& path) {
  // Each prefix in turn, as mkdir -p; one that exists already (a folder) is fine.
  for (std::size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string part = path.substr(0, end);
    // Any error on a folder that is there is fine (some file systems say EACCES or EROFS).
    if (!part.empty() && ::mkdir(part.c_str(), 0777) != 0 && !isDirectory(part)) {
      throw Error(detail::cat("cannot make the folder ", part, ": ", reason()));
    }
    if (end == std::string::npos) return;
  }
}

void renamePath(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw Error(detail::cat("cannot rename ", from, " to ", to, ": ", reason()));
  }
}

std::vector<std::string> listDirectory(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (!dir) throw Error(detail::cat("cannot read the folder ", path, ": ", reason()));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

void removePath(const std::string& path) noexcept {
  if (::unlink(path.c_str()) != 0) ::rmdir(path.c_str());
}

void removeTree(const std::string& path) noexcept {
  // Children before their folder (FTW_DEPTH), links removed as links (FTW_PHYS).
  ::nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int type, struct FTW*) {
        (type == FTW_DP ? ::rmdir(p) : ::unlink(p));
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace poseidon
