"""PyTorch's half of bench/compare_torch.sh: the programs of bench/compare_ours.cpp in PyTorch.

The CIFAR ResNet-32 of models/resnet.cpp (3x3 convolutions without bias, batch norm, option-A
shortcuts that subsample and zero-pad channels, global average pooling, a linear head; batch 32,
3x32x32) and a 784-1024-1024-10 MLP (batch 128), both SGD with momentum 0.9 and cross entropy,
and the small-op models of bench/small_op_models.cpp (a hand-written LSTM, a binary TreeLSTM
over the same LCG-drawn trees), Adam, and the language models of bench/lm_workloads.cpp
(lstm_lm, transformer_lm on one fixed batch of random tokens, Adam).  Protocol: prints "ready" after warm-up; then each stdin
line "<model> <steps>" runs that many steps and prints "<model> <ms> <ms> ..."; "quit" or end
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


class SmallOpModel:
    """A loss closure over plain tensors and Adam, as bench/small_op_models.cpp."""

    def __init__(self, params, loss):
        self.params, self.loss = params, loss
        self.optimizer = torch.optim.Adam(params, lr=1e-3)

    def step(self):
        t0 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss()
        loss.backward()
        loss.item()
        self.optimizer.step()
        return (time.perf_counter() - t0) * 1e3


def param(*shape, bound):
    return (torch.rand(*shape) * 2 * bound - bound).requires_grad_(True)


def lstm_cell_model():
    n_in, hidden, steps, batch = 128, 128, 50, 64
    bound = 1.0 / hidden**0.5
    w_ih, w_hh, b = param(4 * hidden, n_in, bound=bound), param(4 * hidden, hidden, bound=bound), param(4 * hidden, bound=bound)
    w_out, b_out = param(10, hidden, bound=bound), param(10, bound=bound)
    xs, targets = torch.randn(steps, batch, n_in), torch.randint(0, 10, (batch,))

    def loss():
        h, c = torch.zeros(batch, hidden), torch.zeros(batch, hidden)
        for t in range(steps):
            g = (F.linear(xs[t], w_ih, b) + h @ w_hh.t()).chunk(4, 1)
            c = torch.sigmoid(g[1]) * c + torch.sigmoid(g[0]) * torch.tanh(g[2])
            h = torch.sigmoid(g[3]) * torch.tanh(c)
        return F.cross_entropy(F.linear(h, w_out, b_out), targets)

    return SmallOpModel([w_ih, w_hh, b, w_out, b_out], loss)


class Lcg:
    """The 64-bit LCG of bench/small_op_models.cpp, draw for draw."""

    def __init__(self, seed):
        self.s = seed

    def next(self, n):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.s >> 33) % n


def build_tree(rng, leaves, out):
    """Post-order nodes (left, right, token), as the C++ build()."""
    if leaves == 1:
        out.append((-1, -1, rng.next(100)))
        return len(out) - 1
    k = 1 + rng.next(leaves - 1)
    left = build_tree(rng, k, out)
    right = build_tree(rng, leaves - k, out)
    out.append((left, right, 0))
    return len(out) - 1


def treelstm_model():
    hidden, vocab, n_trees = 64, 100, 16
    bound = 1.0 / hidden**0.5
    emb = param(vocab, hidden, bound=1.0)
    w_leaf, b_leaf = param(3 * hidden, hidden, bound=bound), param(3 * hidden, bound=bound)
    u, b_node = param(5 * hidden, 2 * hidden, bound=bound), param(5 * hidden, bound=bound)
    w_out, b_out = param(5, hidden, bound=bound), param(5, bound=bound)
    rng, trees, labels = Lcg(2024), [], []
    for _ in range(n_trees):
        nodes = []
        build_tree(rng, 2 + rng.next(70), nodes)
        trees.append(nodes)
        labels.append(torch.tensor([rng.next(5)]))

    def loss():
        total = None
        for nodes, label in zip(trees, labels):
            h, c = [None] * len(nodes), [None] * len(nodes)
            for n, (left, right, token) in enumerate(nodes):
                if left < 0:
                    x = F.embedding(torch.tensor([token]), emb)
                    g = F.linear(x, w_leaf, b_leaf).chunk(3, 1)
                    c[n] = torch.sigmoid(g[0]) * torch.tanh(g[2])
                    h[n] = torch.sigmoid(g[1]) * torch.tanh(c[n])
                else:
                    g = F.linear(torch.cat([h[left], h[right]], 1), u, b_node).chunk(5, 1)
                    c[n] = (torch.sigmoid(g[0]) * torch.tanh(g[4]) + torch.sigmoid(g[1]) * c[left]
                            + torch.sigmoid(g[2]) * c[right])
                    h[n] = torch.sigmoid(g[3]) * torch.tanh(c[n])
            l = F.cross_entropy(F.linear(h[-1], w_out, b_out), label)
            total = l if total is None else total + l
        return total / len(trees)

    return SmallOpModel([emb, w_leaf, b_leaf, u, b_node, w_out, b_out], loss)


VOCAB = 1000


class LstmLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, 256)
        self.lstm = nn.LSTM(256, 256, 1, batch_first=True)
        self.head = nn.Linear(256, VOCAB)

    def forward(self, x):
        return self.head(self.lstm(self.embedding(x))[0])


class TransformerLm(nn.Module):
    def __init__(self, d=256, heads=4, ffn=1024, layers=4, max_len=128):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, d)
        self.positions = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, x):
        length = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        h = self.embedding(x) + self.positions(torch.arange(length))
        return self.head(self.encoder(h, mask=mask))


def lm_workload(model, batch, length):
    tokens = torch.randint(0, VOCAB, (batch, length + 1))
    inputs, targets = tokens[:, :length].contiguous(), tokens[:, 1:].contiguous()

    def loss():
        return F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets.reshape(-1))

    return SmallOpModel(list(model.parameters()), loss)


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
        "lstm_cell": lstm_cell_model(),
        "treelstm": treelstm_model(),
        "lstm_lm": lm_workload(LstmLm(), 16, 64),
        "transformer_lm": lm_workload(TransformerLm(), 8, 128),
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
            print(f'error: expected "<model> <steps>", got "{line.strip()}"', flush=True)
            continue
        w = workloads[words[0]]
        times = [w.step() for _ in range(int(words[1]))]
        print(words[0], " ".join(f"{t:.3f}" for t in times), flush=True)


if __name__ == "__main__":
    main()
