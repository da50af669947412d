"""PyTorch's half of bench/compare_torch.sh: the programs of bench/compare_ours.cpp in PyTorch.

The CIFAR ResNet-32 of models/resnet.cpp (3x3 convolutions without bias, batch norm, option-A
shortcuts that subsample and zero-pad channels, global average pooling, a linear head; batch 32,
3x32x32) and a 784-1024-1024-10 MLP (batch 128), both SGD with momentum 0.9 and cross entropy,
on one thread.  Protocol: prints "ready" after warm-up; then each stdin line
"<resnet32|mlp> <steps>" runs that many steps and prints "<model> <ms> <ms> ..."; "quit" or end
of input stops.
Usage: echo "mlp 5" | /usr/bin/python3 bench/compare_torch.py --warmup 3
"""
import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, (cout - cin) // 2
        self.project = stride != 1 or cin != cout

    def shortcut(self, x):
        if not self.project:
            return x
        s = x[:, :, :: self.stride, :: self.stride]
        return F.pad(s, (0, 0, 0, 0, self.pad, self.pad))  # zero channels on both sides: option A

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(self, depth, in_channels=3, num_classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for stage in range(3):
            cout = 16 << stage
            blocks = []
            for b in range(n):
                blocks.append(Block(cin, cout, 2 if b == 0 and stage > 0 else 1))
                cin = cout
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = layers
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layer3(self.layer2(self.layer1(h)))
        return self.fc(h.mean((2, 3)))


class Workload:
    def __init__(self, model, inputs, batch):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.inputs = inputs
        self.targets = torch.randint(0, 10, (batch,))

    def step(self):
        t0 = time.perf_counter()
        loss = F.cross_entropy(self.model(self.inputs), self.targets)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        loss.item()
        self.optimizer.step()
        return (time.perf_counter() - t0) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    workloads = {
        "resnet32": Workload(CifarResNet(32), torch.randn(32, 3, 32, 32), 32),
        "mlp": Workload(
            nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)),
            torch.randn(128, 784),
            128,
        ),
    }
    for w in workloads.values():
        for _ in range(args.warmup):
            w.step()
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words and words[0] == "quit":
            break
        if len(words) != 2 or words[0] not in workloads or not words[1].isdigit() or int(words[1]) <= 0:
            print(f'error: expected "resnet32|mlp <steps>", got "{line.strip()}"', flush=True)
            continue
        w = workloads[words[0]]
        times = [w.step() for _ in range(int(words[1]))]
        print(words[0], " ".join(f"{t:.3f}" for t in times), flush=True)


if __name__ == "__main__":
    main()
