#include "tessera/ops/trace.h"

namespace tessera {

constinit thread_local OpTracer* OpTracer::current_ = nullptr;
constinit thread_local int TraceScope::depth_ = 0;

OpTracer* OpTracer::install(OpTracer* tracer) {
  OpTracer* previous = current_;
  current_ = tracer;
  return previous;
}

}  // namespace tessera
