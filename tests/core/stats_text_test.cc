// The one quantile convention (type 7), nearest-rank order statistics, and the text helpers.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/stats.h"
#include "core/text.h"

namespace ditune {
namespace {

TEST(StatsTest, QuantileIsType7) {
  // R: quantile(c(1, 2, 3, 4), type = 7) -> 1, 1.75, 2.5, 3.25, 4 at 0, .25, .5, .75, 1.
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.75), 3.25);
  EXPECT_DOUBLE_EQ(Quantile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(Quantile({10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 0.9), 91.0);
  EXPECT_DOUBLE_EQ(Quantile({}, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(Quantile({7}, 0.9), 7.0);
}

TEST(StatsTest, MedianIsTheMiddleOrTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({5}), 5.0);
  // Agrees with the definition on every size, values in any order.
  for (int n = 1; n <= 9; ++n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(std::fmod(i * 7.3, 5.1));
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    const double want = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    EXPECT_DOUBLE_EQ(Median(v), want) << n;
  }
}

TEST(StatsTest, NearestRankIsAnObservedValue) {
  std::vector<double> v;
  for (int i = 1; i <= 20; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(NearestRank(v, 0.95), 19.0);  // 0.95 x 20 is 19 exactly: rank 19
  EXPECT_DOUBLE_EQ(NearestRank(v, 0.1), 2.0);
  EXPECT_DOUBLE_EQ(NearestRank(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(NearestRank(v, 1.0), 20.0);
  EXPECT_DOUBLE_EQ(NearestRank({}, 0.5), 0.0);
}

TEST(TextTest, TrimAndEscape) {
  EXPECT_EQ(Trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(Trim("\v\f x"), "x");
  EXPECT_EQ(Trim(" \t "), "");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(EscapeHtml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
}

}  // namespace
}  // namespace ditune
