#include "runtime/parallel/link_probe.h"

#include <chrono>
#include <set>

#include "runtime/core/error.h"

namespace dlscale {

namespace {
// Apart from communicator.cpp's tensor-sum tags (1 and 2: FixedOrderAllreduce
// uses tag and tag + 1), though the two are never in flight together.
constexpr int kLinkProbeTag = 100;
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

std::vector<LinkTimes> probe_links(Communicator& comm, const std::vector<std::string>& hosts, std::size_t bytes) {
  DLSCALE_REQUIRE(static_cast<int>(hosts.size()) == comm.size(), "probe_links needs one host per rank");
  // The first rank of each host other than rank 0's: the same list on every rank.
  std::vector<int> probed;
  std::set<std::string> seen{hosts[0]};
  for (int r = 1; r < comm.size(); ++r)
    if (seen.insert(hosts[r]).second) probed.push_back(r);
  if (probed.empty()) return {};
  WatchedWait wait(comm.watchdog(), "a link probe", 0, nullptr, static_cast<std::int64_t>(bytes));
  const MPI_Comm c = comm.get();
  const int count = static_cast<int>(bytes);
  std::vector<char> buffer(bytes);
  char one = 0;
  std::vector<LinkTimes> out;
  double my_upload = 0;
  for (int p : probed) {
    if (comm.rank() == 0) {
      LinkTimes t{p, hosts[p], 0, 0};
      DLSCALE_CHECK_MPI(MPI_Send(&one, 1, MPI_CHAR, p, kLinkProbeTag, c));
      DLSCALE_CHECK_MPI(MPI_Recv(buffer.data(), count, MPI_CHAR, p, kLinkProbeTag, c, MPI_STATUS_IGNORE));
      DLSCALE_CHECK_MPI(MPI_Send(&one, 1, MPI_CHAR, p, kLinkProbeTag, c));
      const double t0 = now_s();
      DLSCALE_CHECK_MPI(MPI_Send(buffer.data(), count, MPI_CHAR, p, kLinkProbeTag, c));
      DLSCALE_CHECK_MPI(MPI_Recv(&one, 1, MPI_CHAR, p, kLinkProbeTag, c, MPI_STATUS_IGNORE));
      t.download_s = now_s() - t0;
      out.push_back(t);
    } else if (comm.rank() == p) {
      DLSCALE_CHECK_MPI(MPI_Recv(&one, 1, MPI_CHAR, 0, kLinkProbeTag, c, MPI_STATUS_IGNORE));
      const double t0 = now_s();
      DLSCALE_CHECK_MPI(MPI_Send(buffer.data(), count, MPI_CHAR, 0, kLinkProbeTag, c));
      DLSCALE_CHECK_MPI(MPI_Recv(&one, 1, MPI_CHAR, 0, kLinkProbeTag, c, MPI_STATUS_IGNORE));
      my_upload = now_s() - t0;
      DLSCALE_CHECK_MPI(MPI_Recv(buffer.data(), count, MPI_CHAR, 0, kLinkProbeTag, c, MPI_STATUS_IGNORE));
      DLSCALE_CHECK_MPI(MPI_Send(&one, 1, MPI_CHAR, 0, kLinkProbeTag, c));
    }
  }
  // The uploads were timed on the probed ranks.
  std::vector<double> uploads(comm.size(), 0);
  DLSCALE_CHECK_MPI(MPI_Gather(&my_upload, 1, MPI_DOUBLE, uploads.data(), 1, MPI_DOUBLE, 0, c));
  for (auto& t : out) t.upload_s = uploads[t.rank];
  // Every rank leaves together: a rank that left early would wait for rank 0
  // in its next step's all-reduce, and the probe would read as that step's wait.
  DLSCALE_CHECK_MPI(MPI_Barrier(c));
  return out;
}

}  // namespace dlscale
