#include "sparse/row_message.h"

#include <cstring>

#include "poseidon/errors.h"

namespace poseidon {

namespace {
// The payload starts with this, then the indices (sparse form only), then the values.
struct Prefix {
  std::uint32_t count;
  std::uint32_t dense;
};

bool zeroRow(const float* row, std::int64_t width) {
  for (std::int64_t i = 0; i < width; ++i) {
    if (row[i] != 0.0f) return false;
  }
  return true;
}
}  // namespace

Message packRows(int layer, int source, std::uint64_t iteration, const float* grad, std::int64_t rows,
                 std::int64_t width) {
  std::vector<std::int32_t> touched;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!zeroRow(grad + r * width, width)) touched.push_back(static_cast<std::int32_t>(r));
  }
  const auto n = static_cast<std::int64_t>(touched.size());
  const bool dense = n * (width + 1) >= rows * width;
  const std::int64_t count = dense ? rows : n;
  const std::size_t index_bytes = dense ? 0 : touched.size() * sizeof(std::int32_t);
  const std::size_t value_bytes = static_cast<std::size_t>(count * width) * sizeof(float);
  Message m = Message::make(MsgType::kRows, static_cast<std::uint32_t>(layer), static_cast<std::uint32_t>(source),
                            iteration, sizeof(Prefix) + index_bytes + value_bytes);
  const Prefix p{static_cast<std::uint32_t>(count), dense ? 1u : 0u};
  std::uint8_t* out = m.payload();
  std::memcpy(out, &p, sizeof(p));
  out += sizeof(p);
  if (dense) {
    std::memcpy(out, grad, value_bytes);
    return m;
  }
  if (n == 0) return m;  // an unused layer: no rows (and no memcpy from an empty vector's null data)
  std::memcpy(out, touched.data(), index_bytes);
  auto* values = reinterpret_cast<float*>(out + index_bytes);
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(values + i * width, grad + touched[i] * width, width * sizeof(float));
  }
  return m;
}

RowsView rowsOf(const Message& m, std::int64_t rows, std::int64_t width) {
  const auto& h = m.header();
  const auto bad = [&](const char* what) {
    return CommError(detail::cat("rank ", h.source, " sent malformed rows for layer ", h.key, ": ", what));
  };
  if (m.payloadBytes() < sizeof(Prefix)) throw bad("shorter than its prefix");
  Prefix p;
  std::memcpy(&p, m.payload(), sizeof(p));
  if (p.dense > 1 || p.count > static_cast<std::uint64_t>(rows) || (p.dense && p.count != rows)) {
    throw bad("a row count the layer does not have");
  }
  RowsView v;
  v.dense = p.dense == 1;
  v.count = p.count;
  const std::size_t index_bytes = v.dense ? 0 : static_cast<std::size_t>(v.count) * sizeof(std::int32_t);
  if (m.payloadBytes() != sizeof(Prefix) + index_bytes + static_cast<std::size_t>(v.count * width) * sizeof(float)) {
    throw bad("its size is not its rows'");
  }
  const std::uint8_t* at = m.payload() + sizeof(Prefix);
  if (!v.dense) {
    v.index = reinterpret_cast<const std::int32_t*>(at);
    for (std::int64_t i = 0; i < v.count; ++i) {
      if (v.index[i] < 0 || v.index[i] >= rows || (i > 0 && v.index[i] <= v.index[i - 1])) {
        throw bad("row indices out of range or not ascending");
      }
    }
  }
  v.values = reinterpret_cast<const float*>(at + index_bytes);
  return v;
}

void addRows(const RowsView& v, float* sum, std::int64_t width) {
  for (std::int64_t i = 0; i < v.count; ++i) {
    float* row = sum + (v.dense ? i : v.index[i]) * width;
    const float* add = v.values + i * width;
    for (std::int64_t j = 0; j < width; ++j) row[j] += add[j];
  }
}

void clearRows(const RowsView& v, float* grad, std::int64_t rows, std::int64_t width) {
  if (v.dense) {
    std::memset(grad, 0, static_cast<std::size_t>(rows * width) * sizeof(float));
    return;
  }
  for (std::int64_t i = 0; i < v.count; ++i) {
    std::memset(grad + v.index[i] * width, 0, static_cast<std::size_t>(width) * sizeof(float));
  }
}

}  // namespace poseidon
