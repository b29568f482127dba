// A checkpoint's MANIFEST (text, with its own CRC line).
#include "checkpoint/checkpointer.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return poseidon::fuzz::parseOrRefuse([&] {
    const std::string text = poseidon::fuzz::text(data, size);
    const poseidon::CheckpointInfo info = poseidon::Checkpointer::parseManifest(text, "fuzz");
    (void)info.files.size();
  });
}
