#!/usr/bin/env python3
"""PyTorch twin of `forgia bench W12`: one training step of ResNet-18 (basic blocks, the layout
of `forgia::models::resnet` and of transformers' ResNetForImageClassification: 7x7 stride-2
stem without bias -> BatchNorm -> ReLU -> 3x3 stride-2 max pool; stages of 64, 128, 256, 512
channels with two blocks each, the first block of stages 2-4 striding by 2 with a 1x1
convolution + BatchNorm shortcut; global average pool; Linear(512, 1000)) on random images
[8, 3, 224, 224] in [-1, 1], BatchNorm in training mode, cross-entropy with the labels
(37 i) mod 1000, backward, plain SGD (lr 0.01). Prints one line in the format of
`forgia bench` (median_ms over at least --reps steps or about 3 s, after one warm-up step).

Usage: .venv/bin/python bench/torch_resnet.py [--threads N] [--reps R] [--sizes B,S]
Needs only torch (`.venv/bin/pip install torch==2.15.0`).
"""
import torch
from torch import nn
import torch.nn.functional as F

from bench_timing import median_ms, resnet_args


class ConvNorm(nn.Module):
    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)
        self.norm = nn.BatchNorm2d(cout, eps=1e-5)

    def forward(self, x):
        return self.norm(self.conv(x))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.shortcut = ConvNorm(cin, cout, 1, stride) if cin != cout or stride != 1 else None
        self.conv1 = ConvNorm(cin, cout, 3, stride)
        self.conv2 = ConvNorm(cout, cout, 3, 1)

    def forward(self, x):
        residual = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.conv2(F.relu(self.conv1(x))) + residual)


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.embedder = ConvNorm(3, 64, 7, 2)
        blocks, cin = [], 64
        for i, cout in enumerate([64, 128, 256, 512]):
            stride = 2 if i > 0 else 1
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.classifier = nn.Linear(512, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.embedder(x)), 3, 2, 1)
        x = self.blocks(x)
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    args, b, side = resnet_args()
    model = ResNet18()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.rand(b, 3, side, side) * 2 - 1
    labels = torch.tensor([(i * 37) % 1000 for i in range(b)])

    def step():
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    ms = median_ms(args.reps, step)
    print(f"name=W12 impl=torch median_ms={ms:.3f} extra=batch={b},side={side},threads={args.threads}")


if __name__ == "__main__":
    main()
