#!/usr/bin/env python3
"""PyTorch's step for `train_mlp --random-data`, the reference for bench/gpu_mlp.sh.

The same model and loop: Flatten, (Linear, ReLU) x layers, Linear to 10 classes; SGD with
momentum 0.9; cross entropy; inputs drawn from a normal distribution, labels the argmax of a fixed
random linear map; batches of a fresh permutation every epoch, gathered on the host and moved
to the device inside the timed step (as train_mlp's shuffling loader); per step loss.item()
and the batch accuracy, as train_mlp reads them.  Prints one JSON line: ms_per_step over every
step (train_mlp's figure), the median after the first --warmup steps, and the device's peak of
allocated and reserved bytes.  float32 products without TF32 (PyTorch's default for matmul).
Usage: python3 bench/torch_mlp.py --device cuda --hidden 4096 --layers 4 --batch-size 2048 --steps 64
"""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--examples", type=int, default=8192, help="random training examples")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(a.device)
    gen = torch.Generator().manual_seed(0)
    x_all = torch.randn(a.examples, 784, generator=gen)
    y_all = torch.argmax(x_all @ torch.randn(784, 10, generator=gen), 1)
    layers, width = [torch.nn.Flatten()], 784
    for _ in range(a.layers):
        layers += [torch.nn.Linear(width, a.hidden), torch.nn.ReLU()]
        width = a.hidden
    layers.append(torch.nn.Linear(width, 10))
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    batches = a.examples // a.batch_size
    if batches == 0:
        raise SystemExit(f"torch_mlp.py: --examples {a.examples} holds no batch of {a.batch_size}")
    times = []
    for step in range(a.steps):
        b = step % batches
        if b == 0:
            order = torch.randperm(a.examples, generator=gen)
        t0 = time.perf_counter()
        rows = order[b * a.batch_size:(b + 1) * a.batch_size]
        x = x_all[rows].to(dev)
        y = y_all[rows].to(dev)
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        loss_value = loss.item()
        acc = (logits.argmax(1) == y).float().mean().item()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    steady = times[a.warmup:] or times
    out = {
        "framework": f"pytorch {torch.__version__}",
        "device": str(dev),
        "steps": a.steps,
        "final_loss": loss_value,
        "train_accuracy": acc,
        "ms_per_step": sum(times) / len(times),
        "median_ms_after_warmup": statistics.median(steady),
    }
    if dev.type == "cuda":
        out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
