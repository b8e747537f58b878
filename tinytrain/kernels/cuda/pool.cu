// 2-D max and average pooling, forward and backward (PyTorch's semantics, ceil_mode=False).
//
// Output (oh, ow) pools the window of input rows oh*sh - ph .. oh*sh - ph + Kh - 1 (columns
// likewise); positions outside the input are padding. Forward: one thread per output.
// Backward: one thread per *input* element, which gathers from every window containing it
// (the same index map as col2im in conv2d.cu): no atomics, reproducible sums.

// The window offset k = i*Kw + j of the maximum of one window, by PyTorch's scan: row-major,
// take a value greater than the best so far, or a NaN; padding is never taken.
__device__ long long window_argmax(const real* __restrict__ x, long long plane, long long H,
                                   long long W, long long h0, long long w0, long long Kh,
                                   long long Kw)
{
    long long best_k = -1;
    real best = 0;
    for (long long i = 0; i < Kh; i++) {
        long long h = h0 + i;
        if (h < 0 || h >= H) {
            continue;
        }
        for (long long j = 0; j < Kw; j++) {
            long long w = w0 + j;
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
__device__ real avg_divisor(long long H, long long W, long long h0, long long w0,
                            long long Kh, long long Kw, int count_include_pad)
{
    if (count_include_pad) {
        return (real)(Kh * Kw);
    }
    long long rows = min(h0 + Kh, H) - max(h0, 0LL);
    long long cols = min(w0 + Kw, W) - max(w0, 0LL);
    return (real)(rows * cols);
}

extern "C" __global__ void max_pool_forward(const real* __restrict__ x, real* __restrict__ out,
                                            short* __restrict__ argmax, long long N,
                                            long long C, long long H, long long W,
                                            long long Kh, long long Kw, long long sh,
                                            long long sw, long long ph, long long pw,
                                            long long Ho, long long Wo)
{
    long long total = N * C * Ho * Wo;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long ow = i % Wo;
        long long oh = (i / Wo) % Ho;
        long long plane = (i / (Ho * Wo)) * H * W;
        long long h0 = oh * sh - ph;
        long long w0 = ow * sw - pw;
        long long k = window_argmax(x, plane, H, W, h0, w0, Kh, Kw);
        out[i] = x[plane + (h0 + k / Kw) * W + w0 + k % Kw];
        argmax[i] = (short)k;
    }
}

// dx[n][c][h][w] = the sum of dy over the windows whose maximum is (h, w). The arg-max is
// found again from x (the same scan as forward), so nothing but x is kept for backward.
extern "C" __global__ void max_pool_backward(const real* __restrict__ dy,
                                             const real* __restrict__ x, real* __restrict__ dx,
                                             long long N, long long C, long long H,
                                             long long W, long long Kh, long long Kw,
                                             long long sh, long long sw, long long ph,
                                             long long pw, long long Ho, long long Wo)
{
    long long total = N * C * H * W;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long w = i % W;
        long long h = (i / W) % H;
        long long nc = i / (H * W);
        real sum = 0;
        for (long long ki = (h + ph) % sh; ki < Kh && ki <= h + ph; ki += sh) {
            long long oh = (h + ph - ki) / sh;
            if (oh >= Ho) {
                continue;
            }
            for (long long kj = (w + pw) % sw; kj < Kw && kj <= w + pw; kj += sw) {
                long long ow = (w + pw - kj) / sw;
                if (ow >= Wo) {
                    continue;
                }
                long long k = window_argmax(x, nc * H * W, H, W, oh * sh - ph, ow * sw - pw,
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
                                            long long N, long long C, long long H,
                                            long long W, long long Kh, long long Kw,
                                            long long sh, long long sw, long long ph,
                                            long long pw, long long Ho, long long Wo,
                                            int count_include_pad)
{
    long long total = N * C * Ho * Wo;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long ow = i % Wo;
        long long oh = (i / Wo) % Ho;
        long long plane = (i / (Ho * Wo)) * H * W;
        long long h0 = oh * sh - ph;
        long long w0 = ow * sw - pw;
        real sum = 0;
        for (long long h = max(h0, 0LL); h < min(h0 + Kh, H); h++) {
            for (long long w = max(w0, 0LL); w < min(w0 + Kw, W); w++) {
                sum += x[plane + h * W + w];
            }
        }
        out[i] = sum / avg_divisor(H, W, h0, w0, Kh, Kw, count_include_pad);
    }
}

extern "C" __global__ void avg_pool_backward(const real* __restrict__ dy, real* __restrict__ dx,
                                             long long N, long long C, long long H,
                                             long long W, long long Kh, long long Kw,
                                             long long sh, long long sw, long long ph,
                                             long long pw, long long Ho, long long Wo,
                                             int count_include_pad)
{
    long long total = N * C * H * W;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long w = i % W;
        long long h = (i / W) % H;
        long long nc = i / (H * W);
        real sum = 0;
        for (long long ki = (h + ph) % sh; ki < Kh && ki <= h + ph; ki += sh) {
            long long oh = (h + ph - ki) / sh;
            if (oh >= Ho) {
                continue;
            }
            for (long long kj = (w + pw) % sw; kj < Kw && kj <= w + pw; kj += sw) {
                long long ow = (w + pw - kj) / sw;
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
