// Element-wise kernels of the layers: ReLU forward and backward, dropout.
// One thread per element, grid-stride loops; `real` is float or double, `index_t` int or
// long long (see conv2d.cu).

// Alone (nvcc --ptx this.cu) the file compiles for float and 32-bit indices; the launcher
// defines TINYTRAIN_TYPES and puts its own typedefs in front (runtime.py).
#ifndef TINYTRAIN_TYPES
typedef float real;
typedef int index_t;
#endif

extern "C" __global__ void relu_forward(const real* __restrict__ x, real* __restrict__ y,
                                        index_t n)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (index_t)blockDim.x * gridDim.x) {
        real v = x[i];
        y[i] = v < 0 ? (real)0 : v;
    }
}

// The gradient passes where the forward *output* y is positive: one read of y and g, one
// write, instead of a comparison kernel and a multiplication kernel.
extern "C" __global__ void relu_backward(const real* __restrict__ g, const real* __restrict__ y,
                                         real* __restrict__ dx, index_t n)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (index_t)blockDim.x * gridDim.x) {
        dx[i] = y[i] > 0 ? g[i] : (real)0;
    }
}

// MurmurHash3's 32-bit finaliser: a bijection on 32-bit words that mixes every input bit
// into every output bit (unsigned arithmetic wraps modulo 2^32).
__device__ unsigned int mix32(unsigned int h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

// Whether dropout keeps element i: a counter-based draw, a pure function of (seed, i), so
// every thread computes its own and backward recomputes the forward's mask. The same
// function is written in NumPy in tinytrain/kernels/cpu/layers.py. The index is hashed as
// 64 bits whatever index_t is, so the mask does not depend on the launch's index width.
__device__ bool dropout_keep(unsigned int seed_lo, unsigned int seed_hi,
                             unsigned int threshold, long long i)
{
    unsigned int h = mix32((unsigned int)i ^ seed_lo);
    h = mix32(h ^ (unsigned int)(i >> 32) ^ seed_hi);
    return (h >> 8) >= threshold;
}

// y = x * scale where kept, 0 where dropped. Forward applies it to x, backward to the
// gradient, with the same seed.
extern "C" __global__ void dropout(const real* __restrict__ x, real* __restrict__ y,
                                   index_t n, unsigned int seed_lo, unsigned int seed_hi,
                                   unsigned int threshold, real scale)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (index_t)blockDim.x * gridDim.x) {
        y[i] = dropout_keep(seed_lo, seed_hi, threshold, (long long)i) ? x[i] * scale : (real)0;
    }
}
