// Fixtures shared by the report tests: canned sacct output and an elasticd state database made
// with the controller's own Database (so the schema is the real one).
#pragma once

#include <string>

namespace elastic::report::testing {

// 2026-11-20T10:00:00 in local time (sacct's times and ParseTime are local).
double T10();

// sacct output (kSacctFormat fields) for 2026-11-20:
//   100 alice/physics  2 GPUs 10:00-11:00, waited 600 s                     rigid, 2 GPU-h
//   200 bob/chem       2 GPUs 10:00-12:00, waited 3600 s                    elastic parent, 4 GPU-h
//   201 bob/chem       4 GPUs 10:30-11:00  admin comment parent=200 group=1 extension, 2 GPU-h
//   202 bob/chem       2 GPUs 10:45-11:15  admin comment parent=200 group=2 extension, 1 GPU-h
//   300 carol/physics  1 GPU  12:00-13:00, named elastic-ext:100:1 without admin comment: ordinary
//   400 dave/physics   no GPUs (cpu partition): not in the report
//   500 erin/bio       1 GPU  still running since 2026-11-20T23:00:00 (End Unknown)
std::string SacctText();

// Creates (or overwrites) a state database at `path` with job 200's journal: base 2 GPUs,
// intervals 2 (10:00-10:30), 6 (-10:45), 8 (-11:00), 4 (-11:15), 2 (-12:00); four successful
// rescales with pauses 2, 3, 1, 1 s and one failed grow; the extension rows of groups 1 and 2.
// With `samples`, step times measured at 2 GPUs (640 samples/s) and 6 GPUs (1600 samples/s).
void MakeStateDb(const std::string& path, bool samples = false);

}  // namespace elastic::report::testing
