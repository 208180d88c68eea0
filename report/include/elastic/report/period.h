// Times for --since/--until in the forms Slurm's commands accept, and their formatting.
#pragma once

#include <string>
#include <string_view>

#include "elastic/common/error.h"

namespace elastic::report {

// Parses a point in time, in seconds since the epoch:
//   YYYY-MM-DD, YYYY-MM-DDTHH:MM, YYYY-MM-DDTHH:MM:SS   (local time, as sacct prints and reads them)
//   now, now-COUNT[UNIT], now+COUNT[UNIT]                UNIT: seconds (default), minutes, hours,
//                                                        days, weeks (singular, plural, or s/m/h/d/w)
//   today, midnight (00:00 today), yesterday (00:00 the day before)
// `now` anchors the relative forms; `what` names the value in messages ("--since").
// Fails with kInvalidArgument and a message that quotes the text and lists the accepted forms.
Result<double> ParseTime(std::string_view text, double now, std::string_view what);

// Local time as YYYY-MM-DDTHH:MM:SS (the form sacct prints and ParseTime reads back).
std::string FormatTime(double t);

// Seconds since the epoch, now.
double NowSeconds();

}  // namespace elastic::report
