#!/usr/bin/env python3
"""timm's input pipeline on an image folder, measured as `tessera bench-data` measures Tessera's.

Stages: decoding alone (PIL open + convert("RGB"), what timm's ImageDataset does), decoding plus
timm's training transform (create_transform(is_training=True): RandomResizedCropAndInterpolation,
RandomHorizontalFlip, RandAugment, ToTensor, Normalize) and plus its evaluation transform, each on
one thread, then the loader timm's create_loader builds (a PyTorch DataLoader of worker processes)
at each worker count. One JSON object per measurement on stdout, as `tessera bench-data --json` prints them.
scripts/bench_data.sh runs both sides alternately.
"""
import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--img-size", type=int, default=224)
    ap.add_argument("--aa", default="rand-m9-mstd0.5-inc1")
    ap.add_argument("--interpolation", default="bicubic")
    ap.add_argument("--crop-pct", type=float, default=0.875)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--max-images", type=int, default=0)
    args = ap.parse_args()

    import torch
    from PIL import Image
    from timm.data import ImageDataset, create_transform

    torch.set_num_threads(1)  # the workers are the parallelism, as on Tessera's side
    dataset = ImageDataset(args.data_dir)
    count = len(dataset) if args.max_images <= 0 else min(args.max_images, len(dataset))
    paths = [dataset.reader.filename(i, absolute=True) for i in range(count)]
    aa = args.aa or None
    train_tf = create_transform(args.img_size, is_training=True, auto_augment=aa,
                                interpolation=args.interpolation, color_jitter=0.4)
    eval_tf = create_transform(args.img_size, is_training=False, interpolation=args.interpolation,
                               crop_pct=args.crop_pct)

    def single_thread(stage, one):
        done, start = 0, time.perf_counter()
        while done < count or time.perf_counter() - start < args.seconds:
            one(done % count)
            done += 1
        elapsed = time.perf_counter() - start
        return {"side": "timm", "stage": stage, "workers": 1, "images": done,
                "images_per_s": round(done / elapsed, 1)}

    def decode(i):
        with open(paths[i], "rb") as f:
            Image.open(f).convert("RGB")

    def transformed(tf):
        def one(i):
            with open(paths[i], "rb") as f:
                tf(Image.open(f).convert("RGB"))
        return one

    rows = [single_thread("decode (full size)", decode),
            single_thread("train: rrc + flip + " + (args.aa or "jitter"), transformed(train_tf)),
            single_thread("eval: resize + center crop", transformed(eval_tf))]
    for line in rows:
        print(json.dumps(line), flush=True)

    # What timm's create_loader builds with use_prefetcher=False: the dataset with the training
    # transform, a shuffling torch DataLoader of worker processes dropping the last partial batch.
    dataset.transform = train_tf
    images_set = torch.utils.data.Subset(dataset, range(count)) if count < len(dataset) else dataset
    for workers in [int(w) for w in args.workers.split(",")]:
        loader = torch.utils.data.DataLoader(images_set, batch_size=args.batch, shuffle=True, num_workers=workers,
                                             drop_last=True, persistent_workers=False)
        it = iter(loader)
        next(it)  # the workers' start and first batch are not timed
        images, start = 0, time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            try:
                images += next(it)[0].shape[0]
            except StopIteration:
                it = iter(loader)
        elapsed = time.perf_counter() - start
        print(json.dumps({"side": "timm", "stage": "loader", "workers": workers, "images": images,
                          "images_per_s": round(images / elapsed, 1)}), flush=True)
        del it


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
