// mpirun -np P session_smoke [--scheme ps|allreduce] [--iterations N] [--timeline 1] [--leave 1]
// The whole session over real MPI processes without LibTorch (so it builds under every
// sanitizer): the toy model of tests/support trained by every rank, ending equal to the
// single-process reference. The sanitizer step of CI runs it with two ranks. --timeline 1
// records the timeline (spans from the pool threads, the bytes per iteration the compute
// thread reads) and writes its trace events while the last syncs may still record.
// --leave 1 first runs a session that rank 1 leaves (Session::abandon, as the Python
// adapter does when the user's loop raises): rank 0's next iteration must fail at once
// with rank 1's reason, and both transports must end with nothing left in flight.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "poseidon/errors.h"
#include "poseidon/runtime.h"
#include "poseidon/session.h"
#include "comm/transport.h"
#include "poseidon/timeline.h"
#include "toy_training.h"

namespace {

// The largest |got - want| / (1 + |want|) over every parameter.
double worstError(const poseidon::toy::Replica& r, const std::vector<std::vector<std::vector<float>>>& want) {
  double worst = 0;
  for (std::size_t l = 0; l < want.size(); ++l) {
    for (std::size_t t = 0; t < want[l].size(); ++t) {
      for (std::size_t i = 0; i < want[l][t].size(); ++i) {
        const double w = want[l][t][i];
        const double e = std::fabs(r.params[l][t][i] - w) / (1 + std::fabs(w));
        if (!(e <= worst)) worst = e;  // a NaN is the worst of all
      }
    }
  }
  return worst;
}

// The --leave run; throws what went wrong.
void leaveFirst(poseidon::Runtime& runtime, const poseidon::ModelInfo& model, const poseidon::Options& o) {
  using namespace poseidon;
  auto transport = runtime.newTransport();
  toy::Replica r = toy::makeReplica(model, runtime.rank());
  std::string error = "no error";
  const auto start = std::chrono::steady_clock::now();
  {
    Session session(*transport, model, r.pointers(), o);
    if (runtime.rank() == 1) {
      toy::train(session, r, runtime.rank(), 2);
      session.abandon("injected leave");
    } else {
      try {  // rank 1 may leave while this rank is still in its second iteration
        toy::train(session, r, runtime.rank(), 5);
        session.finish();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
  }
  transport->stop();  // the leaver waits here for its peers' answers
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (runtime.rank() != 1 && error.find("rank 1 left the job: injected leave") == std::string::npos)
    throw Error("rank 1 left, but rank " + std::to_string(runtime.rank()) + " saw: " + error);
  if (seconds > 5)  // the stop deadline is 10 s and --timeout 60 s: neither may be what ended it
    throw Error("the session rank 1 left took " + std::to_string(seconds) + " s to end");
  if (!transport->drained()) throw Error("sends were left in flight after rank 1 left");
  std::printf("rank %d: rank 1 left the first session; it ended in %.2f s (%s)\n", runtime.rank(), seconds,
              runtime.rank() == 1 ? "the leaver" : error.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace poseidon;
  Runtime runtime(&argc, &argv);
  try {
    Options o;
    int iterations = 8;
    bool leave = false;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      if (flag == "--scheme")
        o.scheme = argv[i + 1];
      else if (flag == "--iterations")
        iterations = std::atoi(argv[i + 1]);
      else if (flag == "--timeline")
        o.timeline = std::string(argv[i + 1]) == "1";
      else if (flag == "--leave")
        leave = std::string(argv[i + 1]) == "1";
      else
        throw InputError("unknown flag " + flag);
    }
    o.lr = 0.05f;
    o.momentum = 0.9f;
    o.weight_decay = 0.01f;
    o.kv_pair_bytes = 512;  // every layer cut into several pairs, spread over the shards
    o.timeout = std::chrono::seconds(60);
    const ModelInfo model = toy::model();
    if (leave) leaveFirst(runtime, model, o);
    toy::Replica r = toy::makeReplica(model, runtime.rank());
    double error = 0;
    {
      Session session(runtime.transport(), model, r.pointers(), o);
      toy::train(session, r, runtime.rank(), iterations);
      if (Timeline* timeline = session.timeline()) {
        const std::string events = timeline->events();
        if (events.empty()) throw Error("the timeline recorded nothing");
        std::printf("rank %d: timeline of %zu bytes, %zu kinds of span\n", runtime.rank(), events.size(),
                    timeline->durationsMs().size());
      }
      session.finish();
      error = worstError(r, toy::reference(model, runtime.size(), o, iterations));
    }
    const bool ok = error < 1e-5;
    std::printf("rank %d: scheme %s, %d iterations: worst relative error vs the reference %.3g: %s\n", runtime.rank(),
                o.scheme.c_str(), iterations, error, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "session_smoke: error: %s\n", e.what());
    // The session and the replica are gone: linger a moment before ending the job, so
    // that a thread still touching their memory shows under the sanitizers.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    runtime.abortJob(2);
  }
}
