// 2-D max and average pooling, forward and backward (PyTorch's semantics, ceil_mode=False).
//
// Output (oh, ow) pools the window of input rows oh*sh - ph .. oh*sh - ph + Kh - 1 (columns
// likewise); positions outside the input are padding. Forward: one thread per output.
// Backward: one thread per *input* element, which gathers from every window containing it
// (the same index map as col2im in conv2d.cu): no atomics, reproducible sums.
// `real` is float or double, `index_t` int or long long (see conv2d.cu).

// Alone (nvcc --ptx this.cu) the file compiles for float and 32-bit indices; the launcher
// defines TINYTRAIN_TYPES and puts its own typedefs in front (runtime.py).
#ifndef TINYTRAIN_TYPES
typedef float real;
typedef int index_t;
#endif

// The window offset k = i*Kw + j of the maximum of one window, by PyTorch's scan: row-major,
// take a value greater than the best so far, or a NaN; padding is never taken.
__device__ index_t window_argmax(const real* __restrict__ x, index_t plane, index_t H,
                                   index_t W, index_t h0, index_t w0, index_t Kh,
                                   index_t Kw)
{
    index_t best_k = -1;
    real best = 0;
    for (index_t i = 0; i < Kh; i++) {
        index_t h = h0 + i;
        if (h < 0 || h >= H) {
            continue;
        }
        for (index_t j = 0; j < Kw; j++) {
            index_t w = w0 + j;
            if (w < 0 || w >= W) {
                continue;
            }
            real v = x[plane + h * W + w];
            if (best_k < 0 || v > best || isnan(v)) {
                best = v;
                best_k = i * Kw + j;
            }
        }
    }
    return best_k;
}

// What an average is divided by: Kh*Kw, or (count_include_pad == 0) the real inputs only.
__device__ real avg_divisor(index_t H, index_t W, index_t h0, index_t w0,
                            index_t Kh, index_t Kw, int count_include_pad)
{
    if (count_include_pad) {
        return (real)(Kh * Kw);
    }
    index_t rows = min(h0 + Kh, H) - max(h0, (index_t)0);
    index_t cols = min(w0 + Kw, W) - max(w0, (index_t)0);
    return (real)(rows * cols);
}

extern "C" __global__ void max_pool_forward(const real* __restrict__ x, real* __restrict__ out,
                                            short* __restrict__ argmax, index_t N,
                                            index_t C, index_t H, index_t W,
                                            index_t Kh, index_t Kw, index_t sh,
                                            index_t sw, index_t ph, index_t pw,
                                            index_t Ho, index_t Wo)
{
    index_t total = N * C * Ho * Wo;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t row = i / Wo;  // (n, c, oh)
        index_t ow = i - row * Wo;
        index_t nc = row / Ho;
        index_t oh = row - nc * Ho;
        index_t plane = nc * H * W;
        index_t h0 = oh * sh - ph;
        index_t w0 = ow * sw - pw;
        index_t k = window_argmax(x, plane, H, W, h0, w0, Kh, Kw);
        out[i] = x[plane + (h0 + k / Kw) * W + w0 + k % Kw];
        argmax[i] = (short)k;
    }
}

// dx[n][c][h][w] = the sum of dy over the windows whose maximum is (h, w). The arg-max is
// found again from x (the same scan as forward), so nothing but x is kept for backward.
extern "C" __global__ void max_pool_backward(const real* __restrict__ dy,
                                             const real* __restrict__ x, real* __restrict__ dx,
                                             index_t N, index_t C, index_t H,
                                             index_t W, index_t Kh, index_t Kw,
                                             index_t sh, index_t sw, index_t ph,
                                             index_t pw, index_t Ho, index_t Wo)
{
    index_t total = N * C * H * W;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t row = i / W;  // (n, c, h)
        index_t w = i - row * W;
        index_t nc = row / H;
        index_t h = row - nc * H;
        real sum = 0;
        for (index_t ki = (h + ph) % sh; ki < Kh && ki <= h + ph; ki += sh) {
            index_t oh = (h + ph - ki) / sh;
            if (oh >= Ho) {
                continue;
            }
            for (index_t kj = (w + pw) % sw; kj < Kw && kj <= w + pw; kj += sw) {
                index_t ow = (w + pw - kj) / sw;
                if (ow >= Wo) {
                    continue;
                }
                index_t k = window_argmax(x, nc * H * W, H, W, oh * sh - ph, ow * sw - pw,
                                            Kh, Kw);
                if (k == ki * Kw + kj) {
                    sum += dy[(nc * Ho + oh) * Wo + ow];
                }
            }
        }
        dx[i] = sum;
    }
}

extern "C" __global__ void avg_pool_forward(const real* __restrict__ x, real* __restrict__ out,
                                            index_t N, index_t C, index_t H,
                                            index_t W, index_t Kh, index_t Kw,
                                            index_t sh, index_t sw, index_t ph,
                                            index_t pw, index_t Ho, index_t Wo,
                                            int count_include_pad)
{
    index_t total = N * C * Ho * Wo;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t row = i / Wo;  // (n, c, oh)
        index_t ow = i - row * Wo;
        index_t nc = row / Ho;
        index_t oh = row - nc * Ho;
        index_t plane = nc * H * W;
        index_t h0 = oh * sh - ph;
        index_t w0 = ow * sw - pw;
        real sum = 0;
        for (index_t h = max(h0, (index_t)0); h < min(h0 + Kh, H); h++) {
            for (index_t w = max(w0, (index_t)0); w < min(w0 + Kw, W); w++) {
                sum += x[plane + h * W + w];
            }
        }
        out[i] = sum / avg_divisor(H, W, h0, w0, Kh, Kw, count_include_pad);
    }
}

extern "C" __global__ void avg_pool_backward(const real* __restrict__ dy, real* __restrict__ dx,
                                             index_t N, index_t C, index_t H,
                                             index_t W, index_t Kh, index_t Kw,
                                             index_t sh, index_t sw, index_t ph,
                                             index_t pw, index_t Ho, index_t Wo,
                                             int count_include_pad)
{
    index_t total = N * C * H * W;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t row = i / W;  // (n, c, h)
        index_t w = i - row * W;
        index_t nc = row / H;
        index_t h = row - nc * H;
        real sum = 0;
        for (index_t ki = (h + ph) % sh; ki < Kh && ki <= h + ph; ki += sh) {
            index_t oh = (h + ph - ki) / sh;
            if (oh >= Ho) {
                continue;
            }
            for (index_t kj = (w + pw) % sw; kj < Kw && kj <= w + pw; kj += sw) {
                index_t ow = (w + pw - kj) / sw;
                if (ow >= Wo) {
                    continue;
                }
                real d = avg_divisor(H, W, oh * sh - ph, ow * sw - pw, Kh, Kw,
                                     count_include_pad);
                sum += dy[(nc * Ho + oh) * Wo + ow] / d;
            }
        }
        dx[i] = sum;
    }
}
