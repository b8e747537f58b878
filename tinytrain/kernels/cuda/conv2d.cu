// 2-D convolution on the GPU: im2col, col2im and the layout kernels around cuBLAS.
// Chapter 4 (notebooks/04_cuda_im2col.ipynb) derives every index here.
//
// The launcher compiles this file with two typedefs in front: `real` is float or double,
// `index_t` is int or long long. Sizes and indices are index_t: the launcher picks int when
// every index of the launch fits in 32 bits, long long otherwise, so no product of sizes can
// overflow. Why bother: a GPU has no integer divider; a `/` or `%` is a sequence of
// instructions, and a 64-bit one a subroutine several times longer than a 32-bit one. For
// the same reason each thread computes its coordinates with as few divisions as it can:
// `j - n * P` instead of `j % P`, once per thread, not once per element. (What each of the
// two changes gained is measured in bench/NOTES_gpu.md.)
// Every kernel is a grid-stride loop: a thread handles elements i, i + (all threads of the
// grid), ..., so any grid size is correct.
//
// The column matrix `col` is [K, cols]: K = C*Kh*Kw rows, row k = (c, ki, kj), and
// cols = nb*Ho*Wo columns, column (n, oh, ow) for the nb images n0 .. n0+nb-1 of a chunk:
//
//     col[(c*Kh + ki)*Kw + kj][n*Ho*Wo + oh*Wo + ow] = x_padded[n0+n][c][oh*sh + ki][ow*sw + kj]
//
// The forward GEMM is then W [Cout, K] @ col [K, cols] = y [Cout, cols], and dW is
// dy_rows [Cout, cols] @ col^T: the sum over the batch happens inside the GEMM.

// Alone (nvcc --ptx this.cu) the file compiles for float and 32-bit indices; the launcher
// defines TINYTRAIN_TYPES and puts its own typedefs in front (runtime.py).
#ifndef TINYTRAIN_TYPES
typedef float real;
typedef int index_t;
#endif

// Thread i copies the Kh*Kw entries of column j that come from channel c (i = c*cols + j).
// For each (ki, kj) the 32 threads of a warp write 32 consecutive floats of one row of col
// (one coalesced transaction) and read 32 pixels of one input row, sw apart. With
// `ones_row`, col has one more row, K, of ones: the backward pass gets the bias gradient
// (the sum of dy over the batch) out of the dW GEMM as its last column.
extern "C" __global__ void im2col(const real* __restrict__ x, real* __restrict__ col,
                                  index_t n0, index_t nb, index_t C, index_t H, index_t W,
                                  index_t Kh, index_t Kw, index_t sh, index_t sw, index_t ph,
                                  index_t pw, index_t Ho, index_t Wo, int ones_row)
{
    index_t P = Ho * Wo;
    index_t cols = nb * P;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < C * cols;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t c = i / cols;
        index_t j = i - c * cols;  // the column: image n, output pixel (oh, ow)
        index_t n = j / P;
        index_t oh = (j - n * P) / Wo;
        index_t ow = j - n * P - oh * Wo;
        index_t plane = ((n0 + n) * C + c) * H * W;
        index_t row = c * Kh * Kw;
        for (index_t ki = 0; ki < Kh; ki++) {
            index_t h = oh * sh - ph + ki;
            for (index_t kj = 0; kj < Kw; kj++) {
                index_t w = ow * sw - pw + kj;
                real v = 0;
                if (h >= 0 && h < H && w >= 0 && w < W) {
                    v = x[plane + h * W + w];
                }
                col[(row + ki * Kw + kj) * cols + j] = v;
            }
        }
        if (ones_row && c == 0) {
            col[C * Kh * Kw * cols + j] = 1;
        }
    }
}

// The gradient of im2col, written as a *gather*: one thread per input element x[n][c][h][w]
// sums the column entries that im2col copied it to. Kernel row ki reads input row h at
// output row oh exactly when oh*sh + ki = h + ph: starting from the largest such oh,
// oh = (h + ph) / sh with ki = (h + ph) - oh*sh, each next kernel row ki + sh pairs with
// oh - 1, down to oh = 0 (columns likewise). No two threads write the same element: no
// atomics, and the sum is always added in the same order, so the result is bit-for-bit
// reproducible.
extern "C" __global__ void col2im(const real* __restrict__ dcol, real* __restrict__ dx,
                                  index_t n0, index_t nb, index_t C, index_t H, index_t W,
                                  index_t Kh, index_t Kw, index_t sh, index_t sw, index_t ph,
                                  index_t pw, index_t Ho, index_t Wo)
{
    index_t P = Ho * Wo;
    index_t cols = nb * P;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < nb * C * H * W;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t row = i / W;  // (n, c, h): row of the image
        index_t w = i - row * W;
        index_t plane = row / H;  // (n, c)
        index_t h = row - plane * H;
        index_t n = plane / C;
        index_t c = plane - n * C;
        index_t oh_last = (h + ph) / sh;
        index_t ow_last = (w + pw) / sw;
        real sum = 0;
        index_t oh = oh_last;
        for (index_t ki = h + ph - oh_last * sh; ki < Kh && oh >= 0; ki += sh) {
            if (oh < Ho) {
                index_t ow = ow_last;
                for (index_t kj = w + pw - ow_last * sw; kj < Kw && ow >= 0; kj += sw) {
                    if (ow < Wo) {
                        sum += dcol[((c * Kh + ki) * Kw + kj) * cols + n * P + oh * Wo + ow];
                    }
                    ow -= 1;
                }
            }
            oh -= 1;
        }
        dx[n0 * C * H * W + i] = sum;
    }
}

// out[n][c][p] = y[c][n*P + p] (+ b[c]): the GEMM's [C, N*P] result laid out as NCHW, with
// the bias added in the same pass. Reads and writes are both consecutive in p.
extern "C" __global__ void rows_to_nchw(const real* __restrict__ y, const real* __restrict__ b,
                                        real* __restrict__ out, index_t N, index_t C,
                                        index_t P, int has_bias)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < N * C * P;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t nc = i / P;
        index_t p = i - nc * P;
        index_t n = nc / C;
        index_t c = nc - n * C;
        real v = y[c * N * P + n * P + p];
        if (has_bias) {
            v += b[c];
        }
        out[i] = v;
    }
}

// The way back: dy [N, C, P] -> rows [C, N*P], one thread per element (writes consecutive
// in the rows, reads consecutive in p).
extern "C" __global__ void nchw_to_rows(const real* __restrict__ dy, real* __restrict__ rows,
                                        index_t N, index_t C, index_t P)
{
    index_t NP = N * P;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < C * NP;
         i += (index_t)blockDim.x * gridDim.x) {
        index_t c = i / NP;
        index_t j = i - c * NP;
        index_t n = j / P;
        rows[i] = dy[(n * C + c) * P + (j - n * P)];
    }
}

// sums[c] = the sum of dy[:, c, :] for dy [N, C, P] (a bias gradient) as a block reduction:
// one block per channel, each thread sums a strided share in a register, then the block adds
// the partial sums in shared memory in a fixed tree (so the result is reproducible). The
// block size must be a power of two, at most 256.
extern "C" __global__ void channel_sum(const real* __restrict__ dy, real* __restrict__ sums,
                                       index_t N, index_t C, index_t P)
{
    __shared__ real partial[256];
    index_t NP = N * P;
    for (index_t c = blockIdx.x; c < C; c += gridDim.x) {
        real s = 0;
        for (index_t j = threadIdx.x; j < NP; j += blockDim.x) {
            index_t n = j / P;
            s += dy[(n * C + c) * P + (j - n * P)];
        }
        partial[threadIdx.x] = s;
        __syncthreads();
        for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
            if (threadIdx.x < stride) {
                partial[threadIdx.x] += partial[threadIdx.x + stride];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            sums[c] = partial[0];
        }
        __syncthreads();
    }
}

// dW as slices: the dW GEMM of a large batch has a tiny output (Cout x K, e.g. 16 x 25) and
// a huge inner dimension (e.g. 401,408 columns), which one GEMM computes on a few
// multiprocessors. The launcher cuts the columns into S slices, one GEMM each (a batched
// call), into part [S, Cout, Kb]; this kernel adds the S partial products, in slice order.
// Kb = K + 1 when col had a ones row: the last column of each row is then the bias
// gradient, written to db. With `accumulate`, the sums are added to dw and db (the chunks
// of a batch too large for one column buffer).
extern "C" __global__ void sum_slices(const real* __restrict__ part, real* __restrict__ dw,
                                      real* __restrict__ db, index_t S, index_t Cout,
                                      index_t K, index_t Kb, int accumulate)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < Cout * Kb;
         i += (index_t)blockDim.x * gridDim.x) {
        real s = 0;
        for (index_t t = 0; t < S; t++) {
            s += part[t * Cout * Kb + i];
        }
        index_t co = i / Kb;
        index_t k = i - co * Kb;
        if (k < K) {
            dw[co * K + k] = accumulate ? dw[co * K + k] + s : s;
        } else {
            db[co] = accumulate ? db[co] + s : s;
        }
    }
}

// y[i] += b[(i / inner) % C]: a bias along axis 1 of [outer, C, inner] (a linear layer's
// [N, C] output has inner = 1).
extern "C" __global__ void add_bias(real* __restrict__ y, const real* __restrict__ b,
                                    index_t total, index_t C, index_t inner)
{
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (index_t)blockDim.x * gridDim.x) {
        y[i] = y[i] + b[(i / inner) % C];
    }
}
