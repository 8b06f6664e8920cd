"""PyTorch twin of `forgia bench W10`: W6's character-transformer AdamW step (vocab 65,
context 64, d_model 128, 4 pre-LN layers, 4 heads, MLP 4x with GELU, learned positions,
causal, global batch 32) as DistributedDataParallel on the gloo backend, N ranks x 1 thread,
against 1 process x 1 thread on the same global batch. Prints one line like forgia's:

    name=W10 impl=torch-ddp-gloo median_ms=<dp step> extra=ranks=N,...,throughput_ratio=<r>

Blocks of 5 DDP steps alternate with blocks of 5 single-process steps, as in forgia's W10.

Usage: /work/.venv-torch/bin/python bench/torch_ddp_w10.py [--ranks 2] [--reps 10]
(spawns the ranks itself on loopback; run it in the same session as
`mpirun -np 2 forgia bench W10 --threads 1` and record both lines side by side).
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

V, T, D, L, H, B = 65, 64, 128, 4, 4, 32


class CharTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        layer = nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T), persistent=False)

    def forward(self, ids):
        h = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        h = self.blocks(h, mask=self.mask, is_causal=True)
        return self.head(self.norm(h))


def data():
    g = torch.Generator().manual_seed(6)
    return torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B * T,), generator=g)


BLOCK = 5  # steps per measured block, as forgia's W10


def timed_steps(model, opt, ids, targets, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        logits = model(ids).reshape(-1, V)
        F.cross_entropy(logits, targets).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def rank_main(rank, ranks, reps, port, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    torch.manual_seed(6)
    model = nn.parallel.DistributedDataParallel(CharTransformer())  # bucket_cap_mb=25
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ids, targets = data()
    per = B // ranks
    rows = slice(rank * per, (rank + 1) * per)
    if rank == 0:
        torch.manual_seed(6)
        single = CharTransformer()
        sopt = torch.optim.AdamW(single.parameters(), lr=3e-4)
    # Blocks of DDP steps alternate with blocks of rank 0's single-process steps (the other
    # ranks wait at a barrier), so both medians come from the same stretch of load; one
    # warm-up step of each first.
    dp, alone = [], []
    blocks = -(-reps // BLOCK)
    for block in range(blocks + 1):
        n = 1 if block == 0 else BLOCK
        t = timed_steps(model, opt, ids[rows], targets.view(B, T)[rows].reshape(-1), n)
        dp += t if block else []
        if rank == 0:
            t = timed_steps(single, sopt, ids, targets, n)
            alone += t if block else []
        dist.barrier()
    dp_ms = statistics.median(dp)
    single_ms = torch.tensor([statistics.median(alone) if rank == 0 else 0.0], dtype=torch.float64)
    dist.all_reduce(single_ms)
    if rank == 0:
        ratio = single_ms.item() / dp_ms
        out.put(f"name=W10 impl=torch-ddp-gloo median_ms={dp_ms:.3f} extra=ranks={ranks},threads_per_rank=1,"
                f"global_batch={B},single_ms={single_ms.item():.1f},throughput_ratio={ratio:.2f}")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    if B % args.ranks:
        raise SystemExit(f"the global batch {B} does not split over {args.ranks} ranks")
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.spawn(rank_main, args=(args.ranks, args.reps, args.port, out), nprocs=args.ranks, join=True)
    print(out.get())


if __name__ == "__main__":
    main()
