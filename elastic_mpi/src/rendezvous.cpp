// The rendezvous through MPI's name service, and the two uses of it: the base job's node groups
// into one world, and a separately launched group joining a running world. docs/runtime.md
// describes the protocol; section 6 of docs/interfaces.md the join record.
#include "rendezvous.h"

#include <array>
#include <optional>
#include <sstream>
#include <chrono>
#include <thread>

#include "accept_release.h"
#include "check.h"
#include "elastic/common/log.h"
#include "elastic_mpi/join.h"
#include "watchdog.h"

namespace elastic::mpi {

namespace {

constexpr std::string_view kComponent = "elastic_mpi";

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

class NameServiceRendezvous final : public Rendezvous {
 public:
  NameServiceRendezvous(double connect_timeout_s, std::string uri_file)
      : connect_timeout_s_(connect_timeout_s), uri_file_(std::move(uri_file)) {}

  Status Accept(MPI_Comm world, const std::string& service, std::uint32_t group, const std::string& token,
                MPI_Comm* inter, bool* accepted, std::string* refusal) override {
    *accepted = false;
    refusal->clear();
    int rank = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world, &rank));
    std::array<char, MPI_MAX_PORT_NAME> port{};
    if (rank == 0) {
      ELASTIC_MPI_CHECK(MPI_Open_port(MPI_INFO_NULL, port.data()));
      ELASTIC_MPI_CHECK(MPI_Publish_name(service.c_str(), MPI_INFO_NULL, port.data()));
      Log(LogLevel::kInfo, kComponent, "accepting group ", group, " on service ", service);
    }
    // Rank 0 releases an accept no joiner reaches in time (the joiner died before its connect,
    // its extension job was cancelled); the release ends with the disconnect below, so it lives
    // for the whole function.
    std::optional<detail::AcceptRelease> release;
    if (rank == 0) release.emplace(port.data(), group, uri_file_, connect_timeout_s_);
    {
      detail::Watchdog watchdog("MPI_Comm_accept on " + service + " (not released)", 2 * connect_timeout_s_);
      ELASTIC_MPI_CHECK(MPI_Comm_accept(port.data(), MPI_INFO_NULL, 0, world, inter));
    }
    if (rank == 0) {
      MPI_Unpublish_name(service.c_str(), MPI_INFO_NULL, port.data());
      MPI_Close_port(port.data());
    }
    int verdict = 0;
    if (rank == 0) {
      JoinRecord received{};
      MPI_Request request = MPI_REQUEST_NULL;
      ELASTIC_MPI_CHECK(MPI_Irecv(received.data(), 64, MPI_BYTE, 0, kTagJoinRecord, *inter, &request));
      int done = 0;
      const auto deadline = Clock::now() + std::chrono::duration<double>(connect_timeout_s_);
      while (!done && Clock::now() < deadline) {
        ELASTIC_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!done) {
        MPI_Cancel(&request);
        MPI_Request_free(&request);
        Log(LogLevel::kError, kComponent, "group ", group, " sent no join record within ", connect_timeout_s_, " s");
      } else if (IsReleaseRecord(received) && release->fired()) {
        verdict = 2;  // our own stand-in: nobody else can send it, it holds no token
      } else {
        auto expected = EncodeJoinRecord(group, token);
        verdict = expected.ok() && RecordsEqual(expected.value(), received) ? 1 : 0;
      }
      const int answer = verdict == 1 ? 1 : 0;
      ELASTIC_MPI_CHECK(MPI_Send(&answer, 1, MPI_INT, 0, kTagJoinVerdict, *inter));
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(&verdict, 1, MPI_INT, 0, world));
    if (verdict == 2) {
      std::ostringstream why;
      why << "abandoned: no joiner connected within " << connect_timeout_s_ << " s";
      *refusal = why.str();
      if (rank == 0) {
        Log(LogLevel::kError, kComponent, "join of group ", group, " ", *refusal,
            " (ELASTIC_CONNECT_TIMEOUT_S); the accept was released and the world keeps its size");
      }
      detail::Watchdog watchdog("disconnect of the accept's release", connect_timeout_s_);
      ELASTIC_MPI_CHECK(MPI_Comm_disconnect(inter));
      return Status::Ok();
    }
    if (verdict == 0) {
      *refusal = "bad-token";
      Log(LogLevel::kError, kComponent, "group ", group, " refused: bad-token; disconnecting");
      detail::Watchdog watchdog("disconnect of refused group " + std::to_string(group), connect_timeout_s_);
      ELASTIC_MPI_CHECK(MPI_Comm_disconnect(inter));
      return Status::Ok();
    }
    *accepted = true;
    return Status::Ok();
  }

  Status Connect(MPI_Comm world, const std::string& service, std::uint32_t group, const std::string& token,
                 MPI_Comm* inter) override {
    int rank = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world, &rank));
    std::array<char, MPI_MAX_PORT_NAME> port{};
    int found = 0;
    if (rank == 0) {
      // The running world publishes the port only when it expects us: poll for it. The poll
      // period adds to the parent's pause (it waits in accept), so it is short.
      Log(LogLevel::kVerbose, kComponent, "group ", group, " is up: waiting for ", service);
      const auto deadline = Clock::now() + std::chrono::duration<double>(connect_timeout_s_);
      while (Clock::now() < deadline) {
        if (MPI_Lookup_name(service.c_str(), MPI_INFO_NULL, port.data()) == MPI_SUCCESS) {
          found = 1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      Log(LogLevel::kInfo, kComponent, found ? "found " : "did not find ", service);
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(&found, 1, MPI_INT, 0, world));
    if (!found) {
      return Status(ErrorKind::kTimeout, "no running world published " + service + " within " +
                                             std::to_string(connect_timeout_s_) + " s");
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(port.data(), MPI_MAX_PORT_NAME, MPI_CHAR, 0, world));
    {
      detail::Watchdog watchdog("MPI_Comm_connect to " + service, connect_timeout_s_);
      ELASTIC_MPI_CHECK(MPI_Comm_connect(port.data(), MPI_INFO_NULL, 0, world, inter));
    }
    int verdict = 0;
    if (rank == 0) {
      JoinRecord record{};
      if (auto r = EncodeJoinRecord(group, token); r.ok()) record = r.value();
      ELASTIC_MPI_CHECK(MPI_Send(record.data(), 64, MPI_BYTE, 0, kTagJoinRecord, *inter));
      detail::Watchdog watchdog("join verdict from " + service, connect_timeout_s_);
      ELASTIC_MPI_CHECK(MPI_Recv(&verdict, 1, MPI_INT, 0, kTagJoinVerdict, *inter, MPI_STATUS_IGNORE));
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(&verdict, 1, MPI_INT, 0, world));
    if (verdict == 0) {
      MPI_Comm_disconnect(inter);
      return Status(ErrorKind::kPermission, "join of group " + std::to_string(group) + " through " + service +
                                                " refused by the running world (bad-token)");
    }
    return Status::Ok();
  }

 private:
  double connect_timeout_s_;
  std::string uri_file_;
};

// Replaces *world by merged, freeing the old one.
Status Adopt(MPI_Comm* world, MPI_Comm merged) {
  if (*world != MPI_COMM_NULL) ELASTIC_MPI_CHECK(MPI_Comm_free(world));
  *world = merged;
  return Status::Ok();
}

}  // namespace

std::unique_ptr<Rendezvous> MakeNameServiceRendezvous(double connect_timeout_s, std::string uri_file) {
  return std::make_unique<NameServiceRendezvous>(connect_timeout_s, std::move(uri_file));
}

std::string NodeGroupService(std::string_view job_id, int node_group) {
  return JoinServiceName(job_id, 0) + "." + std::to_string(node_group);
}

Status MergeNodeGroups(Rendezvous& rendezvous, std::string_view job_id, int node_group, int node_groups,
                       const std::string& token, MPI_Comm* world, std::vector<NodeGroupLink>* links,
                       std::vector<int>* present) {
  const int me = node_group;
  const int n = node_groups;
  auto t = Clock::now();
  if (me > 0) {
    MPI_Comm inter = MPI_COMM_NULL;
    const std::string service = NodeGroupService(job_id, me);
    if (Status st = rendezvous.Connect(*world, service, 0, token, &inter); !st.ok()) return st;
    MPI_Comm merged = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 1, &merged));
    links->push_back({me, inter});
    if (Status st = Adopt(world, merged); !st.ok()) return st;
  }
  for (int i = me + 1; i < n; ++i) {
    MPI_Comm inter = MPI_COMM_NULL;
    bool accepted = false;
    std::string refusal;
    if (Status st = rendezvous.Accept(*world, NodeGroupService(job_id, i), 0, token, &inter, &accepted, &refusal);
        !st.ok()) {
      return st;
    }
    if (!accepted) {
      // A node group of the job's own nodes with another token: misconfiguration, not an attack
      // we can tell apart. The world goes on without it; its launcher reports the refusal.
      Log(LogLevel::kError, kComponent, "node group ", i, " refused (", refusal, "): the job runs without it");
      continue;
    }
    MPI_Comm merged = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));
    links->push_back({i, inter});
    if (Status st = Adopt(world, merged); !st.ok()) return st;
  }
  // The node groups present, in world rank order.
  int rank = 0;
  int size = 0;
  ELASTIC_MPI_CHECK(MPI_Comm_rank(*world, &rank));
  ELASTIC_MPI_CHECK(MPI_Comm_size(*world, &size));
  std::vector<int> all(static_cast<std::size_t>(size), 0);
  ELASTIC_MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, all.data(), 1, MPI_INT, *world));
  present->clear();
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (r == 0 || all[r] != all[r - 1]) present->push_back(all[r]);
  }
  if (rank == 0) {
    Log(LogLevel::kInfo, kComponent, "initial world of ", size, " ranks from ", present->size(), " node groups in ",
        Seconds(t), " s");
  }
  return Status::Ok();
}

Status SeparateNodeGroups(int node_group, const std::vector<int>& present, MPI_Comm* world,
                          std::vector<NodeGroupLink>* links) {
  // Ranks of later node groups have parted already; node group present[0] never leaves.
  for (std::size_t i = present.size(); i-- > 1;) {
    const int leaving = present[i];
    if (node_group > leaving) continue;
    int rank = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(*world, &rank));
    MPI_Comm rest = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Comm_split(*world, node_group == leaving ? 0 : 1, rank, &rest));
    ELASTIC_MPI_CHECK(MPI_Comm_free(world));
    *world = rest;
    for (NodeGroupLink& link : *links) {
      if (link.node_group == leaving && link.inter != MPI_COMM_NULL) ELASTIC_MPI_CHECK(MPI_Comm_disconnect(&link.inter));
    }
    if (node_group == leaving) break;
  }
  return Status::Ok();
}

}  // namespace elastic::mpi
