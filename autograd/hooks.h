// Hooks into a running backward pass, for work that must overlap it (gradient communication):
// a leaf's post-accumulate hook runs right after backward() stores the leaf's gradient, and a
// backward callback runs once when the current backward() call has finished.
// Usage: register_post_accumulate_grad_hook(w, [](const Tensor& leaf) { send(leaf.grad()); });
//        queue_backward_callback([] { wait_for_sends(); });  // from inside a hook
#pragma once
#include <functional>

#include "core/tensor.h"

namespace remat {

// Runs `hook(leaf)` each time backward() accumulates into leaf.grad() (after the store, so
// leaf.grad() is this pass's sum).  `leaf` must be a leaf tensor that requires grad; hooks run
// in registration order.  grad() never accumulates, so it runs none.
void register_post_accumulate_grad_hook(const Tensor& leaf,
                                        std::function<void(const Tensor& leaf)> hook);

// Queues `fn` to run once after every node of the backward() call in progress on this thread
// has run, before backward() returns; callbacks run in the order queued, and may queue more.
// Outside a backward() call it is an error.  If the backward pass throws, queued callbacks are
// dropped.
void queue_backward_callback(std::function<void()> fn);

}  // namespace remat
