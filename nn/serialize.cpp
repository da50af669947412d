#include "nn/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <vector>

#include "autograd/grad_mode.h"
#include "ops/inplace.h"
#include "ops/op.h"
#include "ops/view.h"

namespace remat::nn {
namespace {

// Layout constants; docs/serialization-format.md is the reference.
constexpr char kMagic[8] = {'R', 'E', 'M', 'A', 'T', 'S', 'T', 'D'};
constexpr char kEndMagic[8] = {'R', 'E', 'M', 'A', 'T', 'E', 'N', 'D'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4;  // magic, version, flags, count, crc
constexpr std::size_t kFooterBytes = 8 + 4;              // end magic, crc of everything before
constexpr std::size_t kMaxNameBytes = 65535;
constexpr std::size_t kMaxDims = 32;
// The smallest record: a 1-byte name and a 0-dim tensor with 0 data bytes is impossible (a
// 0-dim tensor holds one element), but the bound only has to be a lower one.
constexpr std::size_t kMinRecordBytes = 4 + 1 + 1 + 1 + 2 + 8 + 4;
constexpr std::size_t kChunk = std::size_t{1} << 20;

std::mutex g_hook_mutex;
detail::SaveFaultHook g_hook;

void fault_point(std::string_view stage, std::size_t bytes) {
  detail::SaveFaultHook hook;
  {
    std::lock_guard lock(g_hook_mutex);
    hook = g_hook;
  }
  if (hook) hook(stage, bytes);
}

std::uint32_t crc_update(std::uint32_t crc, const void* data, std::size_t n) {
  auto p = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib's length is 32-bit
    const auto len = static_cast<uInt>(std::min<std::size_t>(n, std::numeric_limits<uInt>::max()));
    crc = static_cast<std::uint32_t>(crc32(crc, p, len));
    p += len;
    n -= len;
  }
  return crc;
}

std::uint8_t dtype_code(DType t) {
  return static_cast<std::uint8_t>(t);
}
bool dtype_from_code(std::uint8_t code, DType& out) {
  switch (code) {
    case 0:
      out = DType::Float32;
      return true;
    case 1:
      out = DType::Float64;
      return true;
    case 2:
      out = DType::Int64;
      return true;
  }
  return false;
}
static_assert(static_cast<int>(DType::Float32) == 0 && static_cast<int>(DType::Float64) == 1 &&
              static_cast<int>(DType::Int64) == 2);

// Reverses each element's bytes in place; only big-endian hosts need it.
void swap_elements(unsigned char* data, std::size_t nbytes, std::size_t elem) {
  for (std::size_t i = 0; i + elem <= nbytes; i += elem) std::reverse(data + i, data + i + elem);
}

template <class T>
void put_le(std::vector<unsigned char>& out, T value) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<unsigned char>((u >> (8 * i)) & 0xff));
}

template <class T>
T get_le(const unsigned char* p) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(p[i]) << (8 * i);
  return static_cast<T>(u);
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// ".NAME.tmp." : the prefix of every temporary file a save of NAME creates (then PID.N).
std::string temp_prefix(const std::filesystem::path& target) {
  return "." + target.filename().string() + ".tmp.";
}

// Removes temporaries of `target` left by saves whose process was killed: those named
// .NAME.tmp.PID.N whose PID is not a running process.  Temporaries of live processes (this
// one included) may still be written and stay.
void remove_stale_temporaries(const std::string& dir, const std::filesystem::path& target) {
  const std::string prefix = temp_prefix(target);
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    long long pid = 0, n = 0;
    const auto dot = rest.find('.');
    if (dot == std::string_view::npos) continue;
    const auto p = std::from_chars(rest.data(), rest.data() + dot, pid);
    const auto q = std::from_chars(rest.data() + dot + 1, rest.data() + rest.size(), n);
    if (p.ec != std::errc() || p.ptr != rest.data() + dot || q.ec != std::errc() ||
        q.ptr != rest.data() + rest.size())
      continue;
    if (pid <= 0 || pid > std::numeric_limits<pid_t>::max() || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;  // alive, or not ours to judge
    std::error_code ignored;
    std::filesystem::remove(it->path(), ignored);
  }
}

// ------------------------------------------------------------------------------------- writing

// A temporary file beside the target, removed unless committed by rename.
class AtomicWriter {
 public:
  explicit AtomicWriter(const std::string& path) : path_(path) {
    const std::filesystem::path target(path);
    std::error_code ec;
    REMAT_CHECK(!target.filename().empty() && !std::filesystem::is_directory(target, ec),
                "'{}' names a directory, not a file", path);
    const auto dir = target.parent_path();
    dir_ = dir.empty() ? "." : dir.string();
    remove_stale_temporaries(dir_, target);
    static std::atomic<std::uint64_t> counter{0};
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      tmp_ = (std::filesystem::path(dir_) /
              fmt::format("{}{}.{}", temp_prefix(target), ::getpid(), counter.fetch_add(1)))
                 .string();
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) REMAT_THROW("cannot create a temporary file in '{}': {}", dir_, errno_text(errno));
    file_ = ::fdopen(fd_, "wb");
    if (!file_) {
      const int err = errno;
      ::close(fd_);
      ::unlink(tmp_.c_str());
      REMAT_THROW("cannot open '{}' for writing: {}", tmp_, errno_text(err));
    }
  }
  ~AtomicWriter() {
    if (committed_) return;
    if (file_) std::fclose(file_);
    ::unlink(tmp_.c_str());
  }
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* data, std::size_t n) {
    auto p = static_cast<const unsigned char*>(data);
    crc_ = crc_update(crc_, p, n);
    while (n > 0) {
      const std::size_t len = std::min(n, kChunk);
      fault_point("write", written_);
      if (std::fwrite(p, 1, len, file_) != len)
        REMAT_THROW("write to '{}' failed: {}", tmp_, errno_text(errno));
      written_ += len;
      p += len;
      n -= len;
    }
  }
  void write(const std::vector<unsigned char>& bytes) { write(bytes.data(), bytes.size()); }
  std::uint32_t crc() const { return crc_; }

  void commit() {
    if (std::fflush(file_) != 0) REMAT_THROW("flushing '{}' failed: {}", tmp_, errno_text(errno));
    fault_point("fsync", written_);
    if (::fsync(::fileno(file_)) != 0)
      REMAT_THROW("fsync of '{}' failed: {}", tmp_, errno_text(errno));
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) REMAT_THROW("closing '{}' failed: {}", tmp_, errno_text(errno));
    fault_point("rename", written_);
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      REMAT_THROW("renaming '{}' over '{}' failed: {}", tmp_, path_, errno_text(errno));
    committed_ = true;
    // Make the rename itself durable; the new file is complete either way, so a failure here
    // is not reported.
    const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_, dir_, tmp_;
  int fd_ = -1;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
  std::size_t written_ = 0;
  std::uint32_t crc_ = 0;
};

void write_record(AtomicWriter& out, const std::string& name, const Tensor& t) {
  const Tensor c = contiguous(t);
  const std::size_t nbytes = c.meta().nbytes();
  std::vector<unsigned char> head;
  put_le<std::uint32_t>(head, static_cast<std::uint32_t>(name.size()));
  head.insert(head.end(), name.begin(), name.end());
  head.push_back(dtype_code(c.dtype()));
  head.push_back(static_cast<unsigned char>(c.dim()));
  put_le<std::uint16_t>(head, 0);
  for (std::int64_t d : c.shape()) put_le<std::int64_t>(head, d);
  put_le<std::uint64_t>(head, nbytes);
  std::uint32_t crc = crc_update(0, head.data(), head.size());
  out.write(head);
  if (nbytes > 0) {
    // No op runs until the bytes are written, so the pointer stays valid.
    const void* data = nullptr;
    switch (c.dtype()) {
      case DType::Float32:
        data = c.data_ptr<float>();
        break;
      case DType::Float64:
        data = c.data_ptr<double>();
        break;
      case DType::Int64:
        data = c.data_ptr<std::int64_t>();
        break;
    }
    if constexpr (std::endian::native == std::endian::little) {
      crc = crc_update(crc, data, nbytes);
      out.write(data, nbytes);
    } else {
      std::vector<unsigned char> le(static_cast<const unsigned char*>(data),
                                    static_cast<const unsigned char*>(data) + nbytes);
      swap_elements(le.data(), nbytes, element_size(c.dtype()));
      crc = crc_update(crc, le.data(), nbytes);
      out.write(le);
    }
  }
  std::vector<unsigned char> tail;
  put_le<std::uint32_t>(tail, crc);
  out.write(tail);
}

// ------------------------------------------------------------------------------------- reading

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) fail("cannot open: {}", errno_text(errno));
    struct stat st {};
    if (::fstat(::fileno(file_), &st) != 0) fail("cannot stat: {}", errno_text(errno));
    if (!S_ISREG(st.st_mode)) fail("not a regular file");
    size_ = static_cast<std::size_t>(st.st_size);
  }
  ~Reader() {
    if (file_) std::fclose(file_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    REMAT_THROW("load_state('{}'): {}", path_, fmt::format(f, std::forward<Args>(args)...));
  }

  std::size_t offset() const { return offset_; }
  std::size_t remaining() const { return size_ - offset_; }
  std::size_t size() const { return size_; }

  // Reads n bytes or fails naming what was being read and where the file ends.
  void read(void* dst, std::size_t n, std::string_view what) {
    if (n > remaining())
      fail("truncated file: {} needs {} bytes at offset {}, but the file ends at {}", what, n,
           offset_, size_);
    if (n > 0 && std::fread(dst, 1, n, file_) != n)
      fail("read error at offset {} ({}): {}", offset_, what, errno_text(errno));
    crc_ = crc_update(crc_, dst, n);
    record_crc_ = crc_update(record_crc_, dst, n);
    offset_ += n;
  }
  std::vector<unsigned char> read(std::size_t n, std::string_view what) {
    if (n > remaining())
      fail("truncated file: {} needs {} bytes at offset {}, but the file ends at {}", what, n,
           offset_, size_);
    std::vector<unsigned char> buf(n);
    read(buf.data(), n, what);
    return buf;
  }
  std::uint32_t crc() const { return crc_; }
  void begin_record() { record_crc_ = 0; }
  std::uint32_t record_crc() const { return record_crc_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::size_t size_ = 0;
  std::size_t offset_ = 0;
  std::uint32_t crc_ = 0;         // of everything read so far
  std::uint32_t record_crc_ = 0;  // of the current record so far
};

std::string list_names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 8;
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kShown) s += fmt::format(" and {} more", names.size() - kShown);
  return s;
}

}  // namespace

namespace detail {
void set_save_fault_hook(SaveFaultHook hook) {
  std::lock_guard lock(g_hook_mutex);
  g_hook = std::move(hook);
}
}  // namespace detail

void save_state(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  for (const auto& [name, t] : tensors) {
    REMAT_CHECK(!name.empty() && name.size() <= kMaxNameBytes,
                "save_state('{}'): tensor names must have 1 to {} bytes, got one of {}", path,
                kMaxNameBytes, name.size());
    REMAT_CHECK(t.defined(), "save_state('{}'): tensor '{}' is undefined", path, name);
    REMAT_CHECK(static_cast<std::size_t>(t.dim()) <= kMaxDims,
                "save_state('{}'): tensor '{}' has {} dims (at most {})", path, name, t.dim(),
                kMaxDims);
    REMAT_CHECK(t.device().is_cpu(),
                "save_state('{}'): tensor '{}' is on {}; only CPU tensors can be saved", path, name,
                t.device());
  }
  try {
    NoGradGuard no_grad;
    AtomicWriter out(path);
    fault_point("open", 0);
    std::vector<unsigned char> header(kMagic, kMagic + 8);
    put_le<std::uint32_t>(header, kVersion);
    put_le<std::uint32_t>(header, 0);  // flags
    put_le<std::uint64_t>(header, tensors.size());
    put_le<std::uint32_t>(header, crc_update(0, header.data(), header.size()));
    out.write(header);
    for (const auto& [name, t] : tensors) write_record(out, name, t);
    const std::uint32_t file_crc = out.crc();  // of everything before the footer
    std::vector<unsigned char> footer(kEndMagic, kEndMagic + 8);
    put_le<std::uint32_t>(footer, file_crc);
    out.write(footer);
    out.commit();
  } catch (const std::exception& e) {
    REMAT_THROW("save_state('{}'): {}; the previous file, if any, is unchanged", path, e.what());
  }
}

std::map<std::string, Tensor> load_state(const std::string& path) {
  Reader in(path);
  unsigned char header[kHeaderBytes];
  const std::size_t head = std::min<std::size_t>(in.size(), 8);
  in.read(header, head, "the magic");
  if (std::memcmp(header, kMagic, head) != 0) in.fail("not a remat state file (bad magic)");
  if (head < 8) in.fail("truncated file: {} bytes, shorter than the header", in.size());
  // The version comes first: a later version may lay out the rest of the header differently.
  in.read(header + 8, 4, "the format version");
  const auto version = get_le<std::uint32_t>(header + 8);
  if (version != kVersion)
    in.fail("unsupported format version {} (this build reads version {})", version, kVersion);
  in.read(header + 12, kHeaderBytes - 12, "the header");
  const auto flags = get_le<std::uint32_t>(header + 12);
  const auto count = get_le<std::uint64_t>(header + 16);
  const auto header_crc = get_le<std::uint32_t>(header + 24);
  if (crc_update(0, header, 24) != header_crc) in.fail("header checksum mismatch (corrupt header)");
  if (flags != 0) in.fail("unknown flags {:#x} in the header", flags);
  if (in.remaining() < kFooterBytes || count > (in.remaining() - kFooterBytes) / kMinRecordBytes)
    in.fail(
        "the header announces {} tensors, impossible in a file of {} bytes (truncated or corrupt)",
        count, in.size());

  std::map<std::string, Tensor> out;
  for (std::uint64_t r = 0; r < count; ++r) {
    const std::size_t start = in.offset();
    in.begin_record();
    std::string what = fmt::format("record {}", r);
    unsigned char b4[4];
    in.read(b4, 4, what + " name length");
    const auto name_len = get_le<std::uint32_t>(b4);
    if (name_len == 0 || name_len > kMaxNameBytes)
      in.fail("{} at offset {}: name length {} out of range [1, {}] (corrupt)", what, start,
              name_len, kMaxNameBytes);
    auto name_bytes = in.read(name_len, what + " name");
    const std::string name(name_bytes.begin(), name_bytes.end());
    what = fmt::format("record {} ('{}')", r, name);
    unsigned char meta[4];
    in.read(meta, 4, what + " dtype and rank");
    DType dtype{};
    if (!dtype_from_code(meta[0], dtype))
      in.fail("{}: unknown dtype code {} (corrupt)", what, meta[0]);
    const std::size_t ndim = meta[1];
    if (ndim > kMaxDims) in.fail("{}: {} dims, more than {} (corrupt)", what, ndim, kMaxDims);
    if (get_le<std::uint16_t>(meta + 2) != 0)
      in.fail("{}: reserved bytes are not zero (corrupt)", what);
    Shape shape(ndim);
    std::uint64_t numel = 1;
    bool overflow = false;
    for (std::size_t d = 0; d < ndim; ++d) {
      unsigned char b8[8];
      in.read(b8, 8, what + " shape");
      shape[d] = get_le<std::int64_t>(b8);
      if (shape[d] < 0)
        in.fail("{}: negative dimension {} in shape {} (corrupt)", what, shape[d], shape);
      const auto dim = static_cast<std::uint64_t>(shape[d]);
      if (dim != 0 && numel > std::numeric_limits<std::uint64_t>::max() / dim) overflow = true;
      numel *= dim;
    }
    unsigned char b8[8];
    in.read(b8, 8, what + " byte length");
    const auto nbytes = get_le<std::uint64_t>(b8);
    const std::size_t elem = element_size(dtype);
    if (overflow || numel > std::numeric_limits<std::uint64_t>::max() / elem ||
        numel * elem != nbytes)
      in.fail("{}: byte length {} does not match shape {} of {} (corrupt)", what, nbytes, shape,
              dtype);
    // Strides multiply every dimension with zeros counted as one: a 0-element shape of huge
    // dimensions matches its 0 bytes but has no 64-bit strides.
    if (!shape_fits(shape))
      in.fail("{}: shape {} is too large for 64-bit strides (corrupt)", what, shape);
    if (nbytes > in.remaining())
      in.fail("truncated file: {} needs {} bytes of data at offset {}, but the file ends at {}",
              what, nbytes, in.offset(), in.size());
    auto data = in.read(static_cast<std::size_t>(nbytes), what + " data");
    // The record's checksum covers its bytes from the name length through the data.
    const std::uint32_t record_crc = in.record_crc();
    in.read(b4, 4, what + " checksum");
    const auto stored = get_le<std::uint32_t>(b4);
    if (record_crc != stored)
      in.fail("{}: checksum mismatch (stored {:#010x}, computed {:#010x}): the file is corrupt",
              what, stored, record_crc);
    if (out.count(name)) in.fail("{}: the name appears twice (corrupt)", what);
    if constexpr (std::endian::native != std::endian::little)
      swap_elements(data.data(), data.size(), elem);
    out.emplace(name, constant_from_bytes(data.data(),
                                          TensorMeta::contiguous(shape, dtype, Device::cpu())));
  }

  unsigned char footer[kFooterBytes];
  const std::uint32_t file_crc = in.crc();
  in.read(footer, 8, "the end marker");
  if (std::memcmp(footer, kEndMagic, 8) != 0)
    in.fail("bad end marker after {} tensors (corrupt)", count);
  in.read(footer + 8, 4, "the file checksum");
  if (get_le<std::uint32_t>(footer + 8) != file_crc) in.fail("file checksum mismatch (corrupt)");
  if (in.remaining() != 0) in.fail("{} unexpected bytes after the end marker", in.remaining());
  return out;
}

void check_save_path(const std::string& path) {
  try {
    AtomicWriter probe(path);  // removed again when it goes out of scope
  } catch (const std::exception& e) {
    REMAT_THROW("cannot save to '{}': {}", path, e.what());
  }
}

void save(const Module& module, const std::string& path) {
  save_state(path, module.state_dict());
}

void load(Module& module, const std::string& path) {
  auto loaded = load_state(path);
  const auto target = module.state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : target) {
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      missing.push_back(fmt::format("'{}'", name));
    } else if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
      mismatched.push_back(fmt::format("'{}' (file: {} {}, module: {} {})", name,
                                       it->second.dtype(), it->second.shape(), t.dtype(),
                                       t.shape()));
    }
  }
  for (const auto& [name, t] : loaded)
    if (!target.count(name)) unexpected.push_back(fmt::format("'{}'", name));
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string problems;
    if (!missing.empty()) problems += fmt::format("; missing {}", list_names(missing));
    if (!unexpected.empty()) problems += fmt::format("; unexpected {}", list_names(unexpected));
    if (!mismatched.empty())
      problems += fmt::format("; shape or dtype mismatch {}", list_names(mismatched));
    REMAT_THROW("load('{}') into {}: the file does not match the module{}; the module is unchanged",
                path, module.type_name(), problems);
  }
  NoGradGuard no_grad;
  for (const auto& [name, t] : target) copy_(t, loaded.at(name));
}

void save(const Optimizer& optimizer, const std::string& path) {
  save_state(path, optimizer.state_dict());
}

void load(Optimizer& optimizer, const std::string& path) {
  auto loaded = load_state(path);
  try {
    optimizer.load_state_dict(loaded);
  } catch (const Error& e) {
    REMAT_THROW("load('{}') into optimizer {}: {}; the optimizer is unchanged", path,
                optimizer.name(), e.what());
  }
}

}  // namespace remat::nn
