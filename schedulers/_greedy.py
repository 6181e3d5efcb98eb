"""Glue from a CostModel to the compiled ETF / min-min loop."""

from ._kernels import greedy_schedule
from .base import kernel_inputs
from .ranks import b_level


def greedy(model, mode: int):
    return greedy_schedule(*kernel_inputs(model), b_level(model), mode)
