// Whole-file CRC-32, the integrity data of dataset shards: index.json
// records each shard's CRC-32 and open_dataset compares it before libhdf5
// reads a byte of the file, so a damaged shard is one clear error and never
// reaches a libhdf5 bug on damaged input (docs/data-format.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace dlscale {

// A running CRC-32 (zlib's) of bytes seen in pieces: a copy computes the
// source's checksum from the very bytes it writes (io/staging.cpp).
class Crc32 {
 public:
  void update(const void* data, std::size_t size);
  std::uint32_t value() const { return crc_; }

 private:
  std::uint32_t crc_ = 0;
};

// CRC-32 of the file's bytes (zlib's, the same as Python's zlib.crc32),
// read in 1 MiB blocks; errors name the path.
std::uint32_t file_crc32(const std::string& path);
// The form index.json stores: 8 lowercase hexadecimal digits.
std::string crc32_text(std::uint32_t crc);
// The value of exactly 8 hexadecimal digits (either case); nullopt otherwise.
std::optional<std::uint32_t> parse_crc32(const std::string& text);

}  // namespace dlscale
