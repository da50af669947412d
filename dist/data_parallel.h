// Data-parallel training in the style of PyTorch's DistributedDataParallel: one process per
// rank, each holding the whole model under its own DTR budget.  Construction copies rank 0's
// parameters and buffers to every rank; after each backward() the gradients are averaged over
// the ranks, bucket by bucket, each bucket's ring allreduce starting as soon as backward has
// produced all of its gradients and advancing while backward goes on.
// Each parameter's gradient is a view of its slice of a bucket (PyTorch's
// gradient_as_bucket_view); buckets and the ring's receive buffers are constants of the
// parameters' pool, so the budget counts them.  The reduction order is fixed
// (dist/collectives.h): runs are bit-identical.
// Usage: auto& world = dist::init();
//        dist::DistributedDataParallel ddp(model, world);
//        nn::SGD opt(model->parameters(), {...});
//        Tensor loss = cross_entropy(ddp(x), y); opt.zero_grad(); backward(loss); opt.step();
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "dist/communicator.h"
#include "nn/module.h"

namespace remat::dist {

struct DataParallelOptions {
  // Gradients travel in buckets of about this many bytes, filled in reverse parameter order
  // (the order backward produces them); a parameter larger than this gets a bucket of its own.
  std::size_t bucket_bytes = std::size_t{1} << 20;
  // Copy rank 0's buffers (batch-norm running statistics) to every rank before each forward in
  // training mode, as PyTorch's DDP does, so every rank evaluates with the same statistics.
  bool broadcast_buffers = true;
};

struct DataParallelStats {
  std::int64_t reductions = 0;       // backward passes whose gradients were averaged
  std::int64_t bytes_reduced = 0;    // gradient bytes this rank contributed, all passes
  double communication_seconds = 0;  // copying into buckets, driving transfers and waiting
  double wait_seconds = 0;           // of that: blocked after backward for the last buckets
  double broadcast_seconds = 0;      // copying parameters and buffers from rank 0
};

class DistributedDataParallel {
 public:
  // The module's parameters must be CPU floating-point tensors, in the same order, shapes and
  // dtypes on every rank (checked).  Collectives run on `comm`, which must outlive this.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, Communicator& comm,
                          DataParallelOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The module's forward, after copying rank 0's buffers in training mode.
  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // The wrapped module: what to save (rank 0) and load (any number of ranks).
  nn::Module& module() const { return *module_; }
  Communicator& communicator() const;
  std::size_t num_buckets() const;
  // The parameter bytes of each bucket (in the order they are reduced).
  std::vector<std::size_t> bucket_bytes() const;
  DataParallelStats stats() const;
  // Copies rank 0's buffers to every rank now (forward does it in training mode).
  void broadcast_buffers();

 private:
  struct State;
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<State> state_;  // the gradient hooks hold it weakly
  bool broadcast_buffers_each_forward_ = true;
};

}  // namespace remat::dist
