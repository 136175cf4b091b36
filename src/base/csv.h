// RFC 4180 CSV (quoted fields, doubled quotes, commas and newlines inside
// quotes, CRLF or LF) for the CSV listings users already have.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel {

struct CsvRow {
  int line = 0;  // 1-based line where the row starts, for error messages
  std::vector<std::string> fields;
};

// Errors: InvalidArgument naming `source_name` and the line of an unterminated quote.
// Blank lines are skipped.
Result<std::vector<CsvRow>> ParseCsv(std::string_view text, std::string_view source_name);

}  // namespace reel
