// A model file (`--model-file`): `input C H W`, `classes N`, `conv OUT K [stride=S]
// [pad=P]`, `pool K`, `relu`, `flatten`, `dropout P`, `fc OUT`, `lr X`, '#' comments.
#include "fuzz_target.h"
#include "models/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return poseidon::fuzz::parseOrRefuse([&] {
    const poseidon::ModelSpec spec = poseidon::parseModelText(poseidon::fuzz::text(data, size), "fuzz", "fuzz");
    // A spec that parses must be usable: the coordinator's first use of it is the size of
    // every tensor, which must not overflow.
    (void)poseidon::modelInfoFromSpec(spec).numel();
  });
}
