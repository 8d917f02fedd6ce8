#include "tessera/autograd/hooks.h"

#include <algorithm>
#include <atomic>

#include "tessera/autograd/node.h"

namespace tessera::autograd {

int64_t add_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  TS_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
           "add_post_accumulate_grad_hook: expected a leaf that requires grad, got ",
           leaf.defined() ? describe(leaf) : std::string("an undefined tensor"));
  TS_CHECK(static_cast<bool>(hook), "add_post_accumulate_grad_hook: the hook is empty");
  static std::atomic<int64_t> next_handle{1};
  const int64_t handle = next_handle.fetch_add(1);
  ensure_meta(leaf.impl()).post_accumulate_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, int64_t handle) {
  if (!leaf.defined()) return;
  AutogradMeta* meta = meta_of(leaf.impl());
  if (!meta) return;
  std::erase_if(meta->post_accumulate_hooks, [&](const auto& entry) { return entry.first == handle; });
}

}  // namespace tessera::autograd
