"""The example's input, from a formula that C reproduces bit for bit (examples/c/main.c):

    x[i] = (float)((i * 37 + 11) % 101) / 50.0f - 1.0f      (i over the flattened tensor)

Integer arithmetic, then one float32 division and one subtraction, each rounded once,
so numpy and any IEEE C compiler give the same bits.
"""
import numpy as np


def example_input(shape=(1, 3, 32, 32)):
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    x = ((i * 37 + 11) % 101).astype(np.float32) / np.float32(50.0) - np.float32(1.0)
    return x.astype(np.float32).reshape(shape)
