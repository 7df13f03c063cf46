// Shared by the fuzz targets: a private scratch folder per process (the
// parsers under test read files, so each input is written to one first).
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace dlscale::fuzz {

// Created on first use under $TMPDIR, removed at a normal exit (a crash
// leaves it behind on purpose: it holds the files of the crashing input).
inline const std::string& scratch_dir() {
  struct Folder {
    std::string path = (std::filesystem::temp_directory_path() / "dlscale-fuzz-XXXXXX").string();
    Folder() {
      if (!mkdtemp(path.data())) {
        std::perror("dlscale fuzz: mkdtemp");
        std::abort();
      }
    }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return folder.path;
}

inline void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "dlscale fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

}  // namespace dlscale::fuzz
