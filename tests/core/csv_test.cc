// CSV records, the UTF-8 check every text input goes through, and JSON text.
#include "core/csv.h"
#include "core/json_fields.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace ditune {
namespace {

TEST(Utf8Test, AcceptsUtf8AndNamesTheFirstBadByteByLineAndColumn) {
  EXPECT_TRUE(CheckUtf8("plain,ascii\nmore", "a.csv").ok());
  EXPECT_TRUE(CheckUtf8("TP \xe2\x9d\x8e and caf\xc3\xa9 and \xf0\x9f\x8e\xac", "a.csv").ok());
  Status bad = CheckUtf8("a,b\nimport,d\xffit", "m.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.ExitCode(), 2);
  EXPECT_EQ(bad.message(), "m.csv:2:9: byte 0xFF is not UTF-8: save the file as UTF-8 text");
  // Overlong forms, surrogates, truncated sequences and code points above U+10FFFF.
  for (const char* s : {"\xc0\xaf", "\xed\xa0\x80", "\xe2\x9d", "\xf4\x90\x80\x80", "\x80"}) {
    EXPECT_FALSE(CheckUtf8(s, "x").ok()) << s;
  }
  auto records = ReadCsvRecords("h\nv\xfe\n", "s.csv");
  ASSERT_FALSE(records.ok());
  EXPECT_NE(records.status().message().find("s.csv:2:2: byte 0xFE"), std::string::npos);
}

}  // namespace
}  // namespace ditune

namespace ditune {
namespace {

// Found by fuzzing (tests/fuzz/regressions/catalog_json/number-overflow.json): a number beyond
// a double threw out of the JSON reader.
TEST(JsonTextTest, ANumberBeyondADoubleIsBadInputNotACrash) {
  auto j = ParseJsonText("{\"hidden\": 4E44444}", "m.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().ExitCode(), 2);
  EXPECT_NE(j.status().message().find("m.json: JSON that cannot be read"), std::string::npos) << j.status().message();
}

}  // namespace
}  // namespace ditune
