#!/usr/bin/python3
"""The main job's recipe with timm on PyTorch: the side-by-side reference for `tessera train`.

Trains a timm model on Fashion-MNIST with the recipe of scripts/run.sh -- Resize(img_size, bicubic)
+ CenterCrop, horizontal flip 0.5, Normalize(0.449, 0.226) (ImageNet's mean/std averaged for one
channel), AdamW with timm's parameter groups (create_optimizer_v2), cosine schedule with linear
warm-up stepped per update (CosineLRScheduler, t_in_epochs=False), label smoothing -- and prints
per epoch: seconds, training images/s, train loss, test loss, top-1, top-5; then one JSON line.

The deterministic resize is done once up front (PIL, bicubic), so the timed epochs measure the
model's training steps plus flips and batching, the part both frameworks share (Tessera resizes
in its loader workers, inside its timed epochs).

Run with Debian's torch and pip's timm:
  PYTHONPATH=~/.cache/tessera/timm /usr/bin/python3 bench/train_timm.py --model coat_lite_tiny --epochs 6
"""
import argparse
import ast
import gzip
import json
import os
import time

import numpy as np
import timm
import timm.loss
import timm.optim
import timm.scheduler
import torch
import torch.nn.functional as F
from PIL import Image


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_split(root, prefix, img_size):
    images = read_idx(os.path.join(root, prefix + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(root, prefix + "-labels-idx1-ubyte.gz"))
    # Resize of the shorter side + CenterCrop at crop_pct 1 is a plain resize for square images.
    resized = np.stack([np.asarray(Image.fromarray(im).resize((img_size, img_size), Image.BICUBIC)) for im in images])
    x = torch.from_numpy(resized).float().div_(255.0).unsqueeze(1)
    x = (x - 0.449) / 0.226
    return x, torch.from_numpy(labels.astype(np.int64))


def evaluate(model, x, y, batch):
    model.eval()
    loss_sum, top1, top5 = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(x[i: i + batch])
            t = y[i: i + batch]
            loss_sum += F.cross_entropy(logits, t, reduction="sum").item()
            best = logits.topk(5, dim=1).indices
            top1 += (best[:, 0] == t).sum().item()
            top5 += (best == t[:, None]).any(dim=1).sum().item()
    return loss_sum / len(x), 100.0 * top1 / len(x), 100.0 * top5 / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="coat_lite_tiny")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--img-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("-b", "--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--min-lr", type=float, default=1e-5)
    ap.add_argument("--warmup-lr", type=float, default=1e-6)  # tessera train's default
    ap.add_argument("--warmup-epochs", type=float, default=0.5)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--smoothing", type=float, default=0.1)
    ap.add_argument("--max-train-batches", type=int, default=0, help="stop each epoch after this many (0: all)")
    ap.add_argument("--model-kwargs", nargs="*", default=[], help="key=value, as timm's train.py")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    x_train, y_train = load_split(args.data_dir, "train", args.img_size)
    x_test, y_test = load_split(args.data_dir, "t10k", args.img_size)
    kwargs = {k: ast.literal_eval(v) for k, v in (kv.split("=", 1) for kv in args.model_kwargs)}
    model = timm.create_model(args.model, num_classes=10, in_chans=1, img_size=args.img_size, **kwargs)
    opt = timm.optim.create_optimizer_v2(model, "adamw", lr=args.lr, weight_decay=args.weight_decay)
    steps_per_epoch = len(x_train) // args.batch_size  # drop_last, as timm's training loader
    if args.max_train_batches:
        steps_per_epoch = min(steps_per_epoch, args.max_train_batches)
    sched = timm.scheduler.CosineLRScheduler(
        opt, t_initial=args.epochs * steps_per_epoch, lr_min=args.min_lr, warmup_lr_init=args.warmup_lr,
        warmup_t=int(args.warmup_epochs * steps_per_epoch), t_in_epochs=False)
    criterion = timm.loss.LabelSmoothingCrossEntropy(args.smoothing)
    print(f"{args.model}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, "
          f"torch {torch.__version__}, timm {timm.__version__}, {args.threads} threads", flush=True)

    epochs, start = [], time.time()
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x_train))
        t0, loss_sum = time.time(), 0.0
        for step in range(steps_per_epoch):
            idx = order[step * args.batch_size: (step + 1) * args.batch_size]
            xb = x_train[idx]
            flip = torch.rand(len(idx)) < 0.5
            xb[flip] = xb[flip].flip(-1)
            loss = criterion(model(xb), y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step_update(epoch * steps_per_epoch + step + 1)
            loss_sum += loss.item()
        train_s = time.time() - t0
        eval_loss, top1, top5 = evaluate(model, x_test, y_test, 256)
        row = {"epoch": epoch, "seconds": round(time.time() - t0, 1), "train_images_per_s":
               round(steps_per_epoch * args.batch_size / train_s, 1), "train_loss": round(loss_sum / steps_per_epoch, 4),
               "eval_loss": round(eval_loss, 4), "eval_top1": round(top1, 2), "eval_top5": round(top5, 2)}
        epochs.append(row)
        print(row, flush=True)
    print(json.dumps({"model": args.model, "total_seconds": round(time.time() - start, 1), "epochs": epochs}))


if __name__ == "__main__":
    main()
