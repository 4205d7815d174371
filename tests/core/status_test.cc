#include "core/status.h"

#include <gtest/gtest.h>

namespace ditune {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  DITUNE_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(StatusTest, ExitCodesFollowTheCliContract) {
  EXPECT_EQ(Status::Ok().ExitCode(), 0);
  EXPECT_EQ(Status::InvalidArgument("x").ExitCode(), 2);
  EXPECT_EQ(Status::NotFound("x").ExitCode(), 2);
  EXPECT_EQ(Status::Corruption("x").ExitCode(), 2);
  EXPECT_EQ(Status::Infeasible("x").ExitCode(), 3);
  EXPECT_EQ(Status::Internal("x").ExitCode(), 1);
}

TEST(StatusTest, ContextAndToString) {
  Status s = Status::NotFound("no such file").WithContext("loading x");
  EXPECT_EQ(s.message(), "loading x: no such file");
  EXPECT_EQ(s.ToString(), "not found: loading x: no such file");
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
}

TEST(StatusTest, StatusOrCarriesValueOrError) {
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = UseHalf(7, &v);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd");
  StatusOr<int> bad(Status::Ok());  // misuse becomes an internal error, not a fake value
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInternal);
}

}  // namespace
}  // namespace ditune
