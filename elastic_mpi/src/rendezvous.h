// The rendezvous (internal header): how a running world and a group that wants in find each
// other and check each other before they merge, kept apart from what the session does with the
// merged world (as gloo keeps its rendezvous Store apart from its algorithms).
//
// A Rendezvous pairs one accepting world with one connecting world under a service name and
// authenticates the pair with the join record of docs/interfaces.md section 6. On top of it:
// the base job's node groups merged into one world at start-up, and a separately launched group
// joining a running world. What a newcomer then receives (meta and state) is the session's hand-
// over, not part of the rendezvous.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::mpi {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Collective over world (the running side): offers `service`, accepts one connection and
  // checks the joiner's record against (group, token) on world's rank 0. On a refusal the
  // inter-communicator is already disconnected, *accepted is false and *refusal says why
  // ("bad-token", or "abandoned: ..." when no joiner connected within the connect timeout and
  // the accept was released); the Status is ok.
  virtual Status Accept(MPI_Comm world, const std::string& service, std::uint32_t group, const std::string& token,
                        MPI_Comm* inter, bool* accepted, std::string* refusal) = 0;

  // Collective over world (the joining side): finds `service` (waiting up to the connect
  // timeout), connects, sends the join record of (group, token) and waits for the verdict.
  // kTimeout: nobody offered the service; kPermission: refused (bad token).
  virtual Status Connect(MPI_Comm world, const std::string& service, std::uint32_t group, const std::string& token,
                         MPI_Comm* inter) = 0;
};

// The rendezvous through MPI's name service (ompi-server): ports opened and published under
// the service name, looked up by the joiner; connect_timeout_s bounds every wait (the lookup and
// the join record are polled against it; watchdogs on connect and disconnect). An accept that no
// joiner reaches within it is released by a stand-in (accept_release.h) that connects through
// the job's rendezvous, uri_file; a watchdog at twice the timeout is the last resort.
std::unique_ptr<Rendezvous> MakeNameServiceRendezvous(double connect_timeout_s, std::string uri_file);

// The service under which node group `node_group` of the base job joins: elastic.<job>.0.<i>.
std::string NodeGroupService(std::string_view job_id, int node_group);

// The inter-communicator through which node group `node_group` joined the node groups before it:
// held by the ranks of all of them (node group `node_group` on one side, the earlier ones on the
// other).
struct NodeGroupLink {
  int node_group = 0;
  MPI_Comm inter = MPI_COMM_NULL;
};

// Collective over the node group's own world `*world` at start-up: forms the base job's initial
// world from its node groups. Node group i > 0 connects to the world of node groups 0..i-1 and
// merges behind it; then every merged world accepts the next node group, in order. All
// authenticate with the job's initial token and group id 0; a node group refused (another
// token) is left out with an error logged. *world is replaced by the merged world (the old one
// freed); *links receives the inter-communicators this rank holds (kept until the node groups
// part at the end of the job: SeparateNodeGroups), *present the node groups of the world in
// world rank order.
Status MergeNodeGroups(Rendezvous& rendezvous, std::string_view job_id, int node_group, int node_groups,
                       const std::string& token, MPI_Comm* world, std::vector<NodeGroupLink>* links,
                       std::vector<int>* present);

// Collective over the base job's world `*world` at the end of the job (after the joined groups
// left): the node groups part, the last first. Each in turn splits off from the world, then the
// link through which it joined is disconnected by the ranks that hold it, and it goes on alone:
// every node group ends up alone in *world (its own ranks), with no link to another, so that it
// finalizes without a peer closing connections under it. `present` as MergeNodeGroups gave it.
Status SeparateNodeGroups(int node_group, const std::vector<int>& present, MPI_Comm* world,
                          std::vector<NodeGroupLink>* links);

}  // namespace elastic::mpi
