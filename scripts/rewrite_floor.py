#!/usr/bin/env python3
"""The floor of an in-place, locked, atomic, durable rewrite of every transcript in a
directory, for scripts/bench.sh, done in batches as clawkeeper does: for each batch of up to
128 *.jsonl files (at most 256 MiB), create <file>.lock for each, copy each file to a temp
beside it, fsync every temp (in parallel), rename each over its original, fsync the directory
once, then remove the locks. No parsing at all: what is left is the cost of the file-system
operations every crash-safe rewriter pays. A crash at any moment leaves each file old or new,
because every temp of a batch is durable before the first rename."""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

BATCH_FILES = 128
BATCH_BYTES = 256 << 20


def batches(d, names):
    batch, size = [], 0
    for name in names:
        n = os.path.getsize(os.path.join(d, name))
        if batch and (len(batch) == BATCH_FILES or size + n > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(name)
        size += n
    if batch:
        yield batch


def stage(path):
    lock = path + ".lock"
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b'{"pid": %d}\n' % os.getpid())
    os.close(fd)
    tmp = path + ".floor.tmp"
    with open(path, "rb") as src, open(tmp, "xb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    return tmp


def durable(tmp):
    fd = os.open(tmp, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


d = sys.argv[1]
names = sorted(n for n in os.listdir(d) if n.endswith(".jsonl"))
dfd = os.open(d, os.O_RDONLY)
with ThreadPoolExecutor(8) as pool:
    for batch in batches(d, names):
        paths = [os.path.join(d, n) for n in batch]
        temps = list(pool.map(stage, paths))
        list(pool.map(durable, temps))
        for tmp, path in zip(temps, paths):
            os.rename(tmp, path)
        os.fsync(dfd)
        for path in paths:
            os.unlink(path + ".lock")
os.close(dfd)
