# MAML on sine-wave regression (Finn, Abbeel and Levine 2017, section 5.1), written in the idiom
# of the PyTorch notebooks and blog posts that reproduce it: a task distribution of sines with
# random amplitude and phase, a model whose forward also runs on an explicit list of weights,
# the inner step `torch.autograd.grad(loss, weights, create_graph=True)` and fast weights
# `w - inner_lr * g`, a meta-loss summed over a meta-batch of tasks, an outer Adam, and
# first-order MAML (the same without create_graph) for comparison; then both are fine-tuned on
# a new task from K points against a model pretrained on all tasks. Only the import lines
# differ from the PyTorch program (marked "# tinytrain:"), and the number of meta-iterations;
# pyplot is matplotlib_shim.py. tests/test_ports9b.py runs it with tinytrain and with PyTorch.
import copy
from collections import OrderedDict

import numpy as np
import tinytrain as torch  # tinytrain: was import torch
import tinytrain.nn as nn  # tinytrain: was import torch.nn as nn
import tinytrain.nn.functional as F  # tinytrain: was import torch.nn.functional as F
import matplotlib_shim as plt  # tinytrain: was import matplotlib.pyplot as plt


class SineWaveTask:
    def __init__(self):
        self.a = np.random.uniform(0.1, 5.0)
        self.b = np.random.uniform(0, 2 * np.pi)
        self.train_x = None

    def f(self, x):
        return self.a * np.sin(x + self.b)

    def training_set(self, size=10, force_new=False):
        if self.train_x is None and not force_new:
            self.train_x = np.random.uniform(-5, 5, size)
            x = self.train_x
        elif not force_new:
            x = self.train_x
        else:
            x = np.random.uniform(-5, 5, size)
        y = self.f(x)
        return torch.Tensor(x), torch.Tensor(y)

    def test_set(self, size=50):
        x = np.linspace(-5, 5, size)
        y = self.f(x)
        return torch.Tensor(x), torch.Tensor(y)


TRAIN_SIZE = 200
TEST_SIZE = 20
SINE_TRAIN = [SineWaveTask() for _ in range(TRAIN_SIZE)]
SINE_TEST = [SineWaveTask() for _ in range(TEST_SIZE)]


class SineModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(OrderedDict([
            ('l1', nn.Linear(1, 40)),
            ('relu1', nn.ReLU()),
            ('l2', nn.Linear(40, 40)),
            ('relu2', nn.ReLU()),
            ('l3', nn.Linear(40, 1))
        ]))

    def forward(self, x):
        return self.model(x)

    def parameterised(self, x, weights):
        # like forward, but uses ``weights`` instead of ``model.parameters()``
        x = F.linear(x, weights[0], weights[1])
        x = F.relu(x)
        x = F.linear(x, weights[2], weights[3])
        x = F.relu(x)
        x = F.linear(x, weights[4], weights[5])
        return x


class MAML():
    def __init__(self, model, tasks, inner_lr, meta_lr, K=10, inner_steps=1,
                 tasks_per_meta_batch=1000, first_order=False):
        # important objects
        self.tasks = tasks
        self.model = model
        self.weights = list(model.parameters())  # the maml weights we will be meta-optimising
        self.criterion = nn.MSELoss()
        self.meta_optimiser = torch.optim.Adam(self.weights, meta_lr)

        # hyperparameters
        self.inner_lr = inner_lr
        self.meta_lr = meta_lr
        self.K = K
        self.inner_steps = inner_steps  # with the current design of MAML, >1 is unlikely to work well
        self.tasks_per_meta_batch = tasks_per_meta_batch
        self.first_order = first_order

        # metrics
        self.plot_every = 10
        self.print_every = 10
        self.meta_losses = []

    def inner_loop(self, task):
        # reset inner model to current maml weights
        temp_weights = [w.clone() for w in self.weights]

        # perform training on data sampled from task
        X, y = task.training_set(size=self.K, force_new=True)
        X, y = X.unsqueeze(1), y.unsqueeze(1)
        for step in range(self.inner_steps):
            loss = self.criterion(self.model.parameterised(X, temp_weights), y)

            # compute grad and update inner loop weights
            grad = torch.autograd.grad(loss, temp_weights, create_graph=not self.first_order)
            temp_weights = [w - self.inner_lr * g for w, g in zip(temp_weights, grad)]

        # sample new data for meta-update and compute loss
        X, y = task.training_set(size=self.K, force_new=True)
        X, y = X.unsqueeze(1), y.unsqueeze(1)
        loss = self.criterion(self.model.parameterised(X, temp_weights), y)

        return loss

    def main_loop(self, num_iterations):
        epoch_loss = 0

        for iteration in range(1, num_iterations + 1):

            # compute meta loss
            meta_loss = 0
            for i in range(self.tasks_per_meta_batch):
                task = self.tasks[np.random.randint(len(self.tasks))]
                meta_loss += self.inner_loop(task)
            meta_loss = meta_loss / self.tasks_per_meta_batch

            # compute meta gradient of loss with respect to maml weights
            self.meta_optimiser.zero_grad()
            meta_loss.backward()
            self.meta_optimiser.step()

            # log metrics
            epoch_loss += meta_loss.item()

            if iteration % self.print_every == 0:
                print("{}/{}. loss: {:.6f}".format(iteration, num_iterations, epoch_loss / self.plot_every))

            if iteration % self.plot_every == 0:
                self.meta_losses.append(epoch_loss / self.plot_every)
                epoch_loss = 0


torch.manual_seed(0)
np.random.seed(0)
sine_model = SineModel()
first_order_model = copy.deepcopy(sine_model)

maml = MAML(sine_model, SINE_TRAIN, inner_lr=0.01, meta_lr=0.01, K=10,
            tasks_per_meta_batch=4)
maml.main_loop(num_iterations=100)  # tinytrain: fewer steps, was maml.main_loop(num_iterations=10000)

fomaml = MAML(first_order_model, SINE_TRAIN, inner_lr=0.01, meta_lr=0.01, K=10,
              tasks_per_meta_batch=4, first_order=True)
fomaml.main_loop(num_iterations=100)  # tinytrain: fewer steps, was fomaml.main_loop(num_iterations=10000)

plt.plot(maml.meta_losses, label='MAML')
plt.plot(fomaml.meta_losses, label='first-order MAML')
plt.legend()
plt.show()


# a model trained on all the tasks at once, the baseline MAML is compared with
def train_pretrained(model, tasks, steps, lr=0.01):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for t in range(steps):
        task = tasks[np.random.randint(len(tasks))]
        x, y = task.training_set(force_new=True)
        loss = F.mse_loss(model(x[:, None]), y[:, None])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


torch.manual_seed(1)
pretrained = train_pretrained(SineModel(), SINE_TRAIN, steps=400)  # tinytrain: fewer steps, was pretrained = train_pretrained(SineModel(), SINE_TRAIN, steps=40000)


def loss_on_random_task(initial_model, K, num_steps, optim=torch.optim.SGD):
    """train the model on a random test task for num_steps steps of K points, return the
    losses on the task's test set after each"""
    model = SineModel()
    model.load_state_dict(initial_model.state_dict())
    criterion = nn.MSELoss()
    optimiser = optim(model.parameters(), 0.01)

    task = SINE_TEST[np.random.randint(len(SINE_TEST))]
    X, y = task.training_set(size=K)
    X_test, y_test = task.test_set()
    losses = []
    for step in range(num_steps + 1):
        with torch.no_grad():
            losses.append(criterion(model(X_test[:, None]), y_test[:, None]).item())
        loss = criterion(model(X[:, None]), y[:, None])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return losses


def average_losses(initial_model, n_samples, K=10, n_steps=10, optim=torch.optim.SGD):
    avg_losses = [0] * (n_steps + 1)
    for i in range(n_samples):
        losses = loss_on_random_task(initial_model, K, n_steps, optim)
        avg_losses = [l + l_new for l, l_new in zip(avg_losses, losses)]
    avg_losses = [l / n_samples for l in avg_losses]
    return avg_losses


for name, model in [('MAML', maml.model), ('first-order MAML', fomaml.model),
                    ('pretrained', pretrained)]:
    np.random.seed(2)  # the same test tasks and points for each
    losses = average_losses(model, n_samples=10, K=10, n_steps=5)
    print(name, ' '.join('{:.6f}'.format(l) for l in losses))
    plt.plot(losses, label=name)
plt.legend()
plt.title("Average learning trajectory for K=10, starting from initial weights")
plt.xlabel("gradient steps taken with SGD")
plt.show()
