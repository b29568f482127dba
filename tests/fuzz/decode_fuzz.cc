// libFuzzer target: everything Poseidon decodes from bytes it did not write itself must
// either parse or throw Poseidon's Error, never crash, hang or read out of bounds (run
// under AddressSanitizer and UndefinedBehaviorSanitizer). The first byte picks the parser:
//   0: a message from the wire (Message::decode, the 32-byte header checks);
//   1: a rank's checkpoint state file;
//   2: a checkpoint manifest.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/state_file.h"
#include "comm/message.h"
#include "poseidon/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace poseidon;
  if (size == 0) return 0;
  const std::uint8_t which = data[0] % 3;
  ++data;
  --size;
  try {
    if (which == 0) {
      auto bytes = std::make_unique<std::uint8_t[]>(size);
      if (size) std::memcpy(bytes.get(), data, size);
      const Message m = Message::decode(std::move(bytes), size, 1 << 20);
      // A decoded message's accessors must stay inside its bytes: every float is read into
      // a volatile sink, a load the optimiser may not drop before ASan sees it.
      volatile float sink = 0;
      const float* f = m.floats();
      for (std::size_t i = 0, n = m.floatCount(); i < n; ++i) sink = f[i];
      (void)sink;
    } else if (which == 1) {
      std::vector<float> a(4), b(64);
      std::uint8_t c[3];
      const std::string bytes(reinterpret_cast<const char*>(data), size);
      parseStateFile(bytes, "fuzz", {{"a", a.data(), 16}, {"params/b", b.data(), 256}, {"c", c, 3}});
    } else {
      const std::string text(reinterpret_cast<const char*>(data), size);
      const CheckpointInfo info = Checkpointer::parseManifest(text, "fuzz");
      (void)info.files.size();
    }
  } catch (const Error&) {
    // Refused with a clear error: what must happen to bad bytes.
  }
  return 0;
}
