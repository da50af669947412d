// --device cpu | cuda | cuda:N for the examples: where the model, its batches and the budgeted
// pool live.  Asking for a GPU that this process cannot use is an error naming why.
// Usage: examples::DeviceFlag device; device.add_to(app); ...; const Device d = device.get();
#pragma once
#include <CLI/CLI.hpp>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "core/cuda.h"
#include "core/device.h"
#include "core/error.h"

namespace remat::examples {

// "cpu", "cuda" (device 0) or "cuda:N"; nullopt for anything else.
inline std::optional<Device> parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda();
  constexpr std::string_view prefix = "cuda:";
  if (s.rfind(prefix, 0) != 0 || s.size() == prefix.size()) return std::nullopt;
  int index = -1;
  const char* b = s.data() + prefix.size();
  const auto r = std::from_chars(b, s.data() + s.size(), index);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || index < 0 || index > 63)
    return std::nullopt;
  return Device::cuda(index);
}

struct DeviceFlag {
  std::string name = "cpu";

  void add_to(CLI::App& app) {
    app.add_option("--device", name, "where to train: cpu, cuda or cuda:N")
        ->check(CLI::Validator(
            [](std::string& s) -> std::string {
              return parse_device(s) ? "" : "expected cpu, cuda or cuda:N (N from 0 to 63)";
            },
            "DEVICE"));
  }
  // The device, checked: a GPU must be there and usable.
  Device get() const {
    const std::optional<Device> d = parse_device(name);
    REMAT_CHECK(d.has_value(), "--device {}: expected cpu, cuda or cuda:N", name);
    if (d->is_cuda()) {
      REMAT_CHECK(cuda::available(), "--device {}: {}", name, cuda::unavailable_reason());
      REMAT_CHECK(d->index < cuda::device_count(), "--device {}: only {} CUDA device(s) visible",
                  name, cuda::device_count());
    }
    return *d;
  }
};

}  // namespace remat::examples
