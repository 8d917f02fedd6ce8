// Reading torch.save archives; the rules are in io/torch_checkpoint.h.
#include "tessera/io/torch_checkpoint.h"

#include <cstring>
#include <fstream>
#include <set>
#include <unordered_set>

#include "tessera/core/error.h"
#include "tessera/io/torch_pickle.h"
#include "tessera/io/zip_archive.h"

namespace tessera {

namespace {

constexpr int kMaxNesting = 32;  // nesting of the values walked to find the state dict

using pickle::Value;

// The tensor _rebuild_tensor_v2 describes, copied out of the storage's bytes: a view that must lie
// inside the storage, gathered into a new contiguous tensor.
Tensor tensor_from_storage(const ZipArchive& zip, const std::string& prefix, const Value& storage, int64_t offset,
                           const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  const std::string entry_name = prefix + "data/" + storage.key;
  const ZipArchive::Entry* entry = zip.find(entry_name);
  const auto fail = [&](const auto&... what) {
    throw Error(detail::concat("torch checkpoint: '", zip.path(), "': storage '", storage.key, "': ", what...));
  };
  if (!entry) fail("the archive has no entry ", entry_name);
  if (!storage.dtype)
    fail("its elements are ", storage.storage_class,
         "'s, a type Tessera cannot hold (float32/16, bfloat16, "
         "float64, int64 and bool can be read)");
  const DType dtype = *storage.dtype;
  const size_t element = dtype_size(dtype);
  if (entry->size / element < static_cast<uint64_t>(storage.numel))
    fail("claims ", storage.numel, " elements of ", element, " bytes but holds ", entry->size, " bytes");
  // The last element the view reaches must lie inside the storage.
  int64_t numel = 1, last = offset;
  if (offset < 0) fail("negative storage offset ", offset);
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0 || stride[d] < 0) fail("negative size or stride in ", Shape(size), " / ", Shape(stride));
    if (size[d] == 0) numel = 0;
    else {
      if (size[d] > (INT64_MAX - last) / std::max<int64_t>(stride[d], 1)) fail("a view too large to address");
      last += (size[d] - 1) * stride[d];
      numel = numel > INT64_MAX / size[d] ? INT64_MAX : numel * size[d];
    }
  }
  // A view may not hold more elements than its storage (a stride of 0 repeating a few elements
  // into a huge tensor is how a tiny file would ask for terabytes).
  if (numel > storage.numel)
    fail("a tensor of shape ", Shape(size), " has more elements than its storage's ", storage.numel);
  if (numel > 0 && last >= storage.numel)
    fail("a tensor of shape ", Shape(size), " at offset ", offset, " with strides ", Shape(stride), " reaches element ",
         last, " of a storage of ", storage.numel);
  Tensor t = Tensor::empty(Shape(size), dtype);
  if (numel == 0) return t;
  auto* out = static_cast<unsigned char*>(t.raw_data());
  const auto check_bools = [&] {
    if (dtype != DType::Bool) return;
    for (int64_t i = 0; i < numel; ++i)
      if (out[i] > 1) fail("bool element ", i, " is stored as byte ", int{out[i]}, " (expected 0 or 1)");
  };
  // Row-major strides: one copy; otherwise gathered element by element.
  bool contiguous = true;
  for (int64_t d = static_cast<int64_t>(size.size()) - 1, expect = 1; d >= 0; --d) {
    if (size[d] != 1 && stride[d] != expect) contiguous = false;
    expect *= size[d];
  }
  // The common case, a tensor that is its whole storage: copied and checked in one pass.
  if (contiguous && offset == 0 && static_cast<uint64_t>(numel) * element == entry->size &&
      zip.copy_stored(*entry, out)) {
    check_bools();
    zip.release(*entry);
    return t;
  }
  std::vector<unsigned char> inflated;
  const unsigned char* base = zip.stored_bytes(*entry);
  if (!base) {
    inflated = zip.read(*entry);
    base = inflated.data();
  }
  base += static_cast<size_t>(offset) * element;
  if (contiguous) {
    std::memcpy(out, base, static_cast<size_t>(numel) * element);
  } else {
    std::vector<int64_t> index(size.size(), 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t at = 0;
      for (size_t d = 0; d < size.size(); ++d) at += index[d] * stride[d];
      std::memcpy(out + static_cast<size_t>(i) * element, base + static_cast<size_t>(at) * element, element);
      for (size_t d = size.size(); d-- > 0;) {
        if (++index[d] < size[d]) break;
        index[d] = 0;
      }
    }
  }
  check_bools();
  zip.release(*entry);
  return t;
}

const Value* member(const Value& dict, const std::string& key) {
  for (const auto& [k, v] : dict.dict)
    if (k->kind == Value::Kind::String && k->text == key) return v;
  return nullptr;
}

// Whether `v` is a dict whose values are tensors (a state dict), checking the whole of what the
// file holds on the way: depth-limited, so a recursive structure is an error, not a hang.
bool is_state_dict(const Value& v) {
  if (v.kind != Value::Kind::Dict || v.dict.empty()) return false;
  for (const auto& [k, t] : v.dict)
    if (k->kind != Value::Kind::String || t->kind != Value::Kind::Tensor) return false;
  return true;
}

// Walks every value once (a value shared by many containers is not walked again, so a pickle that
// nests shared lists cannot make the walk exponential), refusing a structure that contains itself
// and a path deeper than kMaxNesting.
struct NestingCheck {
  const std::string& path;
  std::unordered_set<const Value*> on_path, done;
  void walk(const Value& v, int depth) {
    const auto fail = [&](const auto&... what) {
      throw Error(detail::concat("torch checkpoint: '", path, "': ", what..., ": refused"));
    };
    if (on_path.count(&v)) fail("a structure that contains itself");
    if (depth > kMaxNesting) fail("values nested more than ", kMaxNesting, " deep");
    if (done.count(&v)) return;
    on_path.insert(&v);
    for (const Value* i : v.items) walk(*i, depth + 1);
    for (const auto& [k, x] : v.dict) {
      walk(*k, depth + 1);
      walk(*x, depth + 1);
    }
    on_path.erase(&v);
    done.insert(&v);
  }
};

}  // namespace

bool is_torch_checkpoint_path(const std::string& path) {
  for (const char* ext : {".pth", ".pt", ".bin", ".ckpt"}) {
    const std::string e = ext;
    if (path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

nn::NamedTensors load_torch_checkpoint(const std::string& path, const TorchCheckpointOptions& options) {
  const auto fail = [&](const auto&... what) {
    throw Error(detail::concat("torch checkpoint: '", path, "': ", what...));
  };
  if (!looks_like_zip(path)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open");
    const int first = in.get();
    if (first == 0x80)
      fail(
          "a pickle in PyTorch's legacy format (before PyTorch 1.6), which is not supported: re-save it with a "
          "newer PyTorch (torch.save(torch.load(f, weights_only=True), new_f)) or convert it to safetensors");
    fail("not a PyTorch checkpoint (a zip archive written by torch.save)");
  }
  const ZipArchive zip(path);
  // Every entry lives in one top folder, named after the file when it was saved: <folder>/data.pkl.
  const ZipArchive::Entry* pkl = nullptr;
  for (const ZipArchive::Entry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pkl) fail("two data.pkl entries (", pkl->name, " and ", e.name, ")");
      pkl = &e;
    }
  }
  if (!pkl) fail("the archive has no <folder>/data.pkl: not written by torch.save");
  const std::string prefix = pkl->name.substr(0, pkl->name.size() - std::strlen("data.pkl"));
  if (const ZipArchive::Entry* order = zip.find(prefix + "byteorder")) {
    const std::vector<unsigned char> b = zip.read(*order);
    if (std::string(b.begin(), b.end()) != "little")
      fail("its tensors are stored big-endian (byteorder '", std::string(b.begin(), b.end()), "'): not supported");
  }
  const std::vector<unsigned char> program = zip.read(*pkl);
  const pickle::Unpickled values = pickle::unpickle(
      path, program.data(), program.size(),
      [&](const Value& storage, int64_t offset, const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
        return tensor_from_storage(zip, prefix, storage, offset, size, stride);
      });
  const Value& root = values.root();
  NestingCheck{path, {}, {}}.walk(root, 0);
  const Value* state = nullptr;
  if (is_state_dict(root)) {
    state = &root;
  } else if (root.kind == Value::Kind::Dict) {
    const std::vector<std::string> keys = options.use_ema
                                              ? std::vector<std::string>{"model_ema", "state_dict_ema"}
                                              : std::vector<std::string>{"state_dict", "model", "model_ema"};
    for (const std::string& key : keys) {
      const Value* v = member(root, key);
      if (v && is_state_dict(*v)) {
        state = v;
        break;
      }
    }
    if (!state) {
      std::string found;
      for (const auto& [k, v] : root.dict)
        found += (found.empty() ? "" : ", ") +
                 (k->kind == Value::Kind::String ? "'" + k->text + "'" : std::string(pickle::kind_name(k->kind))) +
                 " (" + pickle::kind_name(v->kind) + ")";
      fail("no state dict of tensors under ",
           options.use_ema ? "'model_ema' or 'state_dict_ema'" : "'state_dict' or 'model'",
           " nor at the top; the file holds ", found.empty() ? "an empty dict" : found);
    }
  } else {
    fail("holds ", pickle::kind_name(root.kind), ", not a dict of tensors");
  }
  nn::NamedTensors out;
  std::set<std::string> seen;
  bool all_module = true;
  for (const auto& [k, t] : state->dict) {
    if (!seen.insert(k->text).second) fail("the key '", k->text, "' appears twice");
    all_module = all_module && k->text.rfind("module.", 0) == 0;
    out.emplace_back(k->text, t->tensor);
  }
  if (all_module)
    for (auto& [name, t] : out) name.erase(0, std::strlen("module."));
  return out;
}

}  // namespace tessera
