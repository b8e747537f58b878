// Cross-entropy of logits [N, C] against int64 targets [N], forward and backward, each one
// kernel (log-softmax, the pick of the target and the reduction fused).
//
// Targets are checked on the GPU: a target outside [0, C) gives a NaN loss for its row and
// is reported through err, three int64s: err[0] = how many rows had one, err[1] = the
// first such row, err[2] = its target. The launcher copies err to pinned host memory
// asynchronously and raises the ValueError a few calls later, without a sync per step.
// A target equal to `ignore` (PyTorch's ignore_index, -100) is not an error: its row's loss
// and gradient are 0 and the mean is over the other rows (0/0 = NaN if none is left).
//
// reduction: 0 = "none" (out[N]), 1 = "mean", 2 = "sum" (out[1]). `real` is float or
// double, `index_t` int or long long (see conv2d.cu).

// Alone (nvcc --ptx this.cu) the file compiles for float and 32-bit indices; the launcher
// defines TINYTRAIN_TYPES and puts its own typedefs in front (runtime.py).
#ifndef TINYTRAIN_TYPES
typedef float real;
typedef int index_t;
#endif

// The largest logit of a row (a NaN propagates, like NumPy's max) ...
__device__ real row_max(const real* __restrict__ logits, index_t r, index_t C)
{
    real m = logits[r * C];
    for (index_t j = 1; j < C; j++) {
        real v = logits[r * C + j];
        if (v > m || isnan(v)) {
            m = v;
        }
    }
    return m;
}

// ... and the sum of exp(logit - max): log-softmax = (logit - max) - log(this).
__device__ real row_sumexp(const real* __restrict__ logits, index_t r, index_t C, real m)
{
    real z = 0;
    for (index_t j = 0; j < C; j++) {
        z += exp(logits[r * C + j] - m);
    }
    return z;
}

// One block: thread t takes rows t, t + blockDim.x, ...; the block then adds the partial
// sums in shared memory in a fixed tree (reproducible). Block size: a power of two <= 256.
extern "C" __global__ void cross_entropy_forward(const real* __restrict__ logits,
                                                 const long long* __restrict__ targets,
                                                 real* __restrict__ out,
                                                 long long* __restrict__ err, index_t N,
                                                 index_t C, int reduction, long long ignore)
{
    __shared__ real partial[256];
    __shared__ long long bad_count[256];
    __shared__ long long bad_row[256];
    __shared__ long long kept_count[256];
    real s = 0;
    long long count = 0;
    long long first = N;
    long long kept = 0;
    for (index_t r = threadIdx.x; r < N; r += blockDim.x) {
        long long t = targets[r];
        real nll = (real)0 / (real)0;  // NaN, for a target outside [0, C)
        if (t == ignore) {
            nll = 0;
        } else if (t >= 0 && t < C) {
            real m = row_max(logits, r, C);
            real z = row_sumexp(logits, r, C, m);
            nll = log(z) - (logits[r * C + t] - m);
            kept += 1;
        } else {
            count += 1;
            first = min(first, (long long)r);
        }
        if (reduction == 0) {
            out[r] = nll;
        }
        s += nll;
    }
    partial[threadIdx.x] = s;
    bad_count[threadIdx.x] = count;
    bad_row[threadIdx.x] = first;
    kept_count[threadIdx.x] = kept;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
            bad_count[threadIdx.x] += bad_count[threadIdx.x + stride];
            bad_row[threadIdx.x] = min(bad_row[threadIdx.x], bad_row[threadIdx.x + stride]);
            kept_count[threadIdx.x] += kept_count[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (reduction == 1) {
            out[0] = partial[0] / (real)(kept_count[0] + bad_count[0]);
        }
        if (reduction == 2) {
            out[0] = partial[0];
        }
        err[0] = bad_count[0];
        err[1] = bad_row[0];
        err[2] = bad_count[0] > 0 ? targets[bad_row[0]] : 0;
    }
}

// dlogits = (softmax(logits) - onehot(targets)) * scale, scale = grad[r] ("none"),
// grad[0] / (rows not ignored) ("mean") or grad[0] ("sum"); an ignored row's is 0. One thread
// per row (grid-stride over rows). For "mean" every block first counts the rows not ignored
// (N reads of targets per block, a small cost beside the N * C logits each block reads).
extern "C" __global__ void cross_entropy_backward(const real* __restrict__ logits,
                                                  const long long* __restrict__ targets,
                                                  const real* __restrict__ grad,
                                                  real* __restrict__ dlogits, index_t N,
                                                  index_t C, int reduction, long long ignore)
{
    __shared__ long long kept_count[256];
    real denom = 1;
    if (reduction == 1) {
        long long kept = 0;
        for (index_t r = threadIdx.x; r < N; r += blockDim.x) {
            if (targets[r] != ignore) {
                kept += 1;
            }
        }
        kept_count[threadIdx.x] = kept;
        __syncthreads();
        for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
            if (threadIdx.x < stride) {
                kept_count[threadIdx.x] += kept_count[threadIdx.x + stride];
            }
            __syncthreads();
        }
        denom = (real)kept_count[0];
    }
    for (index_t r = (index_t)blockIdx.x * blockDim.x + threadIdx.x; r < N;
         r += (index_t)blockDim.x * gridDim.x) {
        long long t = targets[r];
        real scale = grad[0];
        if (reduction == 0) {
            scale = grad[r];
        }
        if (reduction == 1) {
            scale = grad[0] / denom;
        }
        if (t == ignore) {
            for (index_t j = 0; j < C; j++) {
                dlogits[r * C + j] = 0;
            }
            continue;
        }
        real m = row_max(logits, r, C);
        real lz = log(row_sumexp(logits, r, C, m));
        for (index_t j = 0; j < C; j++) {
            real p = exp((logits[r * C + j] - m) - lz);
            if (j == t) {
                p -= 1;
            }
            dlogits[r * C + j] = p * scale;
        }
    }
}
