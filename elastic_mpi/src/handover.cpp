// What a newcomer receives from the world it joins: the meta (step, batch, groups, noise
// statistics, the manifest of the registered buffers) right after the merge, then the buffers
// themselves in Begin(), once the program has registered its own. Parents' rank 0 is the root.
#include "check.h"
#include "host_collectives.h"
#include "memory_space.h"
#include "session_impl.h"

namespace elastic::mpi {

namespace {

using detail::HostBroadcast;

// A registered buffer over the inter-communicator; a device buffer through a host copy.
Status BcastBuffer(Buffer& b, int root, MPI_Comm comm, bool receiving) {
  auto view = detail::HostView::Of(b.data, b.bytes, b.space, /*fill=*/!receiving);
  if (!view.ok()) return view.status();
  if (Status s = HostBroadcast(view.value().data(), b.bytes, root, comm); !s.ok()) return s;
  return receiving ? view.value().WriteBack() : Status::Ok();
}

// Broadcast of a string: length, then bytes.
Status BcastString(std::string* s, int root, MPI_Comm comm, bool receiving) {
  std::uint64_t len = receiving ? 0 : s->size();
  ELASTIC_MPI_CHECK(MPI_Bcast(&len, 1, MPI_UINT64_T, root, comm));
  if (receiving) s->resize(len);
  return HostBroadcast(s->data(), len, root, comm);
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

// Applies the meta on a newcomer, with its own group appended (its inter is `inter`).
Status Session::Impl::ApplyMeta(const std::string& text, MPI_Comm inter) {
  try {
    const auto j = nlohmann::json::parse(text);
    step = j.at("step").get<std::uint64_t>();
    samples = j.at("samples").get<std::uint64_t>();
    global_batch = j.at("global_batch").get<std::uint64_t>();
    base_batch = j.at("base_batch").get<std::uint64_t>();
    next_group_id = j.at("next_group_id").get<std::uint32_t>();
    group_id = j.at("new_group").get<std::uint32_t>();
    const auto& n = j.at("noise");
    noise.Restore({n.at(0).get<double>(), n.at(1).get<double>(), n.at(2).get<double>()});
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

// State hand-over over the inter-communicator: parents' rank 0 is the root.
Status Session::Impl::SendState(MPI_Comm inter, std::uint32_t new_group) {
  const int root = rank == 0 ? MPI_ROOT : MPI_PROC_NULL;
  std::string meta = MetaJson(new_group);
  if (Status s = BcastString(&meta, root, inter, false); !s.ok()) return s;
  for (Buffer& b : buffers) {
    if (Status s = BcastBuffer(b, root, inter, false); !s.ok()) return s;
  }
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
  for (Buffer& b : buffers) {
    if (Status s = BcastBuffer(b, 0, inter, true); !s.ok()) return s;
  }
  return Status::Ok();
}

// A newcomer after its merge: receive the meta now; the buffers come in Begin().
Status Session::Impl::AfterMerge(MPI_Comm inter, MPI_Comm merged) {
  std::string meta;
  if (Status s = BcastString(&meta, 0, inter, true); !s.ok()) return s;
  if (Status s = AdoptWorld(merged); !s.ok()) return s;
  if (Status s = ApplyMeta(meta, inter); !s.ok()) return s;
  newcomer = true;
  pending_inter = inter;
  return Status::Ok();
}

}  // namespace elastic::mpi
