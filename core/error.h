// The framework's one exception type and the check macro used at every public entry.
// Usage: REMAT_CHECK(a.dim() == 2, "matmul: expected a 2-D tensor, got shape {}", a.shape());
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace remat {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace remat

#define REMAT_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) throw ::remat::Error(fmt::format(__VA_ARGS__)); \
  } while (0)

#define REMAT_THROW(...) throw ::remat::Error(fmt::format(__VA_ARGS__))
