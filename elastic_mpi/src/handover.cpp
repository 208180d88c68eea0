// What a newcomer receives from the world it joins: the meta (step, batch, groups, noise
// statistics, the manifest of the registered buffers) right after the merge, then the buffers
// themselves in Begin(), once the program has registered its own. Parents' rank 0 is the root.
#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "check.h"
#include "elastic/common/log.h"
#include "memory_space.h"
#include "session_impl.h"

namespace elastic::mpi {

using detail::Clock;
using Deadline = Clock::time_point;
using detail::kTagStateReceived;

namespace {

// Nonblocking broadcasts, waited for by polling: the parents' side has a deadline (a newcomer
// that died leaves the root's send pending forever), and both sides must use the same kind of
// collective. A broadcast that misses its deadline stays pending: its request goes to `left`
// with `storage` (which owns `data`), so that the memory MPI may still read or write outlives
// this call (Session::Impl::ReapLeftRequests; docs/runtime.md "Deadlines of a grow").
Status BcastBytes(void* data, std::size_t bytes, int root, MPI_Comm comm, const Deadline* deadline,
                  const std::shared_ptr<void>& storage, std::vector<detail::LeftRequest>* left) {
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes || done == 0;) {
    const std::size_t n = std::min(kChunk, bytes - done);
    MPI_Request request = MPI_REQUEST_NULL;
    ELASTIC_MPI_CHECK(MPI_Ibcast(p + done, static_cast<int>(n), MPI_BYTE, root, comm, &request));
    int finished = 0;
    while (!finished) {
      ELASTIC_MPI_CHECK(MPI_Test(&request, &finished, MPI_STATUS_IGNORE));
      if (finished) break;
      if (deadline != nullptr && Clock::now() > *deadline) {
        left->push_back({request, storage});
        return Status(ErrorKind::kTimeout, "the state hand-over did not finish in time");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    done += n;
    if (bytes == 0) break;
  }
  return Status::Ok();
}

// A registered buffer over the inter-communicator; a device buffer through a host copy.
Status BcastBuffer(Buffer& b, int root, MPI_Comm comm, bool receiving, const Deadline* deadline,
                   std::vector<detail::LeftRequest>* left) {
  auto made = detail::HostView::Of(b.data, b.bytes, b.space, /*fill=*/!receiving);
  if (!made.ok()) return made.status();
  auto view = std::make_shared<detail::HostView>(std::move(made).value());
  if (Status s = BcastBytes(view->data(), b.bytes, root, comm, deadline, view, left); !s.ok()) return s;
  return receiving ? view->WriteBack() : Status::Ok();
}

// Broadcast of a string: length, then bytes (both in storage that may outlive the call).
Status BcastString(std::string* s, int root, MPI_Comm comm, bool receiving, const Deadline* deadline,
                   std::vector<detail::LeftRequest>* left) {
  struct Wire {
    std::uint64_t len = 0;
    std::string text;
  };
  auto wire = std::make_shared<Wire>();
  if (!receiving) *wire = {s->size(), *s};
  if (Status st = BcastBytes(&wire->len, sizeof wire->len, root, comm, deadline, wire, left); !st.ok()) return st;
  if (receiving) wire->text.resize(wire->len);
  if (Status st = BcastBytes(wire->text.data(), wire->len, root, comm, deadline, wire, left); !st.ok()) return st;
  if (receiving) *s = std::move(wire->text);
  return Status::Ok();
}

// A newcomer's hand-over that missed its deadline: the parents have abandoned this grow.
Status NoState(const Status& s) {
  if (s.kind() != ErrorKind::kTimeout) return s;
  return Status(ErrorKind::kTimeout, "the running world did not hand over its state within "
                                     "ELASTIC_GROW_PHASE_TIMEOUT_S: it has abandoned this grow");
}

}  // namespace

// What a newcomer needs besides the registered buffers.
std::string Session::Impl::MetaJson(std::uint32_t new_group) const {
  nlohmann::json j;
  j["step"] = step;
  j["samples"] = samples;
  j["global_batch"] = global_batch;
  j["base_batch"] = base_batch;
  j["next_group_id"] = next_group_id;
  j["new_group"] = new_group;
  const auto m = noise.moments();
  j["noise"] = {m.sqr, m.var, m.steps};
  j["groups"] = nlohmann::json::array();
  for (const Group& g : groups) j["groups"].push_back({g.id, g.size});
  j["buffers"] = nlohmann::json::array();
  for (const Buffer& b : buffers) j["buffers"].push_back({b.name, b.bytes});
  return j.dump();
}

// The world's progress from its meta (a newcomer's, a relaunched world's); throws on a missing field.
void Session::Impl::ApplyProgress(const nlohmann::json& j) {
  step = j.at("step").get<std::uint64_t>();
  samples = j.at("samples").get<std::uint64_t>();
  global_batch = j.at("global_batch").get<std::uint64_t>();
  base_batch = j.at("base_batch").get<std::uint64_t>();
  next_group_id = j.at("next_group_id").get<std::uint32_t>();
  const auto& n = j.at("noise");
  noise.Restore({n.at(0).get<double>(), n.at(1).get<double>(), n.at(2).get<double>()});
}

// Applies the meta on a newcomer, with its own group appended (its inter is `inter`).
Status Session::Impl::ApplyMeta(const std::string& text, MPI_Comm inter) {
  try {
    const auto j = nlohmann::json::parse(text);
    ApplyProgress(j);
    group_id = j.at("new_group").get<std::uint32_t>();
    groups.clear();
    for (const auto& g : j.at("groups")) {
      groups.push_back({g.at(0).get<std::uint32_t>(), g.at(1).get<int>(), MPI_COMM_NULL});
    }
    int remote = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_remote_size(inter, &remote));
    int local = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_size(inter, &local));
    // On the newcomer's side, the inter-communicator's local group is the newcomer group.
    groups.push_back({group_id, local, inter});
    (void)remote;
    // Manifest check happens in Begin(), once the program has registered its buffers.
    pending_manifest = j.at("buffers");
  } catch (const std::exception& e) {
    return Status(ErrorKind::kProtocol, std::string("malformed session meta: ") + e.what());
  }
  return Status::Ok();
}

// State hand-over over the inter-communicator: parents' rank 0 is the root. kTimeout when the
// newcomers have not taken it by the deadline.
Status Session::Impl::SendState(MPI_Comm inter, std::uint32_t new_group, Clock::time_point deadline) {
  const int root = rank == 0 ? MPI_ROOT : MPI_PROC_NULL;
  std::string meta = MetaJson(new_group);
  if (Status s = BcastString(&meta, root, inter, false, &deadline, &left_requests); !s.ok()) return s;
  for (Buffer& b : buffers) {
    if (Status s = BcastBuffer(b, root, inter, false, &deadline, &left_requests); !s.ok()) return s;
  }
  return Status::Ok();
}

// Parents, collective over the old world: whether the newcomers' rank 0 sent `tag` (it reached
// the phase) by the deadline. The old world is intact, so every parent learns rank 0's verdict
// and a grow is abandoned or carried on by all alike.
Status Session::Impl::AwaitNewcomers(MPI_Comm inter, int tag, Clock::time_point deadline, bool* arrived) {
  int got = 0;
  if (rank == 0 && Clock::now() <= deadline) {
    int word = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    ELASTIC_MPI_CHECK(MPI_Irecv(&word, 1, MPI_INT, 0, tag, inter, &request));
    while (!got && Clock::now() <= deadline) {
      if (const int rc = MPI_Test(&request, &got, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
        // The newcomers failed (Open MPI 5 with fault tolerance reports a dead peer as
        // MPI_ERR_PROC_FAILED): the same as missing the deadline, the grow is abandoned.
        Log(LogLevel::kError, detail::kComponent, "the joining group failed while the running world waited for it: ",
            detail::MpiStatus(rc, "MPI_Test").message());
        got = 0;
        break;
      }
      if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!got && request != MPI_REQUEST_NULL) {
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  }
  ELASTIC_MPI_CHECK(MPI_Bcast(&got, 1, MPI_INT, 0, world));
  *arrived = got != 0;
  return Status::Ok();
}

// Newcomers' rank 0 (of their own group: the inter-communicator's local rank 0): tells the
// parents' rank 0 that this group reached the phase `tag`.
Status Session::Impl::TellParents(MPI_Comm inter, int tag) {
  int local = 0;
  ELASTIC_MPI_CHECK(MPI_Comm_rank(inter, &local));
  if (local != 0) return Status::Ok();
  int word = 1;
  ELASTIC_MPI_CHECK(MPI_Send(&word, 1, MPI_INT, 0, tag, inter));
  return Status::Ok();
}

// The newcomers' side of SendState, in Begin().
Status Session::Impl::ReceiveState(MPI_Comm inter) {
  // Every registered buffer must match rank 0's, in order.
  const auto& manifest = pending_manifest;
  bool match = manifest.size() == buffers.size();
  for (std::size_t i = 0; match && i < buffers.size(); ++i) {
    match = manifest[i].at(0).get<std::string>() == buffers[i].name &&
            manifest[i].at(1).get<std::size_t>() == buffers[i].bytes;
  }
  if (!match) {
    std::string mine;
    for (const Buffer& b : buffers) mine += b.name + ":" + std::to_string(b.bytes) + " ";
    return Status(ErrorKind::kInternal, "registered state differs from rank 0's: rank 0 has " +
                                            manifest.dump() + ", this rank has " + mine);
  }
  // The parents abandon a grow whose hand-over misses their deadline: a newcomer gives up too.
  const Deadline deadline = detail::After(options.grow_phase_timeout_s);
  for (Buffer& b : buffers) {
    if (Status s = BcastBuffer(b, 0, inter, true, &deadline, &left_requests); !s.ok()) return NoState(s);
  }
  TestKillAt("late-confirm", inter);
  return TellParents(inter, kTagStateReceived);
}

// A newcomer after its merge: receive the meta now; the buffers come in Begin().
Status Session::Impl::AfterMerge(MPI_Comm inter, MPI_Comm merged) {
  std::string meta;
  const Deadline deadline = detail::After(options.grow_phase_timeout_s);
  if (Status s = BcastString(&meta, 0, inter, true, &deadline, &left_requests); !s.ok()) return NoState(s);
  if (Status s = AdoptWorld(merged); !s.ok()) return s;
  if (Status s = ApplyMeta(meta, inter); !s.ok()) return s;
  newcomer = true;
  pending_inter = inter;
  return Status::Ok();
}

void Session::Impl::ReapLeftRequests(bool at_end) {
  std::erase_if(left_requests, [](detail::LeftRequest& r) {
    int finished = 0;
    return MPI_Test(&r.request, &finished, MPI_STATUS_IGNORE) != MPI_SUCCESS || finished != 0;
  });
  if (!at_end || left_requests.empty()) return;
  // MPI allows neither MPI_Cancel nor MPI_Request_free on a collective's request, and
  // MPI_Finalize may still touch it: its storage stays for the rest of the process (reachable,
  // not leaked).
  Log(LogLevel::kVerbose, detail::kComponent, left_requests.size(),
      " broadcast(s) of abandoned grows still pending at the end; their storage is kept");
  static auto* kept = new std::vector<detail::LeftRequest>;
  for (detail::LeftRequest& r : left_requests) kept->push_back(std::move(r));
  left_requests.clear();
}

}  // namespace elastic::mpi
