#include "base/csv.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel {
namespace {

TEST(CsvTest, QuotedFieldsCommasNewlinesAndCrlf) {
  auto rows =
      ParseCsv("a,b,c\r\n\"x, y\",\"he said \"\"hi\"\"\",\"two\nlines\"\r\n\n1,,3\n", "t.csv");
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].fields, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ((*rows)[1].fields, (std::vector<std::string>{"x, y", "he said \"hi\"", "two\nlines"}));
  EXPECT_EQ((*rows)[1].line, 2);
  EXPECT_EQ((*rows)[2].fields, (std::vector<std::string>{"1", "", "3"}));
  EXPECT_EQ((*rows)[2].line, 5);  // the quoted newline and the blank line are counted
}

TEST(CsvTest, TrailingCommaMeansAnEmptyLastField) {
  auto rows = ParseCsv("a,\n", "t.csv");
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].fields, (std::vector<std::string>{"a", ""}));
}

TEST(CsvTest, UnterminatedQuoteNamesTheLine) {
  auto rows = ParseCsv("a,b\n\"open,c\nd\n", "bad.csv");
  EXPECT_STATUS(rows, StatusCode::kInvalidArgument);
  EXPECT_EQ(rows.status().message(), "bad.csv:2: unterminated quoted field");
}

}  // namespace
}  // namespace reel
