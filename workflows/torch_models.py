"""Model factories for real training (PyTorch): each a module-level function, so a factory with
its arguments bound (``functools.partial``) pickles by reference and every worker builds the same
module.

* :func:`small_cnn`: two 3x3 convolutions and a linear layer (digits, 8x8 gray).
* :func:`resnet8`: a ResNet of three stages of one basic block each (He et al. 2016, the CIFAR
  variant), 32-64-128 channels by default, batch norm, global average pooling.
* :func:`mlp`: dense layers with ReLU.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["small_cnn", "resnet8", "mlp"]


def small_cnn(in_channels: int = 1, classes: int = 10, width: int = 16, side: int = 8) -> nn.Module:
    """Conv(3x3, ``width``) - ReLU - Conv(3x3, 2 ``width``) - ReLU - 2x2 max pool - Linear.

    Parameters
    ----------
    in_channels, classes, width, side : int
        Input channels, classes, first layer's channels, the input's side in pixels.

    Examples
    --------
    >>> small_cnn()(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """
    return nn.Sequential(
        nn.Conv2d(in_channels, width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * (side // 2) ** 2, classes),
    )


class _Block(nn.Module):
    """A basic residual block: two 3x3 convolutions with batch norm, a 1x1 projection when the
    shape changes."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.short(x))


class _ResNet(nn.Module):
    def __init__(self, channels, classes: int, in_channels: int):
        super().__init__()
        c0 = channels[0]
        self.stem = nn.Sequential(nn.Conv2d(in_channels, c0, 3, 1, 1, bias=False), nn.BatchNorm2d(c0), nn.ReLU())
        blocks, cin = [], c0
        for k, c in enumerate(channels):
            blocks.append(_Block(cin, c, 1 if k == 0 else 2))
            cin = c
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def resnet8(channels=(32, 64, 128), classes: int = 10, in_channels: int = 3) -> nn.Module:
    """A ResNet-8: a 3x3 stem, three stages of one basic block (the last two halve the side), global
    average pooling, a linear head.

    Parameters
    ----------
    channels : tuple of int
        Each stage's channels.
    classes, in_channels : int

    Examples
    --------
    >>> resnet8()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """
    return _ResNet(tuple(channels), classes, in_channels)


def mlp(features: int = 64, hidden=(32,), classes: int = 10) -> nn.Module:
    """Flatten, then dense layers with ReLU between them.

    Parameters
    ----------
    features : int
        Inputs per sample (pixels x channels).
    hidden : tuple of int
    classes : int

    Examples
    --------
    >>> mlp()(torch.zeros(3, 1, 8, 8)).shape
    torch.Size([3, 10])
    """
    sizes = [features, *hidden, classes]
    layers = [nn.Flatten()]
    for k in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
        if k < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)
