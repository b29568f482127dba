// A message from the wire (Message::decode: the 32-byte header checks).
#include <cstring>
#include <memory>

#include "comm/message.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return poseidon::fuzz::parseOrRefuse([&] {
    auto bytes = std::make_unique<std::uint8_t[]>(size);
    if (size) std::memcpy(bytes.get(), data, size);
    const poseidon::Message m = poseidon::Message::decode(std::move(bytes), size, 1 << 20);
    // A decoded message's accessors must stay inside its bytes: every float is read into a
    // volatile sink, a load the optimiser may not drop before ASan sees it.
    volatile float sink = 0;
    const float* f = m.floats();
    for (std::size_t i = 0, n = m.floatCount(); i < n; ++i) sink = f[i];
    (void)sink;
  });
}
