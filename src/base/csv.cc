#include "base/csv.h"

namespace reel {

Result<std::vector<CsvRow>> ParseCsv(std::string_view text, std::string_view source_name) {
  std::vector<CsvRow> rows;
  CsvRow row;
  std::string field;
  bool in_quotes = false;
  bool field_started = false;  // the row has content (so "a," has two fields)
  int line = 1;
  int quote_line = 0;
  row.line = 1;
  auto end_field = [&] {
    row.fields.push_back(std::move(field));
    field.clear();
  };
  auto end_row = [&] {
    if (field_started || !row.fields.empty()) {
      end_field();
      rows.push_back(std::move(row));
    }
    row = CsvRow{};
    field_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_quotes = true;
        quote_line = line;
        field_started = true;
        break;
      case ',':
        field_started = true;
        end_field();
        break;
      case '\r':
        break;
      case '\n':
        end_row();
        ++line;
        row.line = line;
        break;
      default:
        if (row.fields.empty() && !field_started) row.line = line;
        field_started = true;
        field += c;
    }
  }
  if (in_quotes) {
    return InvalidArgumentError(std::string(source_name) + ":" + std::to_string(quote_line) +
                                ": unterminated quoted field");
  }
  end_row();
  return rows;
}

}  // namespace reel
