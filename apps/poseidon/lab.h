// The bandwidth lab (docs/design.md): one network namespace per rank, each with its own
// "NIC" (a veth into a bridge in a hub namespace) capped by tc on both ends, so that ranks
// on one machine talk over links of a chosen rate and delay. The namespaces are named
// after this process's id, so labs running at once do not collide; the object removes
// them when it goes, whatever happened.
#pragma once

#include <string>
#include <vector>

namespace poseidon::app {

class Lab {
 public:
  // Needs root. `rate_bytes_per_s` caps each rank's link in both directions; `delay_ms`
  // (0: none) is added on each side of it.
  Lab(int ranks, double rate_bytes_per_s, double delay_ms);
  ~Lab();
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  const std::string& hub() const { return hub_; }
  std::string rankNamespace(int rank) const;
  // The namespaces' names without the rank number: "<prefix><rank>".
  std::string rankPrefix() const { return prefix_ + "-r"; }
  const std::string& subnet() const { return subnet_; }  // a.b.c.0/24
  std::string address(int rank) const;                   // of the rank's NIC
  static constexpr const char* kInterface = "lab0";      // the NIC's name inside each rank

  // Bytes the rank's NIC has sent so far (its kernel counter: frames with their TCP/IP
  // headers, every message of every scheme and of MPI's own set-up). -1 if unreadable.
  long long bytesSent(int rank) const;

  // Removes every namespace this lab made (also done by the destructor).
  void tearDown();

 private:
  std::string prefix_, hub_, subnet_, base_;
  std::vector<std::string> made_;  // namespaces, in creation order
};

// Runs argv, returns its exit status (or 128 + signal). Throws Error if it cannot start.
int runCommand(const std::vector<std::string>& argv);

}  // namespace poseidon::app
