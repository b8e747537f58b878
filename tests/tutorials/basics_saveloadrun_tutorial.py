# PyTorch's "Learn the Basics: Save and Load the Model" (pytorch/tutorials, beginner_source/
# basics/saveloadrun_tutorial.py, 2025; BSD-3-Clause), its code cells ported to tinytrain by
# changing only the import lines (marked "# tinytrain:"); torchvision's VGG-16 is
# torchvision_shim.py's small one. tests/test_ports9.py runs it with tinytrain and PyTorch.
import tinytrain as torch  # tinytrain: was import torch
from torchvision_shim import models  # tinytrain: was import torchvision.models as models

model = models.vgg16(weights='IMAGENET1K_V1')
torch.save(model.state_dict(), 'model_weights.pth')

model = models.vgg16() # we do not specify ``weights``, i.e. create untrained model
model.load_state_dict(torch.load('model_weights.pth', weights_only=True))
model.eval()

torch.save(model, 'model.pth')

model = torch.load('model.pth', weights_only=False)
