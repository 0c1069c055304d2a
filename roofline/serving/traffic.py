"""The shape of the requests a server sees."""

from __future__ import annotations

from dataclasses import dataclass

from roofline.workload import check_positive_int


@dataclass(frozen=True)
class Traffic:
    """The shape of the requests: prompt and output tokens (the mean of each)."""

    prompt_len: int = 1024
    output_len: int = 256

    def __post_init__(self) -> None:
        check_positive_int(self.prompt_len, "prompt_len", 1 << 24)
        check_positive_int(self.output_len, "output_len", 1 << 24)

    @property
    def mean_context(self) -> float:
        """The cache a decoding sequence holds on average: the prompt and half the output."""
        return self.prompt_len + self.output_len / 2
