// The leader launcher's side of a relaunch (src/relaunch.h): when the world ended for one, the
// record is taken (renamed relaunched.json), the job's rendezvous is started again over the new
// world's nodes where it must span other nodes or did (mpi_stack.h: Open MPI 5's DVM, with an
// ssh-style agent that is this program's `--agent` mode), and the group is launched again.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "mpi_stack.h"

namespace elastic::launch {

// What the launcher does with processes (elastic_launch.cpp).
struct ProcessHooks {
  std::function<pid_t(const std::vector<std::string>&)> start_server;  // -1 when it cannot
  std::function<void(pid_t, const std::vector<std::string>&)> stop_server;
  std::function<bool(const std::string&, double)> wait_for_file;  // a complete first line
};

struct RelaunchSetup {
  std::string run_dir;
  std::string self;           // this executable (the DVM's agent)
  std::string itf;            // ELASTIC_RENDEZVOUS_IF
  std::string server_program; // --rendezvous-server
  std::string uri_file;
  double wait_s = 60;
};

class Relauncher {
 public:
  Relauncher(RelaunchSetup setup, ProcessHooks hooks, pid_t* server, std::vector<std::string>* server_cmd)
      : s_(std::move(setup)), hooks_(std::move(hooks)), server_(server), server_cmd_(server_cmd) {}

  // Whether the world that just ended asked for a relaunch (its record is there).
  bool Asked() const;
  // Whether to start the next world after one that ended with status rc: when it asked for a
  // relaunch and ended 0, or ended otherwise after its rank 0 wrote a record without nodes taken
  // away (SIGTERM to the ranks there: the job holding them ends), whose daemons may end first
  // and take the DVM's job down, or when FallBack() wrote the record.
  bool Continues(int rc) const;
  // The launcher's status after its last world ended with rc: 75 (elasticd restarts the job from
  // its last checkpoint) when rc is another failure and ranks on other nodes got SIGTERM (their
  // nodes were taken before rank 0 could start the world again without them), else rc.
  int AfterNodesTaken(int rc) const;
  // Before a world starts and at the end: the SIGTERM marks (relaunch.h) are removed.
  void ClearSignalled() const;
  // After the world Next() made ready ended with a failure before its rank 0 took the state (the
  // state file is still there), or did not start at all (why: what went wrong): whether the
  // world before it is to be started again as it was (the record's "from_world": once per
  // relaunch, never for a world leaving taken nodes). Then a record for it is written, with
  // "failed": why (that world acknowledges elasticd's command failed, and elasticd ends the
  // groups the relaunch brought), and Continues() goes on with it. A daemon on a new node that
  // cannot start (its Slurm step refused) ends a relaunch so; the job then trains on instead of
  // being restarted from a checkpoint.
  bool FallBack(const std::string& why);
  // Whether the world Next() made ready has not taken its state yet (the file is still there).
  bool StateUntaken() const;
  // Takes the record and makes ready the next world: the rendezvous again where needed, and
  // *group's ranks (all of them) and hosts. Returns the ranks on this node. kInvalidArgument (a
  // bad record, or a world this MPI cannot relaunch), kUnavailable (the rendezvous did not start).
  Result<int> Next(mpi::stack::GroupLaunch* group);
  // The record the next world reads (ELASTIC_RELAUNCH_FROM).
  std::string record() const { return s_.run_dir + "/relaunched.json"; }
  // The job ends with a record not taken (SIGTERM, a rank failed after the record was written):
  // its state joins those Finish keeps.
  void Abandon();
  // At the end: a state file no world took (the relaunch failed) becomes the job's checkpoint at
  // checkpoint_path (it is one: the runtime writes the checkpoint format), so that a restart of the
  // job resumes from where the world stopped; older ones are removed. True when one was kept.
  bool Finish(const std::string& checkpoint_path);
  // Whether the rendezvous now runs on other nodes too (its agents there never leave by themselves).
  bool spans_others() const { return spans_others_; }

 private:
  RelaunchSetup s_;
  ProcessHooks hooks_;
  pid_t* server_;
  std::vector<std::string>* server_cmd_;
  bool spans_others_ = false;  // the rendezvous runs on other nodes too
  std::vector<std::string> states_;
};

// A state file made the job's checkpoint (copied: /dev/shm and the run dir are different file
// systems), then removed; false (with a message) when it could not be kept.
bool KeepAsCheckpoint(const std::string& state, const std::string& checkpoint_path);

// At the leader's start: a record of an earlier run of the job (requeued; its launcher killed
// before it took the record) is not this world's to act on, but its state, if still there, is
// the job's newest: made the checkpoint. Its worlds' SIGTERM marks are removed.
void KeepLeftoverRecord(const std::string& run_dir, const std::string& checkpoint_path);

// `elastic-launch --agent RECORD NODE COMMAND...`: what the DVM runs to start its daemon on NODE;
// runs COMMAND (one shell line) there through the node's agent in RECORD.
int AgentMain(int argc, char** argv);
inline constexpr char kAgentOption[] = "--agent";

}  // namespace elastic::launch
