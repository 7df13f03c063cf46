// Plain text → a byte-level token dataset (docs/data-format.md, "Token
// datasets"): the files' bytes, concatenated in the order given, are cut
// into windows of T token ids (the vocabulary is the 256 byte values), and
// each window's targets are the same positions shifted by one: the byte
// that follows each position.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/shard_writer.h"

namespace dlscale {

inline constexpr int kByteVocabulary = 256;

struct TextWindows {
  std::int64_t context = 0;  // T
  std::int64_t stride = 0;   // bytes between window starts (default T: no overlap)
};

// The concatenated bytes of `paths`; an unreadable or empty total is an
// error naming the files.
std::vector<std::uint8_t> read_text_files(const std::vector<std::string>& paths);

// Windows i = 0, 1, … start at byte i·stride: samples bytes[s, s+T),
// targets bytes[s+1, s+T+1); as many as fit. Windows [first, end) of them
// when a range is given (end -1: through the last), so a held-out split can
// take the tail. Fewer than T+1 bytes is an error.
RawDataset text_windows(const std::vector<std::uint8_t>& bytes, const TextWindows& how, std::int64_t first = 0,
                        std::int64_t end = -1);
// How many windows text_windows makes of `size` bytes.
std::int64_t count_windows(std::int64_t size, const TextWindows& how);

}  // namespace dlscale
