// class_map.txt (data/class_map.h).
#include "tessera/data/class_map.h"

#include <sstream>

#include "tessera/core/atomic_file.h"
#include "tessera/core/error.h"
#include "tessera/data/decode.h"

namespace tessera::data {

void write_class_map(const std::string& path, const std::vector<std::string>& classes) {
  std::string text;
  for (size_t k = 0; k < classes.size(); ++k) {
    const std::string& name = classes[k];
    TS_CHECK(!name.empty() && name.find_first_of("\r\n") == std::string::npos, "write_class_map: class ", k,
             " of the dataset is named \"", name, "\", which ", path, " cannot hold (one name per line)");
    text += name;
    text += '\n';
  }
  write_file_atomically(path, text);
}

std::vector<std::string> read_class_map(const std::string& path) {
  std::istringstream in(read_file_bytes(path));  // (DataError naming the path when unreadable)
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    names.push_back(line);
  }
  return names;
}

void check_class_map(const std::string& path, const std::vector<std::string>& classes, const std::string& what) {
  const std::vector<std::string> saved = read_class_map(path);
  if (saved == classes) return;
  size_t k = 0;
  while (k < saved.size() && k < classes.size() && saved[k] == classes[k]) ++k;
  std::ostringstream os;
  os << what << " has " << classes.size() << " classes, but the run's class index " << path << " has " << saved.size()
     << "; they differ first at label " << k << ": ";
  os << (k < saved.size() ? "\"" + saved[k] + "\"" : "nothing") << " in the index, "
     << (k < classes.size() ? "\"" + classes[k] + "\"" : "nothing") << " in the dataset";
  os << ". The labels would not mean what the run learned; point the run at the dataset it was trained on";
  throw DataError(os.str());
}

}  // namespace tessera::data
