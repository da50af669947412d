// Whether op calls record autograd nodes on this thread.  Usage: { NoGradGuard g; ... }
#pragma once

namespace remat {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Disables recording for its scope (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Sets grad mode to `enabled` for its scope; the engine uses it for create_graph.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace remat
