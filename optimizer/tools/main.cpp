// elastic-optimize: solve one scheduling epoch from a JSON snapshot, or benchmark the policies.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

int main(int argc, char** argv) {
  using namespace elastic::optimizer::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args.front() == "bench") {
      args.erase(args.begin());
      return RunBench(args);
    }
    return RunSolve(args);
  } catch (const std::exception& e) {
    std::cerr << "elastic-optimize: error: " << e.what() << "\n";
    return elastic::kExitFailure;
  }
}
