// Checkpoints: the file format, and when the session writes one at a rescale point (a command,
// SIGUSR1, checkpoint_interval_s, SIGTERM on the base group). Every rank holds the same
// registered state, so rank 0 alone writes; a restarted job reads it on every rank.
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "check.h"
#include "memory_space.h"
#include "session_impl.h"

namespace elastic::mpi {

using detail::Clock;
using detail::kComponent;

std::string Session::Impl::CheckpointDir() const {
  if (!options.checkpoint_dir.empty()) return options.checkpoint_dir;
  if (!options.run_dir.empty()) return options.run_dir + "/checkpoint";
  return "";
}

// Checkpoint file: "ELCKPT01", then per buffer: u64 name length, name, u64 bytes, bytes.
std::uint64_t Session::Impl::CheckpointBytes() const {
  std::uint64_t total = 8;
  for (const Buffer& b : buffers) total += 2 * sizeof(std::uint64_t) + b.name.size() + b.bytes;
  return total;
}

// Rank 0 alone: the file written next to `path` and renamed into place; nothing left on failure.
Status Session::Impl::WriteCheckpointFile(const std::string& path) {
  const std::string tmp = path + ".tmp";
  std::string error;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write("ELCKPT01", 8);
    for (const Buffer& b : buffers) {
      const std::uint64_t n = b.name.size();
      const std::uint64_t bytes = b.bytes;
      out.write(reinterpret_cast<const char*>(&n), sizeof n);
      out.write(b.name.data(), static_cast<std::streamsize>(n));
      out.write(reinterpret_cast<const char*>(&bytes), sizeof bytes);
      auto view = detail::HostView::Of(b.data, b.bytes, b.space, /*fill=*/true);  // device: a host copy
      if (!view.ok()) {
        error = "cannot write checkpoint " + tmp + ": state '" + b.name + "': " + view.status().message();
        break;
      }
      out.write(static_cast<const char*>(view.value().data()), static_cast<std::streamsize>(bytes));
    }
    out.flush();
    if (error.empty() && !out) {
      error = "cannot write checkpoint " + tmp + ": " + (errno != 0 ? std::strerror(errno) : "the write failed");
    }
  }
  if (error.empty() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename checkpoint to " + path + ": " + std::strerror(errno);
  }
  if (error.empty()) return Status::Ok();
  std::remove(tmp.c_str());  // a partial file would only fill the disk (or /dev/shm's memory)
  return Status(ErrorKind::kUnavailable, error);
}

Status Session::Impl::WriteCheckpoint(const std::string& path) {
  Status written = rank == 0 ? WriteCheckpointFile(path) : Status::Ok();
  int ok = written.ok() ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, world));
  if (!ok) return rank == 0 ? written : Status(ErrorKind::kUnavailable, "rank 0 failed to write the checkpoint");
  return Status::Ok();
}

Status Session::Impl::ReadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 8> magic{};
  in.read(magic.data(), 8);
  if (!in || std::memcmp(magic.data(), "ELCKPT01", 8) != 0) {
    return Status(ErrorKind::kNotFound, "no checkpoint at " + path);
  }
  for (Buffer& b : buffers) {
    std::uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), sizeof n);
    if (!in || n > 4096) return Status(ErrorKind::kProtocol, "corrupt checkpoint " + path);
    std::string name(n, '\0');
    in.read(name.data(), static_cast<std::streamsize>(n));
    std::uint64_t bytes = 0;
    in.read(reinterpret_cast<char*>(&bytes), sizeof bytes);
    if (!in || name != b.name || bytes != b.bytes) {
      return Status(ErrorKind::kInvalidArgument, "checkpoint " + path + " holds '" + name + "' (" +
                                                     std::to_string(bytes) + " bytes) where '" + b.name +
                                                     "' (" + std::to_string(b.bytes) + " bytes) is registered");
    }
    auto view = detail::HostView::Of(b.data, b.bytes, b.space, /*fill=*/false);  // device: a host copy
    if (!view.ok()) return view.status();
    in.read(static_cast<char*>(view.value().data()), static_cast<std::streamsize>(bytes));
    if (!in) return Status(ErrorKind::kProtocol, "truncated checkpoint " + path);
    if (Status s = view.value().WriteBack(); !s.ok()) return s;
  }
  return Status::Ok();
}

// Collective, at a rescale point whose allreduce asked for a checkpoint: write it and go on.
// Rank 0 acknowledges the checkpoint command that asked for it, if any.
void Session::Impl::CheckpointAndGoOn() {
  const std::string dir = CheckpointDir();
  Status written = Status(ErrorKind::kConfig, "no checkpoint directory (ELASTIC_CHECKPOINT_DIR or ELASTIC_RUN_DIR)");
  if (!dir.empty()) {
    if (rank == 0) mkdir(dir.c_str(), 0700);
    written = WriteCheckpoint(dir + "/checkpoint.bin");
  }
  if (written.ok()) ++checkpoints_written;
  if (rank == 0) {
    last_checkpoint = Clock::now();  // a failed write is retried one interval later
    if (written.ok()) {
      Log(LogLevel::kInfo, kComponent, "checkpoint at step ", step, " written to ", dir, "/checkpoint.bin");
    } else {
      Log(LogLevel::kError, kComponent, "checkpoint at step ", step, " not written: ", written.message());
    }
    if (checkpoint_command && checkpoint_command->id > 0) {
      SendAck(*checkpoint_command, written.ok(), written.ok() ? "" : written.message());
    }
    checkpoint_command.reset();
    checkpoint_requested = false;
  }
}

// Collective, when SIGTERM reached the base group: the checkpoint the job resumes from.
void Session::Impl::CheckpointBeforeStop() {
  if (const std::string dir = CheckpointDir(); !dir.empty()) {
    if (rank == 0) mkdir(dir.c_str(), 0700);
    const std::string path = dir + "/checkpoint.bin";
    if (WriteCheckpoint(path).ok()) {
      ++checkpoints_written;
      if (rank == 0) Log(LogLevel::kWarning, kComponent, "SIGTERM: checkpoint written to ", path);
    }
  }
}

Status Session::WriteCheckpoint(const std::string& path) { return impl_->WriteCheckpoint(path); }
Status Session::ReadCheckpoint(const std::string& path) { return impl_->ReadCheckpoint(path); }
std::string Session::checkpoint_path() const {
  const std::string dir = impl_->CheckpointDir();
  return dir.empty() ? "" : dir + "/checkpoint.bin";
}
int Session::checkpoints_written() const noexcept { return impl_->checkpoints_written; }

}  // namespace elastic::mpi
