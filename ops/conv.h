// 2-D convolution as torch.nn.functional.conv2d (NCHW input, OIHW weights), and its derivatives
// with respect to input and weight, public as building blocks (e.g. transposed convolution).
// Usage: auto y = conv2d(x, w, b, {.stride = 2, .padding = 1});  conv2d(x, w, {}, {.groups = 4});
//        conv2d(x, w, b, {.padding = "same"});
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/tensor.h"

namespace remat {

// A (height, width) pair; one number means both: {.stride = 2} or {.stride = {2, 1}}.
struct Size2 {
  std::int64_t h = 0, w = 0;
  Size2(std::int64_t v = 0) : h(v), w(v) {}  // implicit, so options read like PyTorch's
  Size2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Size2&) const = default;
};

// Padding of a convolution as PyTorch's: a number or pair (zeros on both sides), "valid" (none) or
// "same" (output as large as the input; stride 1 only; when the total d * (k - 1) is odd the
// extra row or column goes at the bottom or right, as PyTorch's).
struct Padding2 : Size2 {
  enum class Mode { Explicit, Same, Valid };
  Mode mode = Mode::Explicit;
  Padding2(std::int64_t v = 0) : Size2(v) {}
  Padding2(std::int64_t h_, std::int64_t w_) : Size2(h_, w_) {}
  Padding2(Size2 s) : Size2(s) {}
  // "same" or "valid"; any other name is an error naming it.  A literal binds to the array
  // overload (so 0 stays a number); a run-time name needs Padding2(std::string_view(name)).
  template <std::size_t N>
  Padding2(const char (&mode_name)[N]) : Padding2(std::string_view(mode_name)) {}
  explicit Padding2(std::string_view mode_name);
  bool operator==(const Padding2&) const = default;
};

struct Conv2dOptions {
  Size2 stride = 1;
  Padding2 padding = 0;
  Size2 dilation = 1;  // 1: no dilation
  std::int64_t groups = 1;
};

// x [N, C, H, W] (or unbatched [C, H, W]), weight [O, C/groups, KH, KW], bias [O] or undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Conv2dOptions opts = {});

// d conv2d / d x applied to grad_output [N, O, OH, OW]: a tensor of input_shape [N, C, H, W].
// The input size is an argument because with stride > 1 several sizes give the same OH, OW.
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight,
                             const Shape& input_shape, Conv2dOptions opts = {});
// d conv2d / d weight applied to grad_output: a tensor of weight_shape [O, C/groups, KH, KW].
Tensor conv2d_backward_weight(const Tensor& x, const Tensor& grad_output, const Shape& weight_shape,
                              Conv2dOptions opts = {});

}  // namespace remat

template <>
struct fmt::formatter<remat::Size2> : fmt::formatter<std::string> {
  auto format(const remat::Size2& s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string>::format(fmt::format("({}, {})", s.h, s.w), ctx);
  }
};

template <>
struct fmt::formatter<remat::Padding2> : fmt::formatter<remat::Size2> {
  auto format(const remat::Padding2& p, fmt::format_context& ctx) const {
    using Mode = remat::Padding2::Mode;
    if (p.mode == Mode::Explicit) return fmt::formatter<remat::Size2>::format(p, ctx);
    return fmt::format_to(ctx.out(), "{}", p.mode == Mode::Same ? "\"same\"" : "\"valid\"");
  }
};
