#include "controller_link.h"

#include <cstdlib>

#include "elastic/common/log.h"

namespace elastic::mpi {
namespace {
constexpr std::string_view kComponent = "controller";
constexpr auto kBackoff = std::chrono::seconds(3);
}  // namespace

Result<std::unique_ptr<ControllerLink>> ControllerLink::Create(const std::string& address, const std::string& job,
                                                               const std::string& munge_socket) {
  auto hp = config::ParseHostPort(address, "ELASTIC_CONTROLLER");
  if (!hp.ok()) return Status(ErrorKind::kConfig, hp.status().message());
  auto id = config::ParseInt(job, 1, 0xfffffff0, "ELASTIC_JOB_ID");
  if (!id.ok()) return Status(ErrorKind::kConfig, id.status().message());
  return std::unique_ptr<ControllerLink>(
      new ControllerLink(hp.value(), static_cast<uint32_t>(id.value()), munge_socket));
}

Result<nlohmann::json> ControllerLink::Call(nlohmann::json request, std::chrono::milliseconds timeout) {
  auto now = std::chrono::steady_clock::now();
  if (now < retry_after_) return Status(ErrorKind::kUnavailable, "controller unreachable (backing off)");
  if (!request.contains("job")) request["job"] = job_;
  if (!client_) {
    wire::ClientOptions opts;
    opts.munge_socket = munge_socket_;
    opts.connect_timeout = std::chrono::milliseconds(1000);
    auto c = wire::Client::Connect(address_, opts);
    if (!c.ok()) {
      retry_after_ = now + kBackoff;
      if (!warned_) {
        Log(LogLevel::kWarning, kComponent, c.status().message(), "; training goes on at its size");
        warned_ = true;
      }
      return c.status();
    }
    client_ = std::move(c).value();
  }
  auto reply = client_->Call(std::move(request), timeout);
  if (!reply.ok()) {
    client_.reset();  // the connection's state is unknown after an error
    retry_after_ = now + std::chrono::seconds(1);
    Log(LogLevel::kVerbose, kComponent, "request failed: ", reply.status().message());
    return reply.status();
  }
  Status s = wire::ReplyStatus(reply.value());
  if (!s.ok() && reply.value().value("id", int64_t{-1}) == 0) {
    // Refused before elasticd read the request (over one of its connection limits): it closed
    // the connection. Like an unreachable controller: back off, warn once.
    client_.reset();
    retry_after_ = now + kBackoff;
    if (!warned_) {
      Log(LogLevel::kWarning, kComponent, "elasticd refused the connection: ", s.message(), "; training goes on at its size");
      warned_ = true;
    }
    return s;
  }
  warned_ = false;
  if (!s.ok()) {
    Log(LogLevel::kWarning, kComponent, "elasticd refused ", reply.value().value("type", "a request"), ": ",
        s.message());
    return s;
  }
  return reply;
}

std::vector<nlohmann::json> ControllerLink::Poll() {
  auto r = Call({{"type", "poll"}, {"wait_ms", 0}});
  std::vector<nlohmann::json> out;
  if (!r.ok()) return out;
  const auto& cmds = r.value().value("commands", nlohmann::json::array());
  if (!cmds.is_array()) return out;
  for (const auto& c : cmds) {
    if (c.is_object() && c.contains("command") && c["command"].is_number_integer()) out.push_back(c);
  }
  return out;
}

}  // namespace elastic::mpi
