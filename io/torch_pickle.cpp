// The restricted pickle interpreter; what it accepts and why in io/torch_pickle.h. Opcode names and
// numbers are those of CPython's Lib/pickletools.py.
#include "tessera/io/torch_pickle.h"

#include <cstring>
#include <unordered_map>

#include "tessera/core/error.h"

namespace tessera::pickle {

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return "a bool";
    case Value::Kind::Int: return "an int";
    case Value::Kind::Float: return "a float";
    case Value::Kind::String: return "a string";
    case Value::Kind::Tuple: return "a tuple";
    case Value::Kind::List: return "a list";
    case Value::Kind::Dict: return "a dict";
    case Value::Kind::Global: return "a global";
    case Value::Kind::Storage: return "a storage";
    case Value::Kind::Tensor: return "a tensor";
  }
  return "?";
}

namespace {

constexpr size_t kMaxStack = 1 << 20;  // values made, on the stack, in the memo (a state dict needs thousands)

// The storage classes torch.save names, by their global's name, and the dtype of each that
// Tessera has (the others load as far as their tensor, which is then refused by name).
std::optional<std::optional<DType>> storage_dtype(const std::string& global) {
  static const std::unordered_map<std::string, std::optional<DType>> classes = {
      {"torch.FloatStorage", DType::Float32},      {"torch.DoubleStorage", DType::Float64},
      {"torch.HalfStorage", DType::Float16},       {"torch.BFloat16Storage", DType::BFloat16},
      {"torch.LongStorage", DType::Int64},         {"torch.BoolStorage", DType::Bool},
      {"torch.IntStorage", std::nullopt},          {"torch.ShortStorage", std::nullopt},
      {"torch.CharStorage", std::nullopt},         {"torch.ByteStorage", std::nullopt},
      {"torch.ComplexFloatStorage", std::nullopt}, {"torch.ComplexDoubleStorage", std::nullopt}};
  const auto it = classes.find(global);
  if (it == classes.end()) return std::nullopt;
  return it->second;
}

enum class Callable { OrderedDict, RebuildTensor, RebuildParameter };

std::optional<Callable> callable_of(const std::string& global) {
  if (global == "collections.OrderedDict") return Callable::OrderedDict;
  if (global == "torch._utils._rebuild_tensor_v2") return Callable::RebuildTensor;
  if (global == "torch._utils._rebuild_parameter") return Callable::RebuildParameter;
  return std::nullopt;
}

class Machine {
 public:
  Machine(const std::string& where, const unsigned char* bytes, size_t size, const TensorMaker& make_tensor,
          std::vector<std::unique_ptr<Value>>& arena)
      : where_(where), p_(bytes), end_(bytes + size), begin_(bytes), make_tensor_(make_tensor), arena_(arena) {}

  const Value* run() {
    while (true) {
      op_at_ = static_cast<size_t>(p_ - begin_);
      const unsigned char op = byte();
      switch (op) {
        case 0x80: byte(); break;   // PROTO: the version does not change what is accepted
        case 0x95: take(8); break;  // FRAME: a length hint
        case '}': push(make(Value::Kind::Dict)); break;
        case ']': push(make(Value::Kind::List)); break;
        case ')': push(make(Value::Kind::Tuple)); break;
        case '(': marks_.push_back(stack_.size()); break;
        case 'X': push(string(take(uint_le(4)))); break;
        case 0x8c: push(string(take(uint_le(1)))); break;
        case 0x8d: push(string(take(uint_le(8)))); break;
        case 'U': push(string(take(uint_le(1)))); break;
        case 'T': push(string(take(uint_le(4)))); break;
        case 'q': memo(uint_le(1)); break;
        case 'r': memo(uint_le(4)); break;
        case 0x94: memo(memo_.size()); break;
        case 'h': push(recall(uint_le(1))); break;
        case 'j': push(recall(uint_le(4))); break;
        case 'c': {
          const std::string module = line(), name = line();
          push(global(module + "." + name));
          break;
        }
        case 0x93: {
          const Value* name = pop();
          const Value* module = pop();
          if (name->kind != Value::Kind::String || module->kind != Value::Kind::String)
            fail("STACK_GLOBAL expects two strings");
          push(global(module->text + "." + name->text));
          break;
        }
        case 'J': push(integer(static_cast<int32_t>(uint_le(4)))); break;
        case 'K': push(integer(static_cast<int64_t>(uint_le(1)))); break;
        case 'M': push(integer(static_cast<int64_t>(uint_le(2)))); break;
        case 0x8a: push(integer(long1())); break;
        case 'G': push(float64()); break;
        case 0x88: push(boolean(true)); break;
        case 0x89: push(boolean(false)); break;
        case 'N': push(make(Value::Kind::None)); break;
        case 't': push(tuple(pop_mark())); break;
        case 0x85: push(tuple(pop_n(1))); break;
        case 0x86: push(tuple(pop_n(2))); break;
        case 0x87: push(tuple(pop_n(3))); break;
        case 's': {
          const Value* v = pop();
          const Value* k = pop();
          mutable_top(Value::Kind::Dict, "SETITEM")->dict.emplace_back(k, v);
          break;
        }
        case 'u': {
          std::vector<const Value*> kv = pop_mark();
          if (kv.size() % 2) fail("SETITEMS with an odd number of keys and values");
          Value* d = mutable_top(Value::Kind::Dict, "SETITEMS");
          for (size_t i = 0; i < kv.size(); i += 2) d->dict.emplace_back(kv[i], kv[i + 1]);
          break;
        }
        case 'a': {
          const Value* v = pop();
          mutable_top(Value::Kind::List, "APPEND")->items.push_back(v);
          break;
        }
        case 'e': {
          std::vector<const Value*> vs = pop_mark();
          Value* l = mutable_top(Value::Kind::List, "APPENDS");
          l->items.insert(l->items.end(), vs.begin(), vs.end());
          break;
        }
        case 'Q': push(storage(pop())); break;
        case 'R': {
          const Value* args = pop();
          const Value* f = pop();
          push(reduce(*f, *args));
          break;
        }
        case 'b': {  // BUILD: OrderedDict's state is its _metadata (module versions): not needed
          pop();
          if (stack_.empty() ||
              (stack_.back()->kind != Value::Kind::Dict && stack_.back()->kind != Value::Kind::Tensor))
            fail("BUILD on something other than a dict or a tensor");
          break;
        }
        case '.': {
          if (stack_.size() != 1 || !marks_.empty()) fail("STOP with ", stack_.size(), " values on the stack");
          return stack_.back();
        }
        default:
          fail(detail::concat("opcode 0x", hex(op),
                              " is not one a state dict needs (only containers, numbers, strings, tensors and "
                              "storages are read; nothing is executed)"));
      }
    }
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... what) const {
    throw Error(detail::concat("pickle: '", where_, "': at byte ", op_at_, ": ", what...));
  }
  static std::string hex(unsigned v) {
    const char* digits = "0123456789abcdef";
    return {digits[v >> 4 & 15], digits[v & 15]};
  }

  unsigned char byte() {
    if (p_ == end_) fail("the pickle ends without STOP (truncated?)");
    return *p_++;
  }
  const unsigned char* take(uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) fail("a field of ", n, " bytes runs past the end of the pickle");
    const unsigned char* at = p_;
    p_ += n;
    return at;
  }
  uint64_t uint_le(int n) {
    const unsigned char* b = take(static_cast<uint64_t>(n));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | b[i];
    return v;
  }
  std::string line() {
    const unsigned char* nl = static_cast<const unsigned char*>(std::memchr(p_, '\n', static_cast<size_t>(end_ - p_)));
    if (!nl) fail("GLOBAL's name has no end of line");
    std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(nl - p_));
    p_ = nl + 1;
    return s;
  }
  int64_t long1() {
    const uint64_t n = uint_le(1);
    if (n > 8) fail("an integer of ", n, " bytes (at most 8 are read)");
    const unsigned char* b = take(n);
    uint64_t v = 0;
    for (uint64_t i = n; i-- > 0;) v = v << 8 | b[i];
    if (n > 0 && n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // two's complement sign
    return static_cast<int64_t>(v);
  }
  Value* float64() {
    const unsigned char* b = take(8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = bits << 8 | b[i];  // big-endian
    Value* v = make(Value::Kind::Float);
    std::memcpy(&v->number, &bits, 8);
    return v;
  }

  Value* make(Value::Kind kind) {
    if (arena_.size() >= kMaxStack) fail("more than ", kMaxStack, " values");
    arena_.push_back(std::make_unique<Value>());
    arena_.back()->kind = kind;
    return arena_.back().get();
  }
  Value* string(const unsigned char* begin) {
    Value* v = make(Value::Kind::String);
    v->text.assign(reinterpret_cast<const char*>(begin), static_cast<size_t>(p_ - begin));
    return v;
  }
  Value* integer(int64_t i) {
    Value* v = make(Value::Kind::Int);
    v->integer = i;
    return v;
  }
  Value* boolean(bool b) {
    Value* v = make(Value::Kind::Bool);
    v->boolean = b;
    return v;
  }
  Value* tuple(std::vector<const Value*> items) {
    Value* v = make(Value::Kind::Tuple);
    v->items = std::move(items);
    return v;
  }

  void push(const Value* v) {
    if (stack_.size() >= kMaxStack) fail("the stack grows past ", kMaxStack, " values");
    stack_.push_back(v);
  }
  const Value* pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("pop from an empty stack");
    const Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::vector<const Value*> pop_n(size_t n) {
    std::vector<const Value*> out(n);
    for (size_t i = n; i-- > 0;) out[i] = pop();
    return out;
  }
  std::vector<const Value*> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<const Value*> out(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return out;
  }
  // The value on top of the stack, to be filled: it must be a container this pickle made.
  Value* mutable_top(Value::Kind kind, const char* op) {
    if (stack_.empty() || stack_.back()->kind != kind) fail(op, " needs ", kind_name(kind), " below its operands");
    return const_cast<Value*>(stack_.back());  // the arena owns it mutably; the stack shares it
  }
  void memo(uint64_t index) {
    if (stack_.empty()) fail("memoizing an empty stack");
    if (index > kMaxStack) fail("memo index ", index, " is beyond ", kMaxStack);
    if (memo_.size() <= index) memo_.resize(static_cast<size_t>(index) + 1, nullptr);
    memo_[static_cast<size_t>(index)] = stack_.back();
  }
  const Value* recall(uint64_t index) {
    if (index >= memo_.size() || !memo_[static_cast<size_t>(index)]) fail("memo index ", index, " was never stored");
    return memo_[static_cast<size_t>(index)];
  }

  Value* global(const std::string& name) {
    if (!callable_of(name) && !storage_dtype(name))
      fail("refusing the global '", name,
           "': a state dict names only collections.OrderedDict, torch._utils._rebuild_tensor_v2 / "
           "_rebuild_parameter and torch's storage classes; nothing was executed");
    Value* v = make(Value::Kind::Global);
    v->text = name;
    return v;
  }

  // BINPERSID: ('storage', storage class, key, location, numel).
  Value* storage(const Value* pid) {
    if (pid->kind != Value::Kind::Tuple || pid->items.size() != 5 || pid->items[0]->kind != Value::Kind::String ||
        pid->items[0]->text != "storage")
      fail("a persistent id that is not ('storage', class, key, location, numel)");
    const Value* cls = pid->items[1];
    const auto dtype = cls->kind == Value::Kind::Global ? storage_dtype(cls->text) : std::nullopt;
    if (!dtype) fail("a storage whose class is ", cls->kind == Value::Kind::Global ? cls->text : kind_name(cls->kind));
    if (pid->items[2]->kind != Value::Kind::String || pid->items[4]->kind != Value::Kind::Int ||
        pid->items[4]->integer < 0)
      fail("a storage id without a string key and a count of elements");
    Value* v = make(Value::Kind::Storage);
    v->dtype = *dtype;
    v->storage_class = cls->text.substr(cls->text.find('.') + 1);
    v->key = pid->items[2]->text;
    v->numel = pid->items[4]->integer;
    return v;
  }

  std::vector<int64_t> ints(const Value* t, const char* what) {
    if (t->kind != Value::Kind::Tuple) fail("_rebuild_tensor_v2's ", what, " is ", kind_name(t->kind), ", not a tuple");
    std::vector<int64_t> out;
    for (const Value* i : t->items) {
      if (i->kind != Value::Kind::Int) fail("_rebuild_tensor_v2's ", what, " holds ", kind_name(i->kind));
      out.push_back(i->integer);
    }
    return out;
  }

  Value* reduce(const Value& f, const Value& args) {
    if (f.kind != Value::Kind::Global) fail("REDUCE calls ", kind_name(f.kind), ", not an allowed global");
    if (args.kind != Value::Kind::Tuple) fail("REDUCE's arguments are ", kind_name(args.kind), ", not a tuple");
    const std::optional<Callable> c = callable_of(f.text);
    if (!c) fail("refusing to call '", f.text, "' (a storage class is never called); nothing was executed");
    const auto& a = args.items;
    switch (*c) {
      case Callable::OrderedDict:
        if (!a.empty()) fail("collections.OrderedDict called with arguments");
        return make(Value::Kind::Dict);
      case Callable::RebuildTensor: {
        // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
        if (a.size() < 6 || a.size() > 7 || a[0]->kind != Value::Kind::Storage || a[1]->kind != Value::Kind::Int)
          fail("torch._utils._rebuild_tensor_v2 called with other arguments than (storage, offset, size, stride, ...)");
        const std::vector<int64_t> size = ints(a[2], "size"), stride = ints(a[3], "stride");
        if (size.size() != stride.size())
          fail("_rebuild_tensor_v2: ", size.size(), " sizes but ", stride.size(), " strides");
        Value* v = make(Value::Kind::Tensor);
        v->tensor = make_tensor_(*a[0], a[1]->integer, size, stride);
        return v;
      }
      case Callable::RebuildParameter:
        // (data, requires_grad, backward_hooks): the parameter's tensor is all a state dict keeps.
        if (a.size() != 3 || a[0]->kind != Value::Kind::Tensor)
          fail("torch._utils._rebuild_parameter called with other arguments than (tensor, requires_grad, hooks)");
        return const_cast<Value*>(a[0]);
    }
    fail("unreachable");
  }

  const std::string& where_;
  const unsigned char* p_;
  const unsigned char* end_;
  const unsigned char* begin_;
  const TensorMaker& make_tensor_;
  std::vector<std::unique_ptr<Value>>& arena_;
  std::vector<const Value*> stack_;
  std::vector<size_t> marks_;
  std::vector<const Value*> memo_;
  size_t op_at_ = 0;
};

}  // namespace

Unpickled unpickle(const std::string& where, const unsigned char* bytes, size_t size, const TensorMaker& make_tensor) {
  Unpickled out;
  out.root_ = Machine(where, bytes, size, make_tensor, out.arena_).run();
  return out;
}

}  // namespace tessera::pickle
