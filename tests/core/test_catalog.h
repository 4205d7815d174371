// The shipped catalog, loaded once for every test in the binary.
#ifndef DITUNE_TESTS_CORE_TEST_CATALOG_H_
#define DITUNE_TESTS_CORE_TEST_CATALOG_H_

#include <gtest/gtest.h>

#include "core/catalog.h"

namespace ditune::testing {

inline const Catalog& TestCatalog() {
  static const Catalog* catalog = [] {
    auto c = Catalog::Load(DITUNE_TEST_DATA_DIR);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      std::abort();
    }
    return new Catalog(std::move(c).value());
  }();
  return *catalog;
}

inline const ModelSpec& TestModel(const std::string& id) { return **TestCatalog().Model(id); }

}  // namespace ditune::testing

#endif  // DITUNE_TESTS_CORE_TEST_CATALOG_H_
