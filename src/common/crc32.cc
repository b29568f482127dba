#include "common/crc32.h"

#include <cstring>

#ifdef POSEIDON_HAVE_ZLIB
#include <zlib.h>
#endif

namespace poseidon {

namespace {

struct Tables {
  std::uint32_t t[8][256];
};

// t[0]: one byte's CRC; t[s]: that byte followed by s zero bytes (slicing-by-8).
Tables makeTables() {
  Tables x{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int j = 0; j < 8; ++j) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    x.t[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) x.t[s][i] = (x.t[s - 1][i] >> 8) ^ x.t[0][x.t[s - 1][i] & 0xFF];
  }
  return x;
}

}  // namespace

// The 8-byte step reads little-endian words (x86-64 and arm64 Linux, where Poseidon runs).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "crc32Portable's slicing-by-8 assumes little-endian");

std::uint32_t crc32Portable(std::uint32_t crc, const void* data, std::size_t bytes) {
  static const Tables tables = makeTables();  // constant data, made once
  const auto& t = tables.t;
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {  // little-endian words, as on x86 and arm64 Linux
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
          t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; bytes > 0; --bytes) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return ~crc;
}

std::uint32_t crc32Update(std::uint32_t crc, const void* data, std::size_t bytes) {
#ifdef POSEIDON_HAVE_ZLIB
  return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), bytes));
#else
  return crc32Portable(crc, data, bytes);
#endif
}

}  // namespace poseidon
