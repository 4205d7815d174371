// Enum names: one table per enum, read both ways, with one error wording.
#include "core/enum_names.h"

#include <gtest/gtest.h>

#include "core/rank_layout.h"
#include "core/workload.h"

namespace ditune {
namespace {

enum class Color { kRed, kGreen, kBlue };
constexpr EnumName<Color> kColors[] = {{Color::kRed, "red"}, {Color::kGreen, "green"}};

TEST(EnumNamesTest, NamesBothWaysAndOneErrorWording) {
  EXPECT_EQ(NameIn(kColors, Color::kGreen), "green");
  EXPECT_EQ(NameIn(kColors, Color::kBlue), "?");  // not in the table
  auto red = ParseIn(kColors, "red", "--color");
  ASSERT_TRUE(red.ok());
  EXPECT_EQ(*red, Color::kRed);
  auto bad = ParseIn(kColors, "teal", "--color");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--color 'teal' is not one of: red, green");
  // The catalog's enums use them.
  EXPECT_EQ(AxisName(Axis::kPipeFusion), "pipefusion");
  EXPECT_EQ(OutputTypeName(OutputType::kLatent), "latent");
}

}  // namespace
}  // namespace ditune
