// The one dispatch path (DESIGN.md section 4): pin inputs, infer outputs, allocate them in the
// pool, run the device kernel on raw resident buffers, register the record, unpin, and record
// an autograd node.  Inside a checkpoint it also reports each call to the checkpoint machinery
// (autograd/checkpoint_hooks.h), which counts calls and fills the saved tensors a replay makes.
#include <array>
#include <chrono>
#include <cstring>

#include "autograd/checkpoint_hooks.h"
#include "autograd/grad_mode.h"
#include "autograd/meta.h"
#include "autograd/placeholder.h"
#include "core/cuda.h"
#include "core/recycling_allocator.h"
#include "dtr/pool.h"
#include "ops/op.h"
#include "ops/profiler.h"

namespace remat {

void Op::cuda(std::span<const KernelArg>, std::span<const KernelArg>) const {
  REMAT_THROW("{}: no CUDA kernel in this build", name());
}

std::vector<Tensor> Op::backward(const BackwardContext&) const {
  REMAT_THROW(
      "op {} has no derivative (its Op does not override backward), so nothing computed through it "
      "can "
      "be differentiated",
      name());
}

double Op::flops(std::span<const TensorMeta>, std::span<const TensorMeta> outputs) const {
  double n = 0;
  for (const auto& m : outputs) n += static_cast<double>(m.numel());
  return n;
}

void Op::execute(std::span<const KernelArg> inputs, std::span<const KernelArg> outputs) const {
  const Device d = outputs.empty() ? inputs[0].meta->device : outputs[0].meta->device;
  if (d.is_cpu()) {
    cpu(inputs, outputs);
    return;
  }
  cuda(inputs, outputs);
  // Kernels run asynchronously: the profiler's time of a call is its kernels' only if it waits.
  if (OpProfiler::enabled()) detail::cuda_memory::synchronize();
}

namespace {

Cell& cell_of(const Tensor& t) {
  return static_cast<Cell&>(*t.storage());
}

// The cell a kernel reads input i from; a placeholder (a checkpoint replay's skipped value)
// has none.
Cell& kernel_cell(std::string_view op, std::size_t i, const Tensor& t) {
  if (t.storage()->is_placeholder()) detail::throw_placeholder_input(op, i, t);
  return static_cast<Cell&>(*t.storage());
}

Tensor wrap(TensorMeta meta, std::shared_ptr<Storage> storage) {
  auto impl = std::allocate_shared<TensorImpl>(RecyclingAllocator<TensorImpl>());
  impl->meta = std::move(meta);
  impl->storage = std::move(storage);
  return Tensor(std::move(impl));
}

// Per-call scratch arrays of a few elements live on the stack: the common call takes no heap.
template <class T, std::size_t N>
class Scratch {
 public:
  explicit Scratch(std::size_t n) : n_(n) {
    if (n > N) heap_.resize(n);
  }
  T* data() { return n_ > N ? heap_.data() : inline_.data(); }
  T& operator[](std::size_t i) { return data()[i]; }
  std::span<const T> span() { return {data(), n_}; }

 private:
  std::size_t n_;
  std::array<T, N> inline_{};
  std::vector<T> heap_;
};

// Unpins on every exit, so a kernel that throws leaves the pool consistent.  Each cell is
// pinned by its own device's pool (a device copy reads a cell of another pool).
struct PinGuard {
  Scratch<Cell*, 8> cells;
  std::size_t count = 0;
  explicit PinGuard(std::size_t capacity) : cells(capacity) {}
  void pin(Cell& c, std::string_view op) {
    c.pool().pin(c, op);
    cells[count++] = &c;
  }
  void add(Cell* c) { cells[count++] = c; }  // pinned already
  ~PinGuard() {
    for (std::size_t i = 0; i < count; ++i) cells[i]->pool().unpin(*cells[i]);
  }
};

// An op without a derivative still records a node, so differentiating through it is an error
// naming it rather than a silently missing term; only a zero derivative records nothing.
bool will_record_autograd(const Op& op, std::span<const Tensor> inputs) {
  if (!GradMode::is_enabled() || op.zero_derivative()) return false;
  for (const auto& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

// Called only when will_record_autograd said so.
void record_autograd(const std::shared_ptr<const Op>& op, std::span<const Tensor> inputs,
                     std::span<const TensorMeta> in_metas, std::span<const Tensor> outputs) {
  EdgeList edges;
  edges.reserve(inputs.size());
  for (const auto& t : inputs) edges.push_back(is_floating(t.dtype()) ? gradient_edge(t) : Edge{});
  MetaList metas;
  metas.reserve(outputs.size());
  for (const auto& t : outputs) metas.push_back(t.meta());
  auto node = std::allocate_shared<OpNode>(RecyclingAllocator<OpNode>(), op, std::move(edges),
                                           in_metas, std::move(metas));
  const SaveSpec s = op->saves();
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (i < 32 && (s.inputs >> i & 1u)) node->save_input(i, inputs[i]);
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (i < 32 && (s.outputs >> i & 1u)) node->save_output(i, outputs[i]);
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (is_floating(outputs[i].dtype()))
      set_history(outputs[i], node, static_cast<std::uint32_t>(i));
}

}  // namespace

void install_engine_ops();

void call_into(const std::shared_ptr<const Op>& op, std::span<const Tensor> inputs,
               SmallVector<Tensor, 2>& outputs) {
  static const bool hooks = (install_engine_ops(), true);
  (void)hooks;
  // The record's own list type: it moves in whole, with no copy and no heap for two inputs.
  decltype(Record::input_metas) in_metas;
  in_metas.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    REMAT_CHECK(inputs[i].defined(), "{}: input {} is an undefined tensor", op->name(), i);
    REMAT_CHECK(i == 0 || inputs[i].device() == inputs[0].device(),
                "{}: inputs are on different devices ({} and {})", op->name(), inputs[0].device(),
                inputs[i].device());
    in_metas.push_back(inputs[i].meta());
  }
  std::vector<TensorMeta> out_metas = op->infer(in_metas);
  const bool needs_node = will_record_autograd(*op, inputs);  // decided once per call
  if (!op->is_view()) {
    // A kernel writes its outputs as fresh, contiguous buffers sized by nbytes(), whatever
    // strides or offset infer returned (an input's metadata, say, which may be a view's).
    for (auto& m : out_metas)
      if (m.offset != 0 || !m.is_contiguous())
        m = TensorMeta::contiguous(std::move(m.shape), m.dtype, m.device);
  }

  REMAT_CHECK(!out_metas.empty() || !inputs.empty(), "{}: an op call without inputs or outputs",
              op->name());
  REMAT_CHECK(!op->is_view() || !inputs.empty(), "{}: a view op takes an input", op->name());
  outputs.clear();
  outputs.reserve(out_metas.size());
  double seconds = 0;
  if (op->is_view()) {
    for (auto& m : out_metas) outputs.push_back(wrap(std::move(m), inputs[0].storage()));
  } else {
    const Device device = out_metas.empty() ? inputs[0].device() : out_metas[0].device;
    Pool& pool = Pool::of(device);
    PinGuard pins(inputs.size());
    Scratch<KernelArg, 8> in_args(inputs.size()), out_args(out_metas.size());
    // With swapping, evicted inputs are rebuilt and pinned first: the resident ones, unpinned
    // meanwhile, may move to host memory instead of sitting beside the rebuild.
    const bool rebuild_first = pool.config().swap && inputs.size() <= 64;
    std::uint64_t pinned_first = 0;  // inputs pinned by the first pass
    for (int pass = rebuild_first ? 0 : 1; pass < 2; ++pass) {
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        Cell& c = kernel_cell(op->name(), i, inputs[i]);
        if (pass == 0 && c.has_value()) continue;
        if (pass == 1 && rebuild_first && (pinned_first >> i & 1u)) continue;
        pins.pin(c, op->name());
        in_args[i] = {&in_metas[i], c.buffer()};
        if (pass == 0) pinned_first |= std::uint64_t{1} << i;
      }
    }
    SmallVector<std::shared_ptr<Cell>, 2> out_cells;
    out_cells.reserve(out_metas.size());
    for (std::size_t i = 0; i < out_metas.size(); ++i) {
      out_cells.push_back(pool.new_output(out_metas[i].nbytes(), op->name()));
      out_args[i] = {&out_metas[i], out_cells.back()->buffer()};
    }
    if (detail::checkpoint_active()) detail::on_kernel_inputs(inputs);
    const bool profiling = OpProfiler::enabled();
    const std::int64_t faults = profiling ? OpProfiler::minor_faults() : 0;
    const auto t0 = std::chrono::steady_clock::now();
    op->execute(in_args.span(), out_args.span());
    const auto t1 = std::chrono::steady_clock::now();
    seconds = std::chrono::duration<double>(t1 - t0).count();
    if (profiling)
      OpProfiler::add(op->name(), seconds, op->flops(in_metas, out_metas),
                      OpProfiler::minor_faults() - faults);

    // A device copy reads a cell of another pool, which this pool cannot rematerialize: its
    // outputs stay constants of their pool, as loaded data does.
    if (op->makes_constants()) {
      for (std::size_t i = 0; i < out_metas.size(); ++i)
        outputs.push_back(wrap(out_metas[i], pool.handle(out_cells[i])));
      if (detail::checkpoint_active()) detail::on_op_outputs(outputs, false, seconds);
      if (needs_node) record_autograd(op, inputs, in_metas, outputs);
      return;
    }
    auto record = std::allocate_shared<Record>(RecyclingAllocator<Record>());
    record->producer = op;
    record->id = pool.next_record_id();
    record->seconds = seconds;
    record->flops = op->flops(in_metas, out_metas);
    for (const auto& m : in_metas) record->bytes += static_cast<double>(m.nbytes());
    for (const auto& m : out_metas) record->bytes += static_cast<double>(m.nbytes());
    record->inputs.reserve(inputs.size());
    for (const auto& t : inputs)
      record->inputs.push_back(std::static_pointer_cast<Cell>(cell_of(t).shared_from_this()));
    // The autograd node needs the input metadata too; without one the record takes it.
    if (needs_node)
      record->input_metas = in_metas;
    else
      record->input_metas = std::move(in_metas);
    record->outputs.reserve(out_cells.size());
    for (const auto& c : out_cells) record->outputs.push_back(c);
    for (std::size_t i = 0; i < out_metas.size(); ++i)
      outputs.push_back(wrap(out_metas[i], pool.handle(out_cells[i])));
    record->output_metas.assign(std::make_move_iterator(out_metas.begin()),
                                std::make_move_iterator(out_metas.end()));
    pool.record_call(record, out_cells);
  }
  if (detail::checkpoint_active()) detail::on_op_outputs(outputs, op->is_view(), seconds);
  if (needs_node) record_autograd(op, inputs, in_metas, outputs);
}

std::vector<Tensor> call(const std::shared_ptr<const Op>& op, std::span<const Tensor> inputs) {
  SmallVector<Tensor, 2> outputs;
  call_into(op, inputs, outputs);
  return {std::make_move_iterator(outputs.begin()), std::make_move_iterator(outputs.end())};
}

Tensor call1(const std::shared_ptr<const Op>& op, std::span<const Tensor> inputs) {
  SmallVector<Tensor, 2> outputs;
  call_into(op, inputs, outputs);
  return std::move(outputs.at(0));
}

void call_inplace(std::shared_ptr<const Op> op, const Tensor& self, std::vector<Tensor> others) {
  call_inplace(op, std::span<const Tensor>(&self, 1), others);
}

void call_inplace(const std::shared_ptr<const Op>& op, std::span<const Tensor> targets,
                  std::span<const Tensor> others) {
  REMAT_CHECK(!targets.empty(), "{}: an in-place call without a tensor to write", op->name());
  for (std::size_t t = 0; t < targets.size(); ++t)
    REMAT_CHECK(targets[t].defined(), "{}: {} is an undefined tensor", op->name(),
                t == 0 ? std::string("self") : fmt::format("written tensor {}", t));
  const Tensor& self = targets[0];
  if (GradMode::is_enabled()) {
    bool any = false;
    for (const auto& t : targets) any = any || t.requires_grad();
    for (const auto& t : others) any = any || (t.defined() && t.requires_grad());
    REMAT_CHECK(
        !any,
        "{}: in-place ops are not differentiable; a tensor of shape {} taking part requires "
        "grad (use the out-of-place op, or run the update under NoGradGuard)",
        op->name(), self.shape());
  }
  const std::size_t nt = targets.size(), n_in = nt + others.size();
  std::vector<TensorMeta> in_metas;
  in_metas.reserve(n_in);
  for (const auto& t : targets) {
    REMAT_CHECK(t.device() == self.device(), "{}: arguments are on different devices ({} and {})",
                op->name(), self.device(), t.device());
    in_metas.push_back(t.meta());
  }
  for (std::size_t i = 0; i < others.size(); ++i) {
    REMAT_CHECK(others[i].defined(), "{}: argument {} is an undefined tensor", op->name(), i + 1);
    REMAT_CHECK(others[i].device() == self.device(),
                "{}: arguments are on different devices ({} and {})", op->name(), self.device(),
                others[i].device());
    in_metas.push_back(others[i].meta());
  }
  op->infer(in_metas);  // validates shapes and dtypes; the outputs are the targets' own views
  Scratch<Cell*, 8> written(nt);
  for (std::size_t t = 0; t < nt; ++t) {
    written[t] = &kernel_cell(op->name(), t, targets[t]);
    for (std::size_t u = 0; u < t; ++u)
      REMAT_CHECK(written[u] != written[t], "{}: written tensors {} and {} share their storage",
                  op->name(), u, t);
  }
  for (std::size_t i = 0; i < others.size(); ++i) kernel_cell(op->name(), nt + i, others[i]);
  // A checkpoint's replay does not repeat the forward's side effects.
  if (detail::checkpoint_active()) {
    for (const auto& t : targets)
      if (detail::skip_inplace(t)) return;
  }

  Pool& pool = Pool::of(self.device());
  // Declared before the guard that unpins them: locals die in reverse order, so the cells the
  // guard points into must outlive the guard.
  std::vector<std::shared_ptr<Cell>> olds(nt);
  PinGuard pins(n_in);
  for (const auto& t : others) pins.pin(cell_of(t), op->name());
  // Targets pinned by begin_write, unpinned by finish_write (or here when the call fails).
  struct Unpin {
    Pool& pool;
    std::span<Cell*> cells;
    std::size_t active = 0;
    ~Unpin() {
      for (std::size_t t = 0; t < active; ++t) pool.unpin(*cells[t]);
    }
  } target_pins{pool, std::span<Cell*>(written.data(), nt)};
  for (std::size_t t = 0; t < nt; ++t) {
    Cell& target = *written[t];
    // Every byte is rewritten from inputs that include the old value: the kernel can read the
    // old cell and write a fresh buffer instead of copying first.
    const Tensor& v = targets[t];
    const bool overwrite =
        v.offset() == 0 && v.is_contiguous() && v.meta().nbytes() == target.nbytes();
    try {
      olds[t] = pool.begin_write(target, overwrite, op->name());
    } catch (...) {
      // An earlier target may already have moved its value to a new buffer that nothing wrote:
      // put the value back (its old cell, with the same bytes, keeps the record).
      for (std::size_t u = 0; u < t; ++u)
        if (olds[u]) std::memcpy(written[u]->buffer(), olds[u]->buffer(), written[u]->nbytes());
      throw;
    }
    target_pins.active = t + 1;
    if (olds[t]) pins.add(olds[t].get());
  }

  Scratch<KernelArg, 8> in_args(n_in), out_args(nt);
  for (std::size_t t = 0; t < nt; ++t) {
    in_args[t] = {&in_metas[t], olds[t] ? olds[t]->buffer() : written[t]->buffer()};
    out_args[t] = {&in_metas[t], written[t]->buffer()};
  }
  for (std::size_t i = 0; i < others.size(); ++i)
    in_args[nt + i] = {&in_metas[nt + i], cell_of(others[i]).buffer()};
  const bool profiling = OpProfiler::enabled();
  const std::int64_t faults = profiling ? OpProfiler::minor_faults() : 0;
  const auto t0 = std::chrono::steady_clock::now();
  op->execute(in_args.span(), out_args.span());
  Record mutation;
  mutation.producer = op;
  mutation.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (profiling)
    OpProfiler::add(op->name(), mutation.seconds, 0, OpProfiler::minor_faults() - faults);
  for (std::size_t t = 0; t < nt; ++t)
    mutation.inputs.push_back(std::static_pointer_cast<Cell>(written[t]->shared_from_this()));
  for (const auto& t : others)
    mutation.inputs.push_back(std::static_pointer_cast<Cell>(cell_of(t).shared_from_this()));
  target_pins.active = 0;
  // The stats and the trace see one mutation per written tensor; the time counts once.
  for (std::size_t t = 0; t < nt; ++t) {
    pool.finish_write(*written[t], mutation);
    mutation.seconds = 0;
  }
}

Tensor constant_from_bytes(const void* data, TensorMeta meta) {
  Pool& pool = Pool::of(meta.device);
  auto cell = pool.new_constant(meta.nbytes());
  if (meta.nbytes() > 0) {
    if (meta.device.is_cpu())
      std::memcpy(cell->buffer(), data, meta.nbytes());
    else
      detail::cuda_memory::copy_from_host(cell->buffer(), data, meta.nbytes());
  }
  meta.strides = contiguous_strides(meta.shape);
  meta.offset = 0;
  Tensor t = wrap(std::move(meta), pool.handle(cell));
  if (detail::checkpoint_active()) detail::on_op_outputs(std::span<const Tensor>(&t, 1), false, 0);
  return t;
}

}  // namespace remat
