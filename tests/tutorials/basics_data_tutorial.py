# PyTorch's "Learn the Basics: Datasets & DataLoaders" (pytorch/tutorials, beginner_source/
# basics/data_tutorial.py, 2025; BSD-3-Clause), its code cells ported to tinytrain by
# changing only the import lines (marked "# tinytrain:"): torchvision, pyplot and pandas are
# the test-only shims next to this file. tests/test_ports9.py runs it with tinytrain and with
# PyTorch.
import tinytrain as torch  # tinytrain: was import torch
from tinytrain.utils.data import Dataset  # tinytrain: was from torch.utils.data import Dataset
from torchvision_shim import datasets  # tinytrain: was from torchvision import datasets
from torchvision_shim import ToTensor  # tinytrain: was from torchvision.transforms import ToTensor
import matplotlib_shim as plt  # tinytrain: was import matplotlib.pyplot as plt


training_data = datasets.FashionMNIST(
    root="data",
    train=True,
    download=True,
    transform=ToTensor()
)

test_data = datasets.FashionMNIST(
    root="data",
    train=False,
    download=True,
    transform=ToTensor()
)

labels_map = {
    0: "T-Shirt",
    1: "Trouser",
    2: "Pullover",
    3: "Dress",
    4: "Coat",
    5: "Sandal",
    6: "Shirt",
    7: "Sneaker",
    8: "Bag",
    9: "Ankle Boot",
}
figure = plt.figure(figsize=(8, 8))
cols, rows = 3, 3
for i in range(1, cols * rows + 1):
    sample_idx = torch.randint(len(training_data), size=(1,)).item()
    img, label = training_data[sample_idx]
    figure.add_subplot(rows, cols, i)
    plt.title(labels_map[label])
    plt.axis("off")
    plt.imshow(img.squeeze(), cmap="gray")
plt.show()

import os
import pandas_shim as pd  # tinytrain: was import pandas as pd
from torchvision_shim import decode_image  # tinytrain: was from torchvision.io import decode_image

class CustomImageDataset(Dataset):
    def __init__(self, annotations_file, img_dir, transform=None, target_transform=None):
        self.img_labels = pd.read_csv(annotations_file)
        self.img_dir = img_dir
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        img_path = os.path.join(self.img_dir, self.img_labels.iloc[idx, 0])
        image = decode_image(img_path)
        label = self.img_labels.iloc[idx, 1]
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label

from tinytrain.utils.data import DataLoader  # tinytrain: was from torch.utils.data import DataLoader

train_dataloader = DataLoader(training_data, batch_size=64, shuffle=True)
test_dataloader = DataLoader(test_data, batch_size=64, shuffle=True)

# Display image and label.
train_features, train_labels = next(iter(train_dataloader))
print(f"Feature batch shape: {train_features.size()}")
print(f"Labels batch shape: {train_labels.size()}")
img = train_features[0].squeeze()
label = train_labels[0]
plt.imshow(img, cmap="gray")
plt.show()
print(f"Label: {label}")
