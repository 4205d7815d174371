// The machine outputs the doctor and --topology tests read (tests/data/doctor/), by file name.
#ifndef DITUNE_TESTS_CORE_TEST_INPUTS_H_
#define DITUNE_TESTS_CORE_TEST_INPUTS_H_

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace ditune::testing {

inline std::string Input(const std::string& name) {
  std::ifstream in(std::string(DITUNE_TEST_INPUTS_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ditune::testing

#endif  // DITUNE_TESTS_CORE_TEST_INPUTS_H_
