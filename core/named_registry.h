// A table of factories by name that a program adds to (models::register_model,
// models::register_token_mixer). Guarded by a mutex because a program may register from several
// threads' static initialisers; the table itself lives as long as the program (a function-local
// static of its user).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessera {

template <class Factory>
class NamedRegistry {
 public:
  // Adds `factory` as `name`; false (and nothing changed) when the name is taken.
  bool add(const std::string& name, Factory factory) {
    std::lock_guard<std::mutex> lock(mutex_);
    return factories_.emplace(name, std::move(factory)).second;
  }
  // The factory added as `name`, or an empty one.
  Factory find(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = factories_.find(name);
    return it == factories_.end() ? Factory() : it->second;
  }
  // The names added, sorted.
  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, factory] : factories_) out.push_back(name);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Factory> factories_;
};

}  // namespace tessera
