// Shared by the fuzz targets: the readers under test take file paths, so each input is written
// to a file private to this process first.  Usage: const std::string p = input_file(data, size,
// ".rmt");
#pragma once
#include <fmt/format.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace remat::fuzz {

inline std::string input_file(const std::uint8_t* data, std::size_t size, const std::string& ext) {
  const std::string path = fmt::format("/tmp/remat_fuzz_{}{}", ::getpid(), ext);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace remat::fuzz
