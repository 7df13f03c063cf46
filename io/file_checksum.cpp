// file_crc32 and its text form. zlib is a dependency already (idx.cpp reads
// gzip), and its CRC-32 is what every tool has (Python's zlib.crc32,
// `gzip -l`, `crc32` of libarchive-zip-perl), so another writer of shards
// can compute it without dlscale.
#include "io/file_checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/core/error.h"

namespace dlscale {

void Crc32::update(const void* data, std::size_t size) {
  crc_ = static_cast<std::uint32_t>(crc32_z(crc_, static_cast<const Bytef*>(data), static_cast<z_size_t>(size)));
}

std::uint32_t file_crc32(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open " + path + ": " + std::strerror(errno));
  // The file is read once, front to back: tell the kernel so it reads ahead.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<unsigned char> block(std::size_t{1} << 20);
  Crc32 crc;
  while (true) {
    ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      fail("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    crc.update(block.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return crc.value();
}

std::string crc32_text(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(crc));
  return text;
}

std::optional<std::uint32_t> parse_crc32(const std::string& text) {
  if (text.size() != 8) return std::nullopt;
  std::uint32_t value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<std::uint32_t>(digit);
  }
  return value;
}

}  // namespace dlscale
