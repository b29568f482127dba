// The wire form of one worker's sparse rows (MsgType::kRows): the rows of a layer's
// gradient (rows x width) that are not all zero, with their indices, or, where that would
// be larger, the whole gradient. Each worker picks the smaller form for its own gradient in
// each iteration; a receiver reads either.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/message.h"

namespace poseidon {

// What one kRows message holds, viewed in place (the message must outlive it).
struct RowsView {
  bool dense = false;
  std::int64_t count = 0;                // rows carried (all of them when dense)
  const std::int32_t* index = nullptr;   // count indices, ascending (null when dense)
  const float* values = nullptr;         // count x width floats
};

// Scans `grad` (rows x width) and packs the rows that hold a non-zero value (a zero row adds
// nothing to the sum) with their indices, or the whole gradient when that is no larger.
Message packRows(int layer, int source, std::uint64_t iteration, const float* grad, std::int64_t rows,
                 std::int64_t width);

// Checks a kRows message against the layer's shape (size, indices in range and ascending)
// and views it; throws CommError naming the sender otherwise.
RowsView rowsOf(const Message& m, std::int64_t rows, std::int64_t width);

// sum += the rows of `v` (sum: rows x width).
void addRows(const RowsView& v, float* sum, std::int64_t width);

// Zeroes the rows of `v` in `grad` (rows x width): the whole gradient when `v` is dense.
void clearRows(const RowsView& v, float* grad, std::int64_t rows, std::int64_t width);

}  // namespace poseidon
