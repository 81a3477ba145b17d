#!/usr/bin/env python3
"""The floor of an in-place, locked, atomic, durable rewrite of every transcript in a
directory, for scripts/bench.sh: for each *.jsonl file, create <file>.lock, copy the file to a
temp beside it, fsync, rename over the original, remove the lock, then fsync the directory.
No parsing at all: what is left is the cost of the file-system operations every safe
rewriter pays (on a journal-less ext4, inode allocation after many deletions dominates)."""
import os
import sys

d = sys.argv[1]
for name in sorted(n for n in os.listdir(d) if n.endswith(".jsonl")):
    path = os.path.join(d, name)
    lock = path + ".lock"
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b'{"pid": %d}\n' % os.getpid())
    os.close(fd)
    tmp = path + ".floor.tmp"
    with open(path, "rb") as src, open(tmp, "xb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    os.rename(tmp, path)
    os.unlink(lock)
dfd = os.open(d, os.O_RDONLY)
os.fsync(dfd)
os.close(dfd)
