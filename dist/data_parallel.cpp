#include "dist/data_parallel.h"

#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/hooks.h"
#include "dist/collectives.h"
#include "nn/data.h"
#include "ops/inplace.h"
#include "ops/view.h"

namespace remat::dist {

namespace {

using Clock = std::chrono::steady_clock;

using nn::detail::raw_bytes;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Tensor zero_constant(std::size_t count, DType dtype) {
  const auto meta =
      TensorMeta::contiguous({static_cast<std::int64_t>(count)}, dtype, Device::cpu());
  return nn::detail::constant_filled(
      meta, [&](void* out) { std::memset(out, 0, count * element_size(dtype)); });
}

// Copies rank 0's values of `tensors` to every rank: packed into one message, then written
// in place (copy_), so every handle on them (an optimizer's) sees the new values.
void broadcast_values(Communicator& comm, const std::vector<Tensor>& tensors,
                      std::string_view what) {
  if (comm.size() == 1) return;
  std::size_t total = 0;
  for (const Tensor& t : tensors) total += t.meta().nbytes();
  std::vector<std::byte> packed(total);
  if (comm.rank() == 0) {
    std::size_t at = 0;
    for (const Tensor& t : tensors) {
      const std::size_t n = t.meta().nbytes();
      if (n > 0) std::memcpy(packed.data() + at, raw_bytes(contiguous(t)), n);
      at += n;
    }
  }
  broadcast(comm, packed.data(), total, 0, what);
  if (comm.rank() == 0) return;
  NoGradGuard no_grad;
  std::size_t at = 0;
  for (const Tensor& t : tensors) {
    const std::size_t n = t.meta().nbytes();
    const Tensor value = nn::detail::constant_filled(
        TensorMeta::contiguous(t.shape(), t.dtype(), Device::cpu()), [&](void* out) {
          if (n > 0) std::memcpy(out, packed.data() + at, n);
        });
    copy_(t, value);
    at += n;
  }
}

// Every rank must hold the same parameters: compares a fingerprint of their shapes and dtypes
// with rank 0's.
void check_same_parameters(Communicator& comm, const std::vector<Tensor>& params) {
  // Count, elements, and a hash of every shape and dtype (unsigned: it wraps by design).
  std::uint64_t fingerprint[3] = {params.size(), 0, 0};
  for (const Tensor& p : params) {
    fingerprint[1] += static_cast<std::uint64_t>(p.numel());
    std::uint64_t h = static_cast<std::uint64_t>(p.dtype()) + 1;
    for (const std::int64_t d : p.shape()) h = h * 1000003u + static_cast<std::uint64_t>(d);
    fingerprint[2] = fingerprint[2] * 31u + h;
  }
  std::uint64_t root[3] = {fingerprint[0], fingerprint[1], fingerprint[2]};
  broadcast(comm, root, sizeof root, 0, "DistributedDataParallel: parameter check");
  REMAT_CHECK(root[0] == fingerprint[0] && root[1] == fingerprint[1] && root[2] == fingerprint[2],
              "DistributedDataParallel: rank {} has {} parameters of {} elements, rank 0 has {} "
              "of {} (or their shapes or dtypes differ): every rank must build the same model",
              comm.rank(), fingerprint[0], fingerprint[1], root[0], root[1]);
}

}  // namespace

struct DistributedDataParallel::State {
  struct Slot {
    Tensor param;
    std::size_t bucket = 0;
    std::size_t offset = 0;  // elements into the bucket
    bool ready = false;
  };
  struct Bucket {
    DType dtype = DType::Float32;
    std::size_t count = 0;
    // Constants of the pool, so the budget counts them: the gradients' home (each parameter's
    // gradient is a view of its slice) and, while the ring runs, its receive buffer.
    Tensor flat, scratch;
    std::vector<std::size_t> slots;
    std::size_t pending = 0;
    std::unique_ptr<RingAllreduce> ring;
  };

  Communicator* comm = nullptr;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  std::size_t next_launch = 0;
  bool in_backward = false;
  DataParallelStats stats;

  void on_gradient(std::size_t index, const std::weak_ptr<State>& self) {
    const auto t0 = Clock::now();
    if (!in_backward) start_pass(self);
    Slot& slot = slots[index];
    Bucket& b = buckets[slot.bucket];
    REMAT_CHECK(!slot.ready,
                "DistributedDataParallel: a parameter of shape {} received two gradients in one "
                "backward pass",
                slot.param.shape());
    Tensor g = contiguous(slot.param.grad());
    const std::size_t esize = element_size(b.dtype);
    std::memcpy(raw_bytes(b.flat) + slot.offset * esize, raw_bytes(g),
                static_cast<std::size_t>(g.numel()) * esize);
    slot.ready = true;
    --b.pending;
    // From now on the parameter's gradient lives in the bucket (the sum, until finish_pass
    // averages it), so the engine's cell can go.
    slot.param.set_grad(slice_of(slot));
    launch_ready();
    for (std::size_t k = 0; k < next_launch; ++k) buckets[k].ring->progress();
    stats.communication_seconds += seconds_since(t0);
  }

  void start_pass(const std::weak_ptr<State>& self) {
    in_backward = true;
    next_launch = 0;
    for (Slot& s : slots) s.ready = false;
    for (Bucket& b : buckets) {
      b.pending = b.slots.size();
      b.ring.reset();
    }
    queue_backward_callback([self] {
      if (auto state = self.lock()) state->finish_pass();
    });
  }

  // Buckets start in index order on every rank, so their collectives match.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch];
      b.scratch = zero_constant(RingAllreduce::scratch_elements(b.count, comm->size()), b.dtype);
      b.scratch.storage()->set_role(StorageRole::Gradient);
      b.ring = std::make_unique<RingAllreduce>(
          *comm, raw_bytes(b.flat), b.dtype, b.count,
          b.scratch.numel() > 0 ? raw_bytes(b.scratch) : nullptr,
          fmt::format("DistributedDataParallel: allreduce of gradient bucket {}", next_launch));
      ++next_launch;
    }
  }

  void finish_pass() {
    const auto t0 = Clock::now();
    in_backward = false;
    // A parameter the loss did not reach on this rank contributes zeros (it may be used on
    // another), so every rank reduces every bucket.
    for (Slot& s : slots) {
      if (s.ready) continue;
      Bucket& b = buckets[s.bucket];
      const std::size_t esize = element_size(b.dtype);
      std::memset(raw_bytes(b.flat) + s.offset * esize, 0,
                  static_cast<std::size_t>(s.param.numel()) * esize);
      s.ready = true;
      --b.pending;
    }
    launch_ready();
    const auto w0 = Clock::now();
    for (Bucket& b : buckets) {
      b.ring->wait();
      b.scratch = Tensor();  // only while the ring runs
    }
    stats.wait_seconds += seconds_since(w0);
    // The average, in the bucket; each parameter's gradient becomes a view of its slice (the
    // engine's gradient cell may be shared with other gradients of the pass, so it is never
    // written in place), so gradients cost no memory beyond the buckets between steps.
    const int ranks = comm->size();
    NoGradGuard no_grad;
    for (Bucket& b : buckets) {
      if (ranks > 1 && b.dtype == DType::Float32)
        average(reinterpret_cast<float*>(raw_bytes(b.flat)), b.count, ranks);
      if (ranks > 1 && b.dtype == DType::Float64)
        average(reinterpret_cast<double*>(raw_bytes(b.flat)), b.count, ranks);
    }
    for (Slot& s : slots) {
      s.param.set_grad(slice_of(s));
      stats.bytes_reduced += static_cast<std::int64_t>(s.param.meta().nbytes());
    }
    ++stats.reductions;
    stats.communication_seconds += seconds_since(t0);
  }

  // The slot's part of its bucket, shaped as the parameter.
  Tensor slice_of(const Slot& s) const {
    NoGradGuard no_grad;
    const auto n = s.param.numel();
    return view(narrow(buckets[s.bucket].flat, 0, static_cast<std::int64_t>(s.offset), n),
                s.param.shape());
  }

  template <class T>
  static void average(T* sum, std::size_t n, int ranks) {
    const T r = static_cast<T>(ranks);
    for (std::size_t i = 0; i < n; ++i) sum[i] /= r;
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 Communicator& comm, DataParallelOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  REMAT_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  REMAT_CHECK(options.bucket_bytes > 0, "DistributedDataParallel: bucket_bytes must be positive");
  state_->comm = &comm;
  std::vector<Tensor> params, trained;
  bool all_cpu = true;
  for (const auto& [name, p] : module_->named_parameters()) {
    // One process reduces nothing, so its parameters may live on any device.
    REMAT_CHECK(p.device().is_cpu() || comm.size() == 1,
                "DistributedDataParallel: parameter '{}' is on {}; gradients travel over MPI "
                "between CPU processes (a GPU backend, NCCL, is not built yet)",
                name, p.device());
    all_cpu = all_cpu && p.device().is_cpu();
    params.push_back(p);
    if (p.requires_grad()) trained.push_back(p);
  }
  if (!all_cpu) return;  // one process with device parameters: no buckets, no hooks
  check_same_parameters(comm, params);
  const auto t0 = Clock::now();
  broadcast_values(comm, params, "DistributedDataParallel: parameter broadcast");
  if (options.broadcast_buffers) broadcast_buffers();
  state_->stats.broadcast_seconds += seconds_since(t0);
  broadcast_buffers_each_forward_ = options.broadcast_buffers;

  // Buckets in reverse parameter order, one dtype each.
  std::map<DType, std::size_t> open;  // dtype -> index of the bucket being filled
  for (auto it = trained.rbegin(); it != trained.rend(); ++it) {
    const Tensor& p = *it;
    REMAT_CHECK(p.dtype() != DType::Int64,
                "DistributedDataParallel: an int64 parameter cannot have gradients");
    const std::size_t bytes = p.meta().nbytes();
    auto found = open.find(p.dtype());
    if (found == open.end() ||
        (state_->buckets[found->second].count * element_size(p.dtype()) + bytes >
             options.bucket_bytes &&
         !state_->buckets[found->second].slots.empty())) {
      state_->buckets.emplace_back().dtype = p.dtype();
      open[p.dtype()] = state_->buckets.size() - 1;
      found = open.find(p.dtype());
    }
    State::Bucket& b = state_->buckets[found->second];
    b.slots.push_back(state_->slots.size());
    state_->slots.push_back(
        {.param = p, .bucket = found->second, .offset = b.count, .ready = false});
    b.count += static_cast<std::size_t>(p.numel());
  }
  for (State::Bucket& b : state_->buckets) {
    b.flat = zero_constant(b.count, b.dtype);
    b.flat.storage()->set_role(StorageRole::Gradient);  // OutOfBudget's breakdown
  }
  const std::weak_ptr<State> weak = state_;
  for (std::size_t i = 0; i < state_->slots.size(); ++i) {
    register_post_accumulate_grad_hook(state_->slots[i].param, [weak, i](const Tensor&) {
      if (auto state = weak.lock()) state->on_gradient(i, weak);
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

Tensor DistributedDataParallel::forward(const Tensor& input) {
  if (broadcast_buffers_each_forward_ && module_->is_training()) {
    const auto t0 = Clock::now();
    broadcast_buffers();
    state_->stats.broadcast_seconds += seconds_since(t0);
  }
  return module_->forward(input);
}

void DistributedDataParallel::broadcast_buffers() {
  std::vector<Tensor> buffers = module_->buffers();
  if (buffers.empty() || state_->comm->size() == 1) return;
  broadcast_values(*state_->comm, buffers, "DistributedDataParallel: buffer broadcast");
}

Communicator& DistributedDataParallel::communicator() const {
  return *state_->comm;
}

std::size_t DistributedDataParallel::num_buckets() const {
  return state_->buckets.size();
}

std::vector<std::size_t> DistributedDataParallel::bucket_bytes() const {
  std::vector<std::size_t> out;
  for (const auto& b : state_->buckets) out.push_back(b.count * element_size(b.dtype));
  return out;
}

DataParallelStats DistributedDataParallel::stats() const {
  return state_->stats;
}

}  // namespace remat::dist
