// A Profiler's kernel calls as a Chrome trace (the Trace Event Format's JSON object form), which
// Perfetto (ui.perfetto.dev) and chrome://tracing show as a timeline: one complete event
// ("ph": "X") per kernel call with its start and duration in microseconds, the phase (forward,
// backward, a ProfileRange label) as its category and track, and the MACs it counted as an argument.
#pragma once
#include <string>

#include "tessera/autograd/profiler.h"

namespace tessera {

std::string chrome_trace_json(const Profiler& profiler);
// Writes it atomically (core/atomic_file.h).
void write_chrome_trace(const Profiler& profiler, const std::string& path);

}  // namespace tessera
