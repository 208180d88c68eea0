#include "elastic/report/period.h"

#include <chrono>
#include <cstdint>
#include <ctime>

namespace elastic::report {
namespace {

const char* kForms =
    "expected YYYY-MM-DD[THH:MM[:SS]], now, now-COUNT[seconds|minutes|hours|days|weeks], today or yesterday";

Status Bad(std::string_view what, std::string_view text, std::string_view why = {}) {
  std::string msg = std::string(what) + ": cannot read '" + std::string(text) + "' as a time";
  if (!why.empty()) msg += " (" + std::string(why) + ")";
  return Status(ErrorKind::kInvalidArgument, msg + "; " + kForms);
}

// Reads exactly `n` digits at `pos`; false when they are not all there.
bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

double Midnight(double t, int days_back) {
  time_t tt = static_cast<time_t>(t);
  struct tm tm {};
  localtime_r(&tt, &tm);
  tm.tm_hour = 0;
  tm.tm_min = 0;
  tm.tm_sec = 0;
  tm.tm_mday -= days_back;
  tm.tm_isdst = -1;
  return static_cast<double>(mktime(&tm));
}

int DaysInMonth(int year, int month) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

}  // namespace

Result<double> ParseTime(std::string_view text, double now, std::string_view what) {
  if (text.empty()) return Bad(what, text, "empty");
  if (text == "now") return now;
  if (text == "today" || text == "midnight") return Midnight(now, 0);
  if (text == "yesterday") return Midnight(now, 1);
  if (text.rfind("now", 0) == 0) {
    std::string_view rest = text.substr(3);
    char sign = rest[0];
    if (sign != '-' && sign != '+') return Bad(what, text);
    size_t i = 1;
    int64_t count = 0;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') {
      count = count * 10 + (rest[i] - '0');
      if (count > 100000000) return Bad(what, text, "count too large");
      ++i;
    }
    if (i == 1) return Bad(what, text, "no count after the sign");
    std::string_view unit = rest.substr(i);
    double scale = 0;
    if (unit.empty() || unit == "s" || unit == "sec" || unit == "second" || unit == "seconds") {
      scale = 1;
    } else if (unit == "m" || unit == "min" || unit == "minute" || unit == "minutes") {
      scale = 60;
    } else if (unit == "h" || unit == "hour" || unit == "hours") {
      scale = 3600;
    } else if (unit == "d" || unit == "day" || unit == "days") {
      scale = 86400;
    } else if (unit == "w" || unit == "week" || unit == "weeks") {
      scale = 7 * 86400;
    } else {
      return Bad(what, text, "unknown unit '" + std::string(unit) + "'");
    }
    double delta = static_cast<double>(count) * scale;
    return sign == '-' ? now - delta : now + delta;
  }
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!Digits(text, 0, 4, &year) || text.size() < 10 || text[4] != '-' || !Digits(text, 5, 2, &month) ||
      text[7] != '-' || !Digits(text, 8, 2, &day)) {
    return Bad(what, text);
  }
  if (text.size() > 10) {
    if (text[10] != 'T' || text.size() < 16 || !Digits(text, 11, 2, &hour) || text[13] != ':' ||
        !Digits(text, 14, 2, &minute)) {
      return Bad(what, text);
    }
    if (text.size() > 16) {
      if (text.size() != 19 || text[16] != ':' || !Digits(text, 17, 2, &second)) return Bad(what, text);
    }
  }
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    return Bad(what, text, "no such date or time");
  }
  struct tm tm {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  time_t t = mktime(&tm);
  if (t == static_cast<time_t>(-1)) return Bad(what, text, "out of range");
  return static_cast<double>(t);
}

std::string FormatTime(double t) {
  time_t tt = static_cast<time_t>(t);
  struct tm tm {};
  localtime_r(&tt, &tm);
  char buf[32];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf, n);
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace elastic::report
