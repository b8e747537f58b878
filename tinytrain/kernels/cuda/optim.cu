// Optimizer updates, one fused kernel per parameter: PyTorch's formulas, operation by
// operation in the order of tinytrain/kernels/cpu/optim.py (the module is compiled with
// --fmad=false, so no multiply-add is contracted and float32 results match the CPU's).
// The host computes the per-step scalars (bias corrections) and passes them by value.

// Alone (nvcc --ptx this.cu) the file compiles for float and 32-bit indices; the launcher
// defines TINYTRAIN_TYPES and puts its own typedefs in front (runtime.py).
#ifndef TINYTRAIN_TYPES
typedef float real;
typedef int index_t;
#endif

extern "C" __global__ void adam_step(real* __restrict__ p, const real* __restrict__ g,
                                     real* __restrict__ m, real* __restrict__ v, index_t n,
                                     real step_size, real b1, real one_minus_b1, real b2,
                                     real one_minus_b2, real eps, real wd, real bias2_sqrt)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (index_t)blockDim.x * gridDim.x) {
        real gi = g[i];
        if (wd != 0) {
            gi = gi + wd * p[i];
        }
        real mi = m[i] * b1;
        mi = mi + one_minus_b1 * gi;
        real vi = v[i] * b2;
        vi = vi + one_minus_b2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        real denom = sqrt(vi) / bias2_sqrt + eps;
        p[i] = p[i] - step_size * mi / denom;
    }
}

// buf (the momentum) is read only when use_momentum; first == 1 fills it with the gradient.
extern "C" __global__ void sgd_step(real* __restrict__ p, const real* __restrict__ g,
                                    real* __restrict__ buf, index_t n, real lr,
                                    real momentum, real one_minus_dampening, real wd,
                                    int nesterov, int first, int use_momentum)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (index_t)blockDim.x * gridDim.x) {
        real gi = g[i];
        if (wd != 0) {
            gi = gi + wd * p[i];
        }
        if (use_momentum) {
            real b = gi;
            if (!first) {
                b = buf[i] * momentum;
                b = b + one_minus_dampening * gi;
            }
            buf[i] = b;
            gi = nesterov ? gi + momentum * b : b;
        }
        p[i] = p[i] - lr * gi;
    }
}
