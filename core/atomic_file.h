// Replacing a file so that readers see the old bytes or the new ones, never a mix, and a crash at
// any point leaves the old file: what checkpoints, run logs and tool outputs rely on.
#pragma once
#include <string>

namespace tessera {

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync'ed and
// renamed over `path`, then the directory fsync'ed; an existing file survives any failure. Errors
// name the path and the system's reason.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tessera
