// What the tests run under mpirun share: the MPI world and the test catalog.
#ifndef DITUNE_TESTS_EXECUTOR_MPI_TEST_UTIL_H_
#define DITUNE_TESTS_EXECUTOR_MPI_TEST_UTIL_H_

#include <cstdlib>

#include <gtest/gtest.h>

#include "core/catalog.h"
#include "executor/comm.h"

namespace ditune::exec {

// The job's MPI world, created once (a failure ends the process: nothing can run without it).
inline Comm* World() {
  static Comm* w = [] {
    auto c = CreateComm("mpi", nullptr, nullptr);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      std::abort();
    }
    return c->release();
  }();
  return w;
}

inline const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

}  // namespace ditune::exec

#endif  // DITUNE_TESTS_EXECUTOR_MPI_TEST_UTIL_H_
