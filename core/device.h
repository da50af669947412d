// Where a tensor's cell lives.  The device is a parameter of every allocation and kernel
// choice, so the CUDA backend slots in without changing callers.  Usage: Device::cpu().
#pragma once
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace remat {

enum class DeviceType : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  friend constexpr bool operator==(Device a, Device b) = default;
  std::string str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }
};

}  // namespace remat

template <>
struct fmt::formatter<remat::Device> : fmt::formatter<std::string> {
  auto format(remat::Device d, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
