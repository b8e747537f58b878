"""Test-only stand-ins for the torchvision parts of PyTorch's tutorials, on tinytrain.data.

torchvision is outside tinytrain's scope. The tutorial copies next to this file change only
their import lines; where they imported torchvision they import this module, which gives:

* ``datasets.MNIST(root, train, download, transform)``: a fixed random part of the bundled
  mnist-mini set (``tinytrain.data.MNISTMini``), so a test runs a few batches, not 60,000
  images;
* ``datasets.CIFAR10(...)``: CIFAR-10's shapes (``float32 [3, 32, 32]`` in [0, 1], ten
  classes) with made-up images that can be learned: each class is a fixed random blocky
  pattern, 60%, plus noise, 40%;
* ``datasets.FashionMNIST(...)``: the same part of mini MNIST (the quickstart only needs
  ten classes of 28x28 images);
* ``transforms.Compose`` / ``ToTensor`` / ``Normalize`` / ``Resize`` (``ToTensor`` gives the
  running library's tensor, see :data:`as_tensor`), ``utils.make_grid`` and
  ``utils.save_image`` (recorded in :data:`saved_images`, nothing written);
* ``io.decode_image`` (of ``.npy`` files) and ``models.vgg16``: a VGG of VGG-16's layout
  made small, built of the running library's layers (:data:`library`).
"""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import numpy as np

from tinytrain.data import Dataset, MNISTMini, Subset

MNIST_SIZES = {True: 1280, False: 500}   # training / test samples the MNIST tests use
CIFAR_SIZES = {True: 1000, False: 400}


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


#: How an array becomes the running library's tensor: ``tests/test_tutorials.py`` sets it to
#: ``tinytrain.tensor`` or ``torch.from_numpy`` before each run, as torchvision's ToTensor
#: gives torch's tensors.
as_tensor = np.asarray


class ToTensor:
    """The data sets here already give float32 ``[C, H, W]`` in [0, 1]: only the type
    changes, to the running library's tensor."""

    def __call__(self, x):
        return as_tensor(np.asarray(x))


class Normalize:
    def __init__(self, mean, std):
        self.mean = np.asarray(mean, np.float32)[:, None, None]
        self.std = np.asarray(std, np.float32)[:, None, None]

    def __call__(self, x):
        return (x - as_tensor(self.mean)) / as_tensor(self.std)


class Resize:
    """``Resize(size)`` of a ``[C, H, W]`` array: the shorter side to ``size`` (nearest
    pixels; the shim's images are already arrays, torchvision's would be PIL images)."""

    def __init__(self, size):
        self.size = size

    def __call__(self, x):
        h, w = x.shape[-2:]
        oh, ow = ((self.size, self.size * w // h) if h <= w else (self.size * h // w, self.size)
                  ) if isinstance(self.size, int) else tuple(self.size)
        rows, cols = np.arange(oh) * h // oh, np.arange(ow) * w // ow
        return x[..., rows[:, None], cols[None, :]]


def mnist(root, train=True, download=False, transform=None, target_transform=None):
    ds = MNISTMini(train=train, transform=transform, target_transform=target_transform)
    keep = np.random.default_rng(0).permutation(len(ds))[:MNIST_SIZES[train]]
    return Subset(ds, keep)


class CIFAR10(Dataset):
    classes = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

    def __init__(self, root, train=True, download=False, transform=None):
        coarse = np.random.default_rng(10).random((10, 3, 8, 8), dtype=np.float32)
        patterns = coarse.repeat(4, axis=2).repeat(4, axis=3)  # one blocky pattern per class
        rng = np.random.default_rng(1 if train else 2)
        n = CIFAR_SIZES[train]
        self.targets = rng.integers(0, 10, n)
        noise = rng.random((n, 3, 32, 32), dtype=np.float32)
        self.data = (0.6 * patterns[self.targets] + 0.4 * noise).astype(np.float32)
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        image = self.data[i]
        return (self.transform(image) if self.transform else image), self.targets[i]


#: ``save_image``'s calls: ``(path, images as float32 [B, C, H, W], keywords)``.
saved_images: list = []


def save_image(tensor, fp, **kwargs):
    """``torchvision.utils.save_image``: records the images (no PNG is written)."""
    saved_images.append((fp, np.array(tensor.detach().numpy()), kwargs))


def make_grid(images, padding=2):
    """``[B, C, H, W]`` -> ``[C, H, B * (W + padding)]``: the images side by side, as a
    tensor of the library the images come from."""
    arr = np.asarray(images)
    pad = np.zeros(arr.shape[1:3] + (padding,), arr.dtype)
    return type(images)(np.concatenate([part for image in arr for part in (image, pad)], axis=2))


datasets = SimpleNamespace(MNIST=mnist, FashionMNIST=mnist, CIFAR10=CIFAR10)
transforms = SimpleNamespace(Compose=Compose, ToTensor=ToTensor, Normalize=Normalize,
                             Resize=Resize)
utils = SimpleNamespace(make_grid=make_grid, save_image=save_image)


def decode_image(path):
    """``torchvision.io.decode_image``: here a ``.npy`` file of a ``uint8 [C, H, W]`` image,
    as the running library's tensor."""
    return as_tensor(np.load(path))


io = SimpleNamespace(decode_image=decode_image)


#: The running library (``tinytrain`` or ``torch``), set by the tests as :data:`as_tensor`.
library: Any = None


def vgg16(weights=None):
    """VGG-16's layout (``features``, ``avgpool``, ``classifier`` with dropout) on 3 x 16 x 16
    images, two conv stages of 8 and 16 channels: an ``nn.Sequential`` of the running
    library's layers. ``weights="IMAGENET1K_V1"`` loads fixed made-up "pretrained" weights."""
    nn = library.nn
    model = nn.Sequential(OrderedDict(
        features=nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True),
                               nn.MaxPool2d(2, 2), nn.Conv2d(8, 16, 3, padding=1),
                               nn.ReLU(inplace=True), nn.MaxPool2d(2, 2)),
        avgpool=nn.AdaptiveAvgPool2d((2, 2)), flatten=nn.Flatten(),
        classifier=nn.Sequential(nn.Linear(64, 32), nn.ReLU(True), nn.Dropout(p=0.5),
                                 nn.Linear(32, 10))))
    if weights is not None:
        rng = np.random.default_rng(16)
        model.load_state_dict({name: as_tensor(rng.standard_normal(tuple(p.shape)).astype(
            np.float32) * 0.1) for name, p in model.state_dict().items()})
    return model


models = SimpleNamespace(vgg16=vgg16)
