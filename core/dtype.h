// Element types a tensor can hold: float32 for training, float64 for gradient checks,
// int64 for indices and labels.  Usage: element_size(DType::Float32) == 4.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

namespace remat {

enum class DType : std::uint8_t { Float32, Float64, Int64 };

constexpr std::size_t element_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t != DType::Int64; }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::Float32; }
template <>
constexpr DType dtype_of<double>() { return DType::Float64; }
template <>
constexpr DType dtype_of<std::int64_t>() { return DType::Int64; }

}  // namespace remat

template <>
struct fmt::formatter<remat::DType> : fmt::formatter<std::string_view> {
  auto format(remat::DType t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(remat::dtype_name(t), ctx);
  }
};
