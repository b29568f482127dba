// Link use of the fp32 allreduce's patterns over Open MPI's TCP transport (issue 64): the
// ring Poseidon sums by (MpiCommunicator::allreduceSum: each connection carries bulk one
// way) against the owners' all-to-all it summed by before (MPI_Ialltoallv of the slices to
// their owners, rank-order sums, MPI_Iallgatherv: every connection carries bulk both ways)
// and Open MPI's own MPI_Allreduce, side by side in one run: rounds alternate, medians,
// MB/s per rank as 2 (P-1)/P of the buffer over the seconds. Run it in the lab, e.g.
//
//   sudo build/apps/poseidon lab --ranks 4 --bandwidth 100mbit -- build/bench/allreduce_patterns [--floats N] [--rounds R]
//
// bench/micro/gloo_allreduce.py is the same figure for gloo's ring (PyTorch DDP's).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "allreduce/mpi_communicator.h"
#include "allreduce/sum16.h"
#include "timing.h"

namespace poseidon {
namespace {

using bench::median;
using bench::seconds;

// The owners' all-to-all, as MpiCommunicator::allreduceSum was until the ring.
void ownersAllToAll(const float* send, float* recv, std::size_t count, int rank, int P) {
  const sum16::Slices slices(count, P);
  std::vector<int> counts(P), displs(P), send_counts(P), recv_counts(P), recv_displs(P);
  const int own = static_cast<int>(slices.length(rank));
  for (int s = 0, at = 0; s < P; ++s) {
    counts[s] = static_cast<int>(slices.length(s));
    displs[s] = static_cast<int>(slices.begin(s));
    send_counts[s] = s == rank ? 0 : counts[s];
    recv_counts[s] = s == rank ? 0 : own;
    recv_displs[s] = at;
    at += recv_counts[s];
  }
  std::vector<float> gathered(static_cast<std::size_t>(own) * (P - 1) + 1);
  MPI_Alltoallv(send, send_counts.data(), displs.data(), MPI_FLOAT, gathered.data(), recv_counts.data(),
                recv_displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
  float* out = recv + slices.begin(rank);
  std::memcpy(out, send + slices.begin(rank), own * sizeof(float));
  for (int r = 0; r < P; ++r) {
    if (r == rank) continue;
    const float* from = gathered.data() + recv_displs[r];
    for (int i = 0; i < own; ++i) out[i] += from[i];
  }
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
}

int run(int argc, char** argv) {
  std::size_t floats = 4u << 20;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--floats") floats = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  FailureState failure;
  MpiCommunicator ring(MPI_COMM_WORLD, std::chrono::minutes(5), failure);
  std::vector<float> send(floats), recv(floats);
  for (std::size_t i = 0; i < floats; ++i) send[i] = static_cast<float>(i % 97) * 0.01f + static_cast<float>(rank);
  struct Pattern {
    const char* name;
    std::function<void()> call;
  };
  const std::vector<Pattern> patterns = {
      {"owners' all-to-all", [&] { ownersAllToAll(send.data(), recv.data(), floats, rank, P); }},
      {"ring (Poseidon)", [&] { ring.allreduceSum(send.data(), recv.data(), floats); }},
      {"MPI_Allreduce", [&] { MPI_Allreduce(send.data(), recv.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
  };
  std::vector<std::vector<double>> times(patterns.size());
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t p = 0; p < patterns.size(); ++p) {
      MPI_Barrier(MPI_COMM_WORLD);
      times[p].push_back(seconds([&] {
        patterns[p].call();
        MPI_Barrier(MPI_COMM_WORLD);
      }));
    }
  }
  if (rank == 0) {
    const double bytes = 2.0 * (P - 1) / P * static_cast<double>(floats) * sizeof(float);
    std::printf("%d ranks, %zu floats, %d rounds (medians)\n", P, floats, rounds);
    for (std::size_t p = 0; p < patterns.size(); ++p) {
      const double s = median(times[p]);
      std::printf("%-20s %7.3f s  %6.2f MB/s per rank\n", patterns[p].name, s, bytes / s / 1e6);
    }
  }
  return 0;
}

}  // namespace
}  // namespace poseidon

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = poseidon::run(argc, argv);
  MPI_Finalize();
  return rc;
}
