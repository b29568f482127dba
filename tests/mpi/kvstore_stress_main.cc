// mpirun -np P kvstore_stress --kvstore funnel|concurrent|chained [--iterations N] [--wire fp32|bf16]
//                             [--error-feedback 1]
// Real processes, real MPI collectives: every rank makes its gradients ready in its own
// random order; the job must neither deadlock nor sum wrongly.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/mpi_transport.h"
#include "comm/transport.h"
#include "kvstore_stress.h"
#include "poseidon/errors.h"
#include "poseidon/runtime.h"

int main(int argc, char** argv) {
  using namespace poseidon;
  Runtime runtime(&argc, &argv);
  KVStoreOptions o;
  int iterations = 200;
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      if (flag == "--kvstore")
        o.type = parseKVStoreType(argv[i + 1]);
      else if (flag == "--iterations")
        iterations = std::atoi(argv[i + 1]);
      else if (flag == "--wire")  // bf16: the 16-bit allreduce, checked value by value
        o.wire = parseWireFormat(argv[i + 1]);
      else if (flag == "--error-feedback")  // with bf16: the residuals carried, checked alike
        o.error_feedback = std::string(argv[i + 1]) == "1";
      else if (flag == "--comms")
        o.communicators = o.outstanding = std::atoi(argv[i + 1]);
      else
        throw InputError("unknown flag " + flag);
    }
    if (o.wire == WireFormat::kFp16) throw InputError("--wire fp16: its scale is a slice's, which the check does not model");
    o.timeout = std::chrono::seconds(60);
    Transport& transport = runtime.transport();
    // The message transport's progress thread runs beside the collectives, as in training.
    transport.start(TransportCallbacks{[](Message) {}, [](std::exception_ptr) {}});
    const StressResult r = runKVStoreStress(transport, o, iterations, 11);
    // Every collective's requests go through the progress thread (mpi_request_poller.h).
    const auto* mpi = dynamic_cast<const MpiTransport*>(&transport);
    const long long polled = mpi != nullptr ? static_cast<long long>(mpi->awaitedCompleted()) : -1;
    std::printf("rank %d: %s: %lld collectives in %.2f s, %lld wrong values, %lld requests completed by the progress thread\n",
                transport.rank(), kvstoreTypeName(o.type), static_cast<long long>(r.collectives), r.seconds,
                static_cast<long long>(r.wrong_values), polled);
    if (transport.size() > 1 && r.collectives > 0 && polled <= 0) {
      std::fprintf(stderr, "rank %d: no collective's request was completed by the progress thread\n", transport.rank());
      return 1;
    }
    return r.wrong_values == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvstore_stress: error: %s\n", e.what());
    runtime.abortJob(2);
  }
}
