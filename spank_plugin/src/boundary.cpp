// The C boundary: option registration and callbacks, context dispatch, and the catch-all that
// keeps C++ exceptions from reaching Slurm.
#include "boundary.h"

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "elastic/common/log.h"
#include "plugin_state.h"
#include "spank_cxx.h"

namespace elastic::spank {

PluginState& State() {
  static PluginState state;
  return state;
}

namespace {

// Sends the logger's messages to Slurm's log functions, prefixed with the plugin's name.
class SlurmLogSink final : public LogSink {
 public:
  void Write(LogLevel level, std::string_view component, std::string_view message) override {
    std::string text = "elastic: ";
    if (!component.empty()) text += std::string(component) + ": ";
    text += message;
    switch (level) {
      case LogLevel::kError: slurm_error("%s", text.c_str()); break;
      case LogLevel::kWarning:
      case LogLevel::kInfo: slurm_info("%s", text.c_str()); break;
      case LogLevel::kVerbose: slurm_verbose("%s", text.c_str()); break;
      case LogLevel::kDebug: slurm_debug("%s", text.c_str()); break;
    }
  }
};

// Runs `body`, turning any exception into -1 and one error message.
template <typename F>
int Guard(const char* where, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("elastic: internal error in %s: %s", where, e.what());
  } catch (...) {
    slurm_error("elastic: internal error in %s", where);
  }
  return -1;
}

extern "C" int OptionCallback(int val, const char* optarg, int remote) noexcept {
  return Guard("option callback", [&]() -> int {
    PluginState& st = State();
    Status s = SetOption(st.spec, static_cast<OptionId>(val), optarg);
    if (s.ok()) return 0;
    if (remote) {
      // In slurmstepd: never fail the step (that may drain the node); the task reports it.
      if (!st.option_error) st.option_error = s.message();
      return 0;
    }
    slurm_error("elastic: %s", s.message().c_str());
    return -1;
  });
}

int RegisterOptions(spank_t sp) {
  // spank_option_register keeps pointers to the strings: they live as long as the process.
  static std::vector<spank_option> table;
  if (table.empty()) {
    for (const OptionInfo& o : Options()) {
      table.push_back(spank_option{const_cast<char*>(o.name), const_cast<char*>(o.arginfo),
                                   const_cast<char*>(o.usage), o.arginfo ? 1 : 0, static_cast<int>(o.id),
                                   &OptionCallback});
    }
  }
  for (auto& opt : table) {
    spank_err_t rc = spank_option_register(sp, &opt);
    if (rc != ESPANK_SUCCESS) {
      slurm_error("elastic: cannot register --%s: %s", opt.name, spank_strerror(rc));
      return -1;
    }
  }
  return 0;
}

bool IsBatchStep(spank_t sp) {
  uint32_t step = 0;
  return spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_BATCH_SCRIPT;
}

}  // namespace
}  // namespace elastic::spank

using namespace elastic::spank;

extern "C" int elastic_spank_init(spank_t sp, int ac, char** av) {
  return Guard("init", [&]() -> int {
    elastic::Logger::Get().SetSinks({std::make_shared<SlurmLogSink>()});
    elastic::Logger::Get().SetLevel(elastic::LogLevel::kDebug);  // Slurm filters by its own level
    std::vector<std::string> args(av, av + ac);
    auto site = ParseSiteConfig(args);
    if (!site.ok()) {
      slurm_error("elastic: %s; the plugin is not loaded", site.status().message().c_str());
      return -1;
    }
    State().site = std::move(site).value();
    switch (spank_context()) {
      case S_CTX_ALLOCATOR:
      case S_CTX_LOCAL:
      case S_CTX_REMOTE:
        return RegisterOptions(sp);
      default:
        return 0;
    }
  });
}

extern "C" int elastic_spank_init_post_opt(spank_t sp, int, char**) {
  return Guard("init_post_opt", [&]() -> int {
    switch (spank_context()) {
      case S_CTX_ALLOCATOR: return AllocatorPostOpt(sp);
      case S_CTX_LOCAL: return LocalPostOpt(sp);
      case S_CTX_REMOTE:
        if (IsBatchStep(sp)) BatchStepPostOpt(sp);
        return 0;
      default: return 0;
    }
  });
}

extern "C" int elastic_spank_task_init(spank_t sp, int, char**) {
  return Guard("task_init", [&]() -> int {
    if (spank_context() != S_CTX_REMOTE || !IsBatchStep(sp)) return 0;
    return TaskInit(sp);
  });
}

extern "C" int elastic_spank_exit(spank_t, int, char**) {
  return Guard("exit", [&]() -> int {
    elastic::Logger::Get().SetSinks({});  // Slurm's log may be gone after this
    return 0;
  });
}
