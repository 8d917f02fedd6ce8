#!/usr/bin/env python3
"""torch.load(weights_only=True) of one checkpoint, measured as tools/bench_load.cpp measures
Tessera's loader: seconds, tensors, bytes of tensor data, resident memory before the load and its
high-water mark after (MiB). One JSON object on stdout; run once per process (VmHWM cannot be
reset). scripts/bench_load.sh alternates the two.

  /usr/bin/python3 bench/bench_load.py FILE
  /usr/bin/python3 bench/bench_load.py --make FILE   # torch.save of xcit_large_24_p8_384's random
                                                     # weights (timm on PYTHONPATH), ~760 MB
"""
import json
import sys
import time

import torch

from proc_status import status_mib


def make(path):
    import timm
    model = timm.create_model("xcit_large_24_p8_384", pretrained=False)
    torch.save(model.state_dict(), path)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--make":
        make(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit("usage: bench_load.py FILE | --make FILE")
    torch.set_num_threads(1)
    before = status_mib("VmRSS")
    start = time.perf_counter()
    state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
    seconds = time.perf_counter() - start
    tensors = [t for t in state.values() if torch.is_tensor(t)]
    print(json.dumps({"side": "torch", "seconds": seconds, "tensors": len(tensors),
                      "bytes": sum(t.numel() * t.element_size() for t in tensors),
                      "rss_before_mib": before, "peak_rss_mib": status_mib("VmHWM"),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
