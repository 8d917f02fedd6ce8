// Counting the arithmetic of a forward pass: while a FlopCounter lives on a thread, matmul, linear
// and conv2d add the multiply-accumulates (MACs) they perform to it (and so do the GEMMs of the
// matmul and linear gradients, for a counter that lives through a backward pass: the profiler's). MACs are what the papers'
// "FLOPs" columns report (XCiT Table 1, CaiT Table 5, CoaT Table 1; fvcore counts the same way):
// elementwise ops, norms and softmax are not counted.
//   FlopCounter counter;  model->forward(x);  counter.macs();
#pragma once
#include <cstdint>

namespace tessera {

class FlopCounter {
 public:
  FlopCounter();   // becomes this thread's active counter (counters nest; the innermost counts)
  ~FlopCounter();  // restores the previous one
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;
  int64_t macs() const { return macs_; }

  // Called by the ops: adds to the active counter, if any.
  static void add(int64_t macs);

 private:
  int64_t macs_ = 0;
  FlopCounter* previous_;
};

}  // namespace tessera
