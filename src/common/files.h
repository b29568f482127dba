// The few file-system operations the checkpoints need, over POSIX calls.
//
// Not std::filesystem: PyPI's torch wheels export their own copy of libstdc++'s
// std::filesystem symbols (built with another toolchain) from libtorch.so, and a program
// linked against that LibTorch binds its std::filesystem calls to them; remove_all there
// jumped to address 0 (a resumed `poseidon train` crashed removing an old checkpoint).
#pragma once

#include <string>
#include <vector>

namespace poseidon {

bool pathExists(const std::string& path);  // follows links
bool isDirectory(const std::string& path);
// mkdir -p; throws Error naming the path and the system's reason.
void makeDirectories(const std::string& path);
// rename(2); throws Error naming both paths and the reason.
void renamePath(const std::string& from, const std::string& to);
// Names in a folder, "." and ".." left out; throws Error if it cannot be read.
std::vector<std::string> listDirectory(const std::string& path);
// Best effort, never throws: a file or an empty folder; a whole tree (not following links).
void removePath(const std::string& path) noexcept;
void removeTree(const std::string& path) noexcept;

}  // namespace poseidon
