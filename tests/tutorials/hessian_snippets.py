# Second-order snippets as people paste them from forum answers and docs: the Hessian of a
# scalar function with torch.autograd.functional.hessian, Hessian-vector products by double
# backward (and autograd.functional.hvp / vhp), the full Hessian row by row, the Hessian of a
# network's loss with respect to its flattened parameters, Newton's method on logistic
# regression (torch.linalg.solve and torch.inverse), and the Jacobian of a small network's
# output with torch.autograd.functional.jacobian. Only the import lines differ from the
# PyTorch program (marked "# tinytrain:"). tests/test_ports9b.py runs it with tinytrain and
# with PyTorch.
import tinytrain as torch  # tinytrain: was import torch
import tinytrain.nn as nn  # tinytrain: was import torch.nn as nn
import tinytrain.nn.functional as F  # tinytrain: was import torch.nn.functional as F
from tinytrain.autograd.functional import hessian, jacobian, hvp, vhp  # tinytrain: was from torch.autograd.functional import hessian, jacobian, hvp, vhp

torch.manual_seed(0)

# --- the Hessian of a scalar function
def f(x):
    return (x ** 3).sum() + x[0] * x[1] + (x[2] * x).exp().sum()

x = torch.tensor([1.0, 2.0, 0.5])
H = hessian(f, x)
print("hessian:", H)
print("symmetric:", torch.allclose(H, H.T))

# several inputs: a tuple of tuples of blocks
def g(a, b):
    return (a * b).sum() ** 2 + (a ** 2 * b.tanh()).sum()

blocks = hessian(g, (torch.randn(3), torch.randn(3)))
print([[tuple(h.shape) for h in row] for row in blocks])
print(blocks[0][1])

# --- Hessian-vector product by double backward
x = torch.randn(5, requires_grad=True)
y = (x ** 2).sum() * x.sum() + torch.tanh(x).pow(3).sum()
grad = torch.autograd.grad(y, x, create_graph=True)[0]
v = torch.randn(5)
Hv = torch.autograd.grad(grad, x, grad_outputs=v, retain_graph=True)[0]
print("Hv:", Hv)

# the same by grad @ v then backward
x.grad = None
(grad @ v).backward(retain_graph=True)
print("Hv by backward:", x.grad)

# the full Hessian, one row at a time
rows = [torch.autograd.grad(grad[i], x, retain_graph=True)[0] for i in range(x.numel())]
H_full = torch.stack(rows)
print("rows @ v == Hv:", torch.allclose(H_full @ v, Hv))

def cubic(x):
    return (x ** 2).sum() * x.sum() + torch.tanh(x).pow(3).sum()

_, Hv2 = hvp(cubic, x.detach(), v)
_, vH = vhp(cubic, x.detach(), v)
print("functional hvp:", torch.allclose(Hv2, Hv), torch.allclose(vH, Hv))

# --- the Hessian of a network's loss with respect to all of its parameters
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
X = torch.randn(16, 3)
target = torch.randn(16, 1)
loss = F.mse_loss(model(X), target)
params = [p for p in model.parameters()]
grads = torch.autograd.grad(loss, params, create_graph=True)
flat_grad = torch.cat([g.view(-1) for g in grads])
n = flat_grad.numel()
hessian_rows = []
for i in range(n):
    row = torch.autograd.grad(flat_grad[i], params, retain_graph=True)
    hessian_rows.append(torch.cat([r.reshape(-1) for r in row]))
H_params = torch.stack(hessian_rows)
print("parameters:", n, "hessian:", tuple(H_params.shape))
print("trace: %.10f" % H_params.trace().item())
print("max asymmetry: %.3e" % (H_params - H_params.t()).abs().max().item())

# --- Newton's method for logistic regression
N, D = 200, 3
X = torch.randn(N, D)
true_w = torch.tensor([1.5, -2.0, 0.5])
y = (torch.rand(N) < torch.sigmoid(X @ true_w)).float()
w = torch.zeros(D, requires_grad=True)
for it in range(6):
    loss = F.binary_cross_entropy_with_logits(X @ w, y)
    g = torch.autograd.grad(loss, w, create_graph=True)[0]
    H = torch.stack([torch.autograd.grad(g[i], w, retain_graph=True)[0] for i in range(D)])
    with torch.no_grad():
        w -= torch.linalg.solve(H, g)
    print("newton %d: loss %.12f |grad| %.3e" % (it, loss.item(), g.norm().item()))
print("w:", w)

# the same with autograd.functional.hessian and the inverse
def nll(w):
    return F.binary_cross_entropy_with_logits(X @ w, y)

w2 = torch.zeros(D)
for it in range(6):
    w2.requires_grad_(True)
    g2 = torch.autograd.grad(nll(w2), w2)[0]
    H2 = hessian(nll, w2.detach())
    w2 = (w2 - torch.inverse(H2) @ g2).detach()
print("same minimum:", torch.allclose(w, w2))

# --- the Jacobian of a small network's output
net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
x = torch.randn(3)
J = jacobian(net, x)
print("jacobian:", tuple(J.shape))
print(J)
xs = torch.randn(4, 3)
J_batch = jacobian(lambda xs: net(xs).sum(0), xs)
print("batched jacobian:", tuple(J_batch.shape))
print(torch.allclose(J_batch[:, 0], jacobian(net, xs[0])))
Jw = jacobian(lambda W: F.linear(torch.tanh(F.linear(x, W, net[0].bias)), net[2].weight, net[2].bias), net[0].weight)
print("jacobian in the weights:", tuple(Jw.shape))
