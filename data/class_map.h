// A run's class index: class_map.txt in the run folder, one class name per line, line k naming the
// class of label k (timm's --class-map format, so `timm validate --class-map` reads it too).
//
// An image folder numbers its classes by their sorted folder names, so adding or removing one
// class folder renumbers every class after it, and a resumed run or an evaluation would go on with
// the labels silently shifted. The trainer writes the index when a run starts, and a resume (or
// `tessera validate` of a checkpoint in a run folder) checks the dataset against it first.
#pragma once
#include <string>
#include <vector>

namespace tessera::data {

inline constexpr const char* kClassMapFile = "class_map.txt";

// Writes `classes` to `path` atomically. A name with a line break, or empty, cannot be written: an
// error naming it.
void write_class_map(const std::string& path, const std::vector<std::string>& classes);

// The names in `path` (DataError naming the file when it cannot be read).
std::vector<std::string> read_class_map(const std::string& path);

// Throws DataError when the classes in `path` are not `classes`, in order: the message names the
// file, `what` ("the dataset ..."), both counts and the first label that differs.
void check_class_map(const std::string& path, const std::vector<std::string>& classes, const std::string& what);

}  // namespace tessera::data
