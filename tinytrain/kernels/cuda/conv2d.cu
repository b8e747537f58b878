// 2-D convolution on the GPU: im2col, col2im and the two layout changes around cuBLAS.
// Chapter 4 (notebooks/04_cuda_im2col.ipynb) derives every index here.
//
// `real` is float or double: the launcher compiles this file once per dtype, with
// "typedef float real;" or "typedef double real;" in front. Every index is a long long,
// so no product of sizes can overflow 32 bits. Every kernel is a grid-stride loop: a
// thread handles elements i, i + (all threads of the grid), ..., so any grid size is correct.
//
// The column matrix `col` is [K, cols]: K = C*Kh*Kw rows, row k = (c, ki, kj), and
// cols = nb*Ho*Wo columns, column (n, oh, ow) for the nb images n0 .. n0+nb-1 of a chunk:
//
//     col[(c*Kh + ki)*Kw + kj][n*Ho*Wo + oh*Wo + ow] = x_padded[n0+n][c][oh*sh + ki][ow*sw + kj]
//
// Thread i writes col[i], so the 32 threads of a warp write 32 consecutive floats of one
// row (one coalesced transaction) and read 32 pixels of one input row, sw apart.
// The forward GEMM is then W [Cout, K] @ col [K, cols] = y [Cout, cols], and dW is
// dy_rows [Cout, cols] @ col^T: one GEMM summed over the whole batch.

extern "C" __global__ void im2col(const real* __restrict__ x, real* __restrict__ col,
                                  long long n0, long long nb, long long C, long long H,
                                  long long W, long long Kh, long long Kw, long long sh,
                                  long long sw, long long ph, long long pw, long long Ho,
                                  long long Wo)
{
    long long P = Ho * Wo;
    long long cols = nb * P;
    long long total = C * Kh * Kw * cols;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long k = i / cols;
        long long n = (i % cols) / P;
        long long oh = (i % P) / Wo;
        long long ow = i % Wo;
        long long c = k / (Kh * Kw);
        long long ki = (k / Kw) % Kh;
        long long kj = k % Kw;
        long long h = oh * sh - ph + ki;
        long long w = ow * sw - pw + kj;
        real v = 0;
        if (h >= 0 && h < H && w >= 0 && w < W) {
            v = x[((n0 + n) * C + c) * H * W + h * W + w];
        }
        col[i] = v;
    }
}

// The gradient of im2col, written as a *gather*: one thread per input element x[n][c][h][w]
// sums the column entries that im2col copied it to. Kernel row ki reads input row h at
// output row oh exactly when oh*sh + ki = h + ph, so ki runs over the values congruent to
// h + ph modulo sh (and oh = (h + ph - ki) / sh is then exact). No two threads write the
// same element: no atomics, and the sum is always added in the same order, so the result
// is bit-for-bit reproducible.
extern "C" __global__ void col2im(const real* __restrict__ dcol, real* __restrict__ dx,
                                  long long n0, long long nb, long long C, long long H,
                                  long long W, long long Kh, long long Kw, long long sh,
                                  long long sw, long long ph, long long pw, long long Ho,
                                  long long Wo)
{
    long long P = Ho * Wo;
    long long cols = nb * P;
    long long total = nb * C * H * W;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long w = i % W;
        long long h = (i / W) % H;
        long long c = (i / (H * W)) % C;
        long long n = i / (C * H * W);
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
                sum += dcol[((c * Kh + ki) * Kw + kj) * cols + n * P + oh * Wo + ow];
            }
        }
        dx[n0 * C * H * W + i] = sum;
    }
}

// out[n][c][p] = y[c][n*P + p] (+ b[c]): the GEMM's [C, N*P] result laid out as NCHW, with
// the bias added in the same pass. Reads and writes are both consecutive in p.
extern "C" __global__ void rows_to_nchw(const real* __restrict__ y, const real* __restrict__ b,
                                        real* __restrict__ out, long long N, long long C,
                                        long long P, int has_bias)
{
    long long total = N * C * P;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long p = i % P;
        long long c = (i / P) % C;
        long long n = i / (C * P);
        real v = y[c * N * P + n * P + p];
        if (has_bias) {
            v += b[c];
        }
        out[i] = v;
    }
}

// The way back: dy [N, C, P] -> rows [C, N*P] (if write_rows), and the bias gradient
// db[c] = sum of dy[:, c, :] (if want_sum) as a block reduction: one block per channel,
// each thread sums a strided share in a register, then the block adds the partial sums
// in shared memory in a fixed tree (so the result is reproducible). The block size must be
// a power of two, at most 256.
extern "C" __global__ void nchw_to_rows(const real* __restrict__ dy, real* __restrict__ rows,
                                        real* __restrict__ db, long long N, long long C,
                                        long long P, int write_rows, int want_sum)
{
    __shared__ real partial[256];
    long long NP = N * P;
    for (long long c = blockIdx.x; c < C; c += gridDim.x) {
        real s = 0;
        for (long long j = threadIdx.x; j < NP; j += blockDim.x) {
            real v = dy[((j / P) * C + c) * P + j % P];
            if (write_rows) {
                rows[c * NP + j] = v;
            }
            s += v;
        }
        partial[threadIdx.x] = s;
        __syncthreads();
        for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
            if (threadIdx.x < stride) {
                partial[threadIdx.x] += partial[threadIdx.x + stride];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0 && want_sum) {
            db[c] = partial[0];
        }
        __syncthreads();
    }
}

// y[i] += b[(i / inner) % C]: a bias along axis 1 of [outer, C, inner] (a linear layer's
// [N, C] output has inner = 1).
extern "C" __global__ void add_bias(real* __restrict__ y, const real* __restrict__ b,
                                    long long total, long long C, long long inner)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        y[i] = y[i] + b[(i / inner) % C];
    }
}
