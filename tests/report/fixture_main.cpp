// report_fixture DIR: writes the unit-test fixtures for the CLI and HTML tests:
// DIR/state.db (an elasticd state database, with step times), DIR/sacct.txt (canned sacct
// output) and DIR/sacct (a stand-in for sacct that prints it and records its arguments).
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "fixture.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: report_fixture DIR\n";
    return 2;
  }
  std::string dir = argv[1];
  elastic::report::testing::MakeStateDb(dir + "/state.db", true);
  {
    std::ofstream f(dir + "/sacct.txt");
    f << elastic::report::testing::SacctText();
  }
  {
    std::ofstream f(dir + "/sacct");
    f << "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/sacct.args\"\n"
         "exec cat \"$(dirname \"$0\")/sacct.txt\"\n";
  }
  chmod((dir + "/sacct").c_str(), 0755);
  return 0;
}
