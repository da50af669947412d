// Saving and loading named tensors, modules and optimizers in one checksummed binary format
// (docs/serialization-format.md).  Saves are atomic; loads validate everything before changing
// anything and throw remat::Error naming the file and the problem.
// Usage: nn::save(*model, "model.rmt"); nn::save(opt, "opt.rmt");
//        nn::load(*model, "model.rmt"); nn::load(opt, "opt.rmt");
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace remat::nn {

// Writes the tensors (any dtype, shape and strides; written row-major, little-endian) to `path`
// atomically: into a temporary file in the same directory, flushed and fsync'ed, then renamed
// over `path`.  When anything fails the temporary file is removed, `path` is untouched and a
// remat::Error naming the file and the reason is thrown.
void save_state(const std::string& path, const std::map<std::string, Tensor>& tensors);
// Checks, before a long run, that save_state(path) could create its temporary file beside
// `path` and that `path` is not a directory; throws remat::Error naming the reason otherwise.
void check_save_path(const std::string& path);
// Reads a file written by save_state.  Each tensor is a new constant (not requiring grad).
// A truncated or corrupt file, a bad magic, an unknown version, absurd sizes or a checksum
// mismatch throw remat::Error naming the file and the problem.
std::map<std::string, Tensor> load_state(const std::string& path);

// A module's state_dict() (parameters and buffers by dotted name).
void save(const Module& module, const std::string& path);
// Loads into the module's existing tensors (copy_ under NoGradGuard, so optimizers holding the
// parameters see the new values).  The file must hold exactly the module's names with the same
// shapes and dtypes; otherwise remat::Error lists the missing, unexpected or mismatched entries
// and the module is unchanged.
void load(Module& module, const std::string& path);

// An optimizer's state_dict(): hyper-parameters, initial lr, step counts and state buffers.
void save(const Optimizer& optimizer, const std::string& path);
// Validates the whole file against the optimizer (type, groups, parameter shapes) before
// changing it; on error the optimizer is unchanged.
void load(Optimizer& optimizer, const std::string& path);

namespace detail {
// Test hook that simulates a failing or interrupted save: called at each stage of save_state
// ("open", "write" before each chunk, with the bytes written so far, "fsync", "rename"); an
// exception thrown from it aborts the save there, as a full disk or a crash would.
using SaveFaultHook = std::function<void(std::string_view stage, std::size_t bytes_written)>;
void set_save_fault_hook(SaveFaultHook hook);
}  // namespace detail

}  // namespace remat::nn
