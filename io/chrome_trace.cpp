#include "tessera/io/chrome_trace.h"

#include "tessera/core/atomic_file.h"
#include "tessera/io/json.h"

namespace tessera {

std::string chrome_trace_json(const Profiler& profiler) {
  json::Writer w;
  w.begin_object().key("displayTimeUnit").value("ms").key("traceEvents").begin_array();
  // One track (tid) per phase, named by a metadata event, so forward and backward read as rows.
  std::vector<bool> named;
  for (const KernelEvent& e : profiler.events()) {
    if (static_cast<size_t>(e.phase) >= named.size()) named.resize(e.phase + 1, false);
    if (!named[e.phase]) {
      named[e.phase] = true;
      w.begin_object().key("name").value("thread_name").key("ph").value("M").key("pid").value(1);
      w.key("tid").value(e.phase + 1).key("args").begin_object().key("name").value(profiler.phase(e.phase));
      w.end_object().end_object();
    }
    w.begin_object().key("name").value(profiler.name(e.name)).key("cat").value(profiler.phase(e.phase));
    w.key("ph").value("X").key("pid").value(1).key("tid").value(e.phase + 1);
    w.key("ts").value(e.start_us).key("dur").value(e.duration_us);
    if (e.macs > 0) w.key("args").begin_object().key("macs").value(e.macs).end_object();
    w.end_object();
  }
  w.end_array().end_object();
  return w.str();
}

void write_chrome_trace(const Profiler& profiler, const std::string& path) {
  write_file_atomically(path, chrome_trace_json(profiler));
}

}  // namespace tessera
