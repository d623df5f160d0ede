#!/usr/bin/env python3
"""bench-content.py DIR SCALE: write the mixed content of `scripts/bench.sh` into DIR/data and
an airlock spec carrying it as DIR/airlock.toml. At SCALE 1, about 800 MiB:

- 500 MiB of incompressible weights (4 files of 125 MiB), like model weights and gzipped layers;
- 250 MiB of text (10 files of 25 MiB): lines of numbers and Zipf-distributed words, which
  zstd -3 shrinks about 3.2 times, like logs, JSON and source;
- 150 small files of 1 to 64 KiB, half text, half random.

SCALE 2 doubles every count (more files, same sizes), so a run at 2 carries twice the bytes
and twice the members. Seeded: the same SCALE gives the same text and small files.
"""
import itertools, multiprocessing, os, random, sys

MIB = 1 << 20
SYLLABLES = ["ka", "to", "ri", "en", "mo", "sa", "lu", "ve", "ni", "ar", "ost", "ph", "qu", "el", "im", "un",
             "dra", "ce", "xi", "pol"]


def words(rng):
    vocab = ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 4))) for _ in range(6000)]
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))
    return vocab, cum


def text(path, size, seed):
    rng = random.Random(seed)
    vocab, cum = words(rng)
    written, line = 0, 0
    with open(path, "w") as out:
        while written < size:
            batch = rng.choices(vocab, cum_weights=cum, k=50000)
            lines, i = [], 0
            while i < len(batch):
                k = rng.randint(4, 16)
                line += 1
                lines.append(f"{line:08d} {rng.randint(0, 99999)} " + " ".join(batch[i:i + k]))
                i += k
            chunk = "\n".join(lines) + "\n"
            out.write(chunk[: size - written])
            written += min(len(chunk), size - written)


def weights(path, size):
    with open(path, "wb") as out:
        for _ in range(size // MIB):
            out.write(os.urandom(MIB))


def make(job):
    kind, path, size, seed = job
    if kind == "text":
        text(path, size, seed)
    elif kind == "weights":
        weights(path, size)
    else:
        rng = random.Random(seed)
        if seed % 2:
            text(path, size, seed)
        else:
            with open(path, "wb") as out:
                out.write(rng.randbytes(size))


def main():
    root, scale = sys.argv[1], int(sys.argv[2])
    data = os.path.join(root, "data")
    os.makedirs(data, exist_ok=True)
    jobs = [("weights", f"weights-{i:02d}.bin", 125 * MIB, i) for i in range(4 * scale)]
    jobs += [("text", f"text-{i:02d}.txt", 25 * MIB, 1000 + i) for i in range(10 * scale)]
    sizes = random.Random(7)
    jobs += [("small", f"small-{i:03d}.dat", sizes.randint(1, 64) * 1024, 2000 + i) for i in range(150 * scale)]
    with multiprocessing.Pool() as pool:
        pool.map(make, [(k, os.path.join(data, name), size, seed) for k, name, size, seed in jobs])
    with open(os.path.join(root, "airlock.toml"), "w") as spec:
        spec.write(f'[bundle]\nname = "bench"\nversion = "{scale}.0.0"\n')
        for _, name, _, _ in jobs:
            spec.write(f'\n[[file]]\nname = "{name}"\nsource = "data/{name}"\n')


if __name__ == "__main__":
    main()
