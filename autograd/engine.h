// The backward engine: runs graph nodes in reverse order of creation, sums gradients that meet,
// and either accumulates into leaves (backward) or returns gradients w.r.t. given inputs (grad).
// Usage: backward({loss}); auto g = grad({y}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
#pragma once
#include <vector>

#include "core/tensor.h"

namespace remat {

// Accumulates d(outputs)/d(leaf) into every leaf's grad().  grad_outputs defaults to ones for
// one-element outputs; retain_graph defaults to create_graph.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);
inline void backward(const Tensor& output) { backward(std::vector<Tensor>{output}); }

// Returns d(outputs)/d(inputs) without touching any grad().  With create_graph the results
// carry history, so they can be differentiated again.  An input the outputs do not depend on
// is an error unless allow_unused, when its gradient is undefined.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace remat
