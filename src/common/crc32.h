// CRC-32 (zlib's: the reflected polynomial 0xEDB88320, pre- and post-inverted), the checksum
// of checkpoint files: zlib's crc32_z where the build has zlib, else a portable
// slicing-by-8 table (a build without the zlib headers, such as `pip install .` on a machine
// with only a compiler). The two give the same value, so checkpoints move between builds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace poseidon {

// The CRC of `bytes` bytes at `data` appended to a CRC so far (0 to start).
std::uint32_t crc32Update(std::uint32_t crc, const void* data, std::size_t bytes);
// The portable implementation (what crc32Update is without zlib; the unit test compares).
std::uint32_t crc32Portable(std::uint32_t crc, const void* data, std::size_t bytes);

}  // namespace poseidon
