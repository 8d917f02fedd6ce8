// A pickle interpreter that knows only what a PyTorch state dict needs, for reading the data.pkl of
// a torch.save archive without Python and without running anything the file names (the idea of
// torch.load(weights_only=True)).
//
// It builds plain values (None, bools, ints, floats, strings, tuples, lists, dicts) and tensors.
// The only globals it accepts are collections.OrderedDict, torch._utils._rebuild_tensor_v2 and
// _rebuild_parameter, and torch's typed storage classes (torch.FloatStorage, ...); any other global
// (os.system, builtins.eval, subprocess.Popen, a model class) is refused the moment it is named,
// with a message naming it, so nothing is ever called. Storages are persistent ids
// ('storage', class, key, location, numel) that the caller resolves to the archive's data/<key>.
// Every read is bounds-checked, and the values' nesting is limited when they are walked, so a
// recursive or absurdly deep structure is refused, not followed.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::pickle {

struct Value {
  enum class Kind { None, Bool, Int, Float, String, Tuple, List, Dict, Global, Storage, Tensor };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;                                         // String; Global: "module.name"
  std::vector<const Value*> items;                          // Tuple, List
  std::vector<std::pair<const Value*, const Value*>> dict;  // Dict, in insertion order
  // Storage: the element type (nullopt: one Tessera has no dtype for), the archive key, elements.
  std::optional<DType> dtype;
  std::string storage_class;  // "FloatStorage", ...
  std::string key;
  int64_t numel = 0;
  Tensor tensor;  // Tensor
};

const char* kind_name(Value::Kind kind);

// Makes the tensor that torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...) names;
// the caller reads the storage's bytes and checks the view against them.
using TensorMaker = std::function<Tensor(const Value& storage, int64_t offset, const std::vector<int64_t>& size,
                                         const std::vector<int64_t>& stride)>;

// Interprets `bytes` (a whole pickle, protocol 2 to 5) and returns its value; the values live as
// long as the returned holder. `where` names the file in errors: "pickle: 'FILE': ...".
class Unpickled {
 public:
  const Value& root() const { return *root_; }

 private:
  friend Unpickled unpickle(const std::string& where, const unsigned char* bytes, size_t size,
                            const TensorMaker& make_tensor);
  std::vector<std::unique_ptr<Value>> arena_;  // every value: a memo may make a container hold itself
  const Value* root_ = nullptr;
};

Unpickled unpickle(const std::string& where, const unsigned char* bytes, size_t size, const TensorMaker& make_tensor);

}  // namespace tessera::pickle
