#!/usr/bin/python3
"""timm on PyTorch, measured the way `tessera bench` measures Tessera: one model, random inputs,
`--warmup` untimed steps, then steps until both `--steps` and `--seconds` are reached; a training
step is forward, cross-entropy, backward and an SGD update (timm's benchmark.py default optimizer).
Prints one JSON object with the same keys as `tessera bench --json`: images_per_s, and
peak_memory_mib = the process's peak resident memory (VmHWM), rss_before_mib = resident memory
before the timed steps (model built, warm-up done).

UFO-ViT is not in timm; scripts/bench_models.sh compares ufo_vit_t with xcit_tiny_24_p16_224.

Run with Debian's torch and pip's timm: PYTHONPATH=~/.cache/tessera/timm /usr/bin/python3 bench/bench_models.py
--model xcit_nano_12_p16_224 --batch 8 --mode infer --threads 2
"""
import argparse
import json
import time

import timm
import torch
import torch.nn.functional as F

from proc_status import status_mib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--img-size", type=int, default=0)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--mode", choices=["infer", "train"], default="infer")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"],
                    help="autocast on cuda, as tessera bench --amp (the update stays in float32)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (its compilation happens in the warm-up steps, untimed)")
    ap.add_argument("--grad-checkpointing", action="store_true",
                    help="model.set_grad_checkpointing(True), as tessera bench --grad-checkpointing")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    kwargs = {"num_classes": args.num_classes}
    if args.img_size:
        kwargs["img_size"] = args.img_size
    model = timm.create_model(args.model, **kwargs).to(device)
    if args.grad_checkpointing:
        model.set_grad_checkpointing(True)
    img = args.img_size or model.default_cfg["input_size"][-1]
    if args.compile:
        model = torch.compile(model)
    train = args.mode == "train"
    model.train(train)
    images = torch.randn(args.batch, 3, img, img, device=device)
    labels = torch.arange(args.batch, device=device) % args.num_classes
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def forward():
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
            return model(images)

    def step():
        if not train:
            with torch.no_grad():
                forward()
        else:
            loss = F.cross_entropy(forward().float(), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    rss_before = status_mib("VmRSS")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    done, elapsed = 0, 0.0
    while done < args.steps or elapsed < args.seconds:
        step()
        done += 1
        elapsed = time.perf_counter() - start
    result = {"model": args.model, "device": args.device, "amp": args.amp, "mode": args.mode, "batch": args.batch,
              "img_size": img, "threads": torch.get_num_threads(), "steps": done, "seconds": round(elapsed, 3),
              "images_per_s": round(done * args.batch / elapsed, 3),
              "peak_memory_mib": round(status_mib("VmHWM"), 1), "rss_before_mib": round(rss_before, 1),
              "compiled": args.compile, "torch": torch.__version__, "timm": timm.__version__}
    if cuda:  # the GPU's own peak: what the tensors held, as tessera bench reports on cuda
        result["tensor_peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        result["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
