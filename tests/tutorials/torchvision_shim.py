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
  running library's tensor, see :data:`as_tensor`, of its default dtype as torchvision's
  does for an image), ``Pad`` / ``RandomHorizontalFlip`` / ``RandomCrop`` (their draws from
  NumPy's global generator, which the tests seed alike for both runs), ``utils.make_grid``
  and ``utils.save_image`` (recorded in :data:`saved_images`, nothing written);
* ``io.decode_image`` (of ``.npy`` files), ``models.vgg16`` and ``models.resnet18``: a VGG of
  VGG-16's layout and a ResNet of ResNet-18's, made small, built of the running library's
  layers (:data:`library`).
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
    """The data sets here already give float32 ``[C, H, W]`` in [0, 1] (for torchvision's
    images): the type changes, to the running library's tensor, and a float32 image becomes
    the library's default dtype, as torchvision converts an image (``float64`` under
    ``set_default_dtype(torch.float64)``)."""

    def __call__(self, x):
        x = np.asarray(x)
        if x.dtype == np.float32 and library is not None:
            x = x.astype(str(library.get_default_dtype()).removeprefix("torch."))
        return as_tensor(x)


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


class Pad:
    """``Pad(padding)``: zeros around a ``[C, H, W]`` image (torchvision's default fill)."""

    def __init__(self, padding):
        self.padding = padding

    def __call__(self, x):
        p = self.padding
        return np.pad(x, ((0, 0), (p, p), (p, p)))


class RandomHorizontalFlip:
    """``RandomHorizontalFlip(p=0.5)``: the image mirrored with probability ``p`` (one draw of
    NumPy's global generator per image; torchvision draws ``torch.rand(1)``)."""

    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, x):
        return np.ascontiguousarray(x[..., ::-1]) if np.random.random() < self.p else x


class RandomCrop:
    """``RandomCrop(size)``: a ``size`` x ``size`` window at a random place (torchvision's
    ``get_params``: no draw when the image has the window's size)."""

    def __init__(self, size):
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, x):
        h, w = x.shape[-2:]
        th, tw = self.size
        if (h, w) == (th, tw):
            return x
        i, j = np.random.randint(0, h - th + 1), np.random.randint(0, w - tw + 1)
        return x[..., i:i + th, j:j + tw]


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
                             Resize=Resize, Pad=Pad, RandomHorizontalFlip=RandomHorizontalFlip,
                             RandomCrop=RandomCrop)
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


def _resnet_classes():
    """torchvision's ``BasicBlock`` and ``ResNet`` on the running library's ``nn.Module``, made
    once for each library and kept in this module under ``BasicBlock_<library>`` /
    ``ResNet_<library>``, where pickle finds them (``torch.save(resnet, ...)`` of a whole
    model)."""
    name = library.__name__
    if f"ResNet_{name}" in globals():
        return globals()[f"BasicBlock_{name}"], globals()[f"ResNet_{name}"]
    nn = library.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride,
                                                          bias=False), nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self, widths=(4, 8, 8, 16), num_classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            inplanes = widths[0]
            for k, planes in enumerate(widths):
                setattr(self, f"layer{k + 1}", nn.Sequential(
                    BasicBlock(inplanes, planes, 1 if k == 0 else 2), BasicBlock(planes, planes)))
                inplanes = planes
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(widths[-1], num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(library.flatten(self.avgpool(x), 1))

    for cls in (BasicBlock, ResNet):
        cls.__name__ = cls.__qualname__ = f"{cls.__name__}_{name}"
        cls.__module__ = __name__
        globals()[cls.__name__] = cls
    return BasicBlock, ResNet


def resnet18(pretrained=False):
    """ResNet-18's layout (a 7x7 stride-2 stem, max pooling, four stages of two
    ``BasicBlock``s, global average pooling, ``fc``) with 4, 8, 8 and 16 channels, of the
    running library's layers; ``pretrained=True`` loads fixed made-up weights."""
    model = _resnet_classes()[1]()
    if pretrained:
        rng = np.random.default_rng(18)
        state = {}
        for key, value in model.state_dict().items():
            a = rng.standard_normal(tuple(value.shape)).astype(np.float32) * 0.1
            if key.endswith("running_var"):
                a = 1 + np.abs(a)
            state[key] = value if key.endswith("num_batches_tracked") else as_tensor(a)
        model.load_state_dict(state)
    return model


models = SimpleNamespace(vgg16=vgg16, resnet18=resnet18)
